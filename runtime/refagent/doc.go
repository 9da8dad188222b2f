// Package refagent is Shard's reference agent Runtime: the process behind
// `shardd agent --headless`, speaking the per-agent protocol (wire spec §9) as
// JSONL on stdin/stdout.
//
// # Turns
//
// A prompt starts a turn, which loops: one provider call, streamed to the
// client as message_delta events and closed by message_complete and usage;
// then the tool calls of that answer, each through the permission gate and
// reported with tool_call and tool_result; then the next provider call with
// the results, until an answer calls no tool and no steer is waiting. A
// steer joins the live window before the next provider call; a follow-up
// waits for the turn's end; abort cancels the provider stream and any
// running tool.
//
// # Providers
//
// Options.Provider chooses the model provider: "openai" (any
// OpenAI-compatible server) or "anthropic", both from runtime/provider, or
// the default "sim" (DESIGN §6), which is offline and deterministic: lines
// of a user message that start with `sim:` script what the "model" does —
// stream text or thinking, call tools through the permission gate, ask UI
// questions, sleep, flood, fail, hang or exit — so that every path of the
// protocol can be exercised without a network. The sim implements the same
// provider.Provider interface as the real providers, and the turn loop
// treats them alike; only the sim's runtime-level directives (ask, hang,
// exit) call back into the runtime. The model and reasoning level can be
// switched with set_model and set_reasoning_level; a switch applies from
// the next provider call on, never to a stream in flight.
//
// # Tools
//
// The tools are the built-ins of runtime/tools (read, ls, grep, find: read
// only; write, edit, bash: mutating, asked through the permission gate and
// refused in plan mode) and the subagent tool, which reaches the daemon
// (subagent.go). bash runs without the provider's API key variable.
//
// # Sessions
//
// With Options.SessionDir set, the session is an append-only JSONL
// transcript, session.jsonl, of typed entries with ids (session.go):
// messages, compactions and, in a fork, the fork-marker checkpoint. An
// assistant message is written and synced before its message_complete, a
// batch of tool results once its last tool ran: every message of a turn is
// on disk before its turn_end. A restarted runtime replays the transcript
// and reports the live window (after the latest compaction) in sync; a
// transcript that cannot be replayed safely stops Run with SESSION_CORRUPT
// (after hello and a fatal error event), never with an empty session.
//
// session_op list, compact and fork follow wire spec §9.2 (sessionop.go,
// compaction.go). Compaction also runs on its own: between turns when the
// context is above 80% of the window, and before a provider call when it
// has reached the window; both emit the compaction event. allow_always
// grants are kept in grants.jsonl next to the transcript, so they hold for
// the Agent across restarts.
//
// # Ordering guarantee
//
// One mutex guards all runtime state (status, mode, model selection, live
// window, open permission/UI requests, the current turn) and the writing of
// every output record. A state change and the event announcing it are
// written under the same critical section, so the answer to the daemon's
// `get_sync` extension (DESIGN §4) reflects exactly the events written
// before it and none written after: the daemon can resync clients from it
// without gaps or duplicates.
//
// The mutex is never held across a transcript fsync: an entry is written
// (write(2)) under it, in state order, fsynced without it, and the state
// change it backs is made and announced under it again (session.go). So a
// slow disk delays the turn that wrote, not the commands that only read.
//
// # Concurrency
//
// Run owns every goroutine it starts: one stdin reader that handles commands
// (it never waits for a turn), and at most one goroutine at a time that
// plays a turn (provider calls and tools) or a between-turn compaction
// (whose summary may be a provider call). Run waits for both before it
// returns. A call of the subagent tool, which talks to the daemon over
// Options.Socket on a connection of its own, drains that connection's events
// in one more goroutine and waits for it before the call returns.
package refagent
