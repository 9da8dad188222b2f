// Package server serves the AgentCraft v1 dialect (docs/agentcraft.md) on a
// WebSocket endpoint on loopback, for the clients that speak it (the
// AgentCraft mod and its command-line tools), so that they can drive a
// Shard team.
//
// It is a translator, not a second daemon: it holds no authority of its
// own. Toward the daemon it is an ordinary client of Shard's wire protocol
// (package client, over the daemon's unix socket): it reads the team's
// records with the team.* commands and follows them with the team_* events
// (docs/protocol.md §10.4), the agents with agent.list and the agent_*
// events, and carries every dialect message out as the Shard command it
// means. Toward its WebSocket clients it keeps a projection of those
// records in the dialect's shapes (package agentcraft/wire): a snapshot for
// every hello, then the upserts each event causes, to every client.
//
// It depends on agentcraft/wire, protocol and client only, so that it
// could run outside shardd as well as inside it (internal/daemon starts it
// when agentcraft.enabled is set).
//
// Concurrency: one goroutine reads the daemon connection's events and
// applies them to the projection; each WebSocket connection has a reader
// goroutine (which carries its client's messages out, one at a time) and a
// writer goroutine draining a bounded outbox. The projection is guarded by
// one mutex, under which a snapshot and every broadcast are queued, so each
// client sees its snapshot followed by exactly the changes after it.
package server
