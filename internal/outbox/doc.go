// Package outbox holds the bounded per-connection outbound queue and the hub
// that broadcasts to every connection.
//
// Actors never block on clients: an agent actor fanning out an
// event pushes a record into each attached connection's Outbox and moves on.
// A connection that stops reading fills its Outbox; past the cap the Outbox
// turns the connection into a slow consumer — pending records are dropped, a
// fatal `error` event is queued in their place and the connection is closed —
// so nobody else slows down (docs/protocol.md §13, P2).
package outbox
