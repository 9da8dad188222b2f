// Package gateway is where clients enter the daemon: the unix socket
// (JSONL, local trust, spec §4.2) and the WebSocket endpoint `/ws` (one JSON
// message per text frame, ticket-authenticated, spec §2.2, §4.1), the
// single-use WS tickets, and one connection actor per client.
//
// A connection actor sends `hello` first, decodes every inbound record (a bad
// record gets an INVALID_REQUEST response and the connection stays open),
// hands commands to the registry, and owns the connection's Outbox: a writer
// goroutine drains it to the transport, so nothing in the daemon ever blocks
// on a client. No WebSocket path exists without a ticket.
package gateway
