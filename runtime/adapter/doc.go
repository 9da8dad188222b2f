// Package adapter hosts a third-party coding agent as a Shard runtime: the
// process behind `shardd agent --adapter <kind> -- <command…>`, which speaks
// the Shard per-agent protocol (docs/protocol.md §9) to the daemon on
// stdin/stdout and the agent's own protocol to the agent it starts, so that
// the daemon's attach/sync, fan-out, reaping, escalation, permissions and
// jobs work unchanged.
//
// The contract (contract.go) splits an adapter in two: a Backend per
// agent protocol (runtime/adapter/acp for the Agent Client Protocol,
// runtime/adapter/pi for pi's RPC mode),
// whose translator reports what the agent does through Events, and the
// Host, shared by all, which keeps the state the daemon asks for — status,
// mode, the live window it saw, open permission requests — and writes the
// per-agent events. get_sync is answered from that state.
//
// Choices where the agent's protocol has no counterpart (documented in
// docs/protocol.md): steer and follow_up mid-turn both wait for the turn's
// end and run as the next turn (ACP has no mid-turn input), a strict steer
// is UNSUPPORTED; an agent with no modes has the single mode "default"; no
// model catalog, reasoning levels and session_op are UNSUPPORTED; turn_end
// carries the agent's stop_reason.
package adapter
