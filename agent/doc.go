// Package agent is Shard's reference agent Runtime: the process behind
// `shardd agent --headless`, speaking the per-agent protocol (wire spec §9) as
// JSONL on stdin/stdout.
//
// It exists so that the daemon, the clients and their tests have a real,
// deterministic, offline agent to drive. Its model is the `sim` provider
// (DESIGN §6): lines of a user message that start with `sim:` script what the
// "model" does — stream text or thinking, call tools through the permission
// gate, ask UI questions, sleep, flood, fail, hang or exit — so that every
// path of the protocol can be exercised without a network.
//
// # Ordering guarantee
//
// One mutex guards all runtime state (status, mode, live window, open
// permission/UI requests, the current turn) and the writing of every output
// record. A state change and the event announcing it are written under the
// same critical section, so the answer to the daemon's `get_sync` extension
// (DESIGN §4) reflects exactly the events written before it and none written
// after: the daemon can resync clients from it without gaps or duplicates.
//
// # Concurrency
//
// Run owns every goroutine it starts: one stdin reader that handles commands
// (it never waits for a turn), and at most one turn goroutine at a time that
// plays the sim provider and runs tools. Run waits for both before it
// returns. A call of the subagent tool, which talks to the daemon over
// Options.Socket on a connection of its own, drains that connection's events
// in one more goroutine and waits for it before the call returns.
package agent
