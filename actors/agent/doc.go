// Package agent is the actor that owns one durable Agent while the daemon
// runs: its attachments and their roles, the fan-out of runtime events, the
// open permission/UI requests (first valid response wins, headless policy
// when nobody can answer), command-id rewriting, the agent's status, and the
// lifecycle of its Runtime generations (start and readiness, resync, idle
// reaping, terminate, kill escalation).
//
// Everything here runs inside Receive and never blocks: the child process is
// owned by a runtime actor, timers are time.AfterFunc callbacks that send a
// message back, and clients are reached through their bounded outboxes.
package agent
