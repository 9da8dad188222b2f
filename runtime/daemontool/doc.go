// Package daemontool turns a model's tool arguments into the daemon
// commands of Shard's orchestration — subagent jobs (docs/protocol.md §10.3)
// and teams (§10.4) — sends each as one agent over the daemon socket, and
// shapes the answer for a tool result.
//
// Two places offer these tools to a model: the reference runtime's
// `subagent` and `team` tools (runtime/refagent) and Shard's MCP server for
// agents hosted through ACP (runtime/shardmcp). Both build their commands
// and read their answers here, so that a model's arguments mean the same
// daemon command wherever it calls them.
//
// Every command names the calling agent (parent_agent_id, by_agent_id,
// author, from_agent_id): the daemon, not this package, enforces leases,
// limits and privacy for that agent. A call dials the socket, sends the
// command, reads its answer and closes the connection; closing it is what
// ends a pending subagent.wait at the daemon when a caller gives up.
package daemontool
