// Package agent is the actor that owns one durable Agent while the daemon
// runs: its attachments and their roles, the fan-out of runtime events, the
// open permission/UI requests (first valid response wins, headless policy
// when nobody can answer), command-id rewriting, the agent's status, and the
// lifecycle of its Runtime generations (start and readiness, resync, idle
// reaping, terminate, kill escalation).
//
// Everything here runs inside Receive and never blocks: the child process is
// owned by a runtime actor (actors/proc), timers are callbacks of the
// injected clock that send a message back, the few goroutines (saving a
// model/mode selection) run in the daemon's xsync.Group, and clients are
// reached through their bounded outboxes.
//
// Files by responsibility: actor.go (the Actor, its state, Receive),
// messages.go (the family's sealed messages), commands.go (client commands
// and their answers: attach, detach, terminate, kill, forwarding under a
// daemon id), relay.go (runtime output to clients), snapshot.go (readiness
// and get_sync: the sync record), requests.go (permission/UI requests and
// the headless policy), delegate.go (requests surfaced by an ancestor),
// lease.go (subagent runs), lifecycle.go (runtime generations, stopping,
// idle reaping, timers), status.go (status, activity, the public
// projection).
package agent
