// Package refagent is Shard's reference agent Runtime: the process behind
// `shardd agent --headless`, speaking the per-agent protocol
// (docs/protocol.md §9) as JSONL on stdin/stdout.
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
// the default "sim" (docs/sim.md), which is offline and deterministic, so
// that demos, tests and benchmarks need no network: lines of a user message
// that start with `sim:` script what the "model" does — stream text or
// thinking, call tools through the permission gate, ask UI questions,
// sleep, flood, fail, hang or exit — so that every path of the protocol can
// be exercised. The sim implements the same provider.Provider interface as
// the real providers, and the turn loop treats them alike; only the sim's
// runtime-level directives (ask, hang, exit) call back into the turn. The
// model and reasoning level can be switched with set_model and
// set_reasoning_level; a switch applies from the next provider call on,
// never to a stream in flight.
//
// # Tools
//
// The tools are the built-ins of runtime/tools (read, ls, grep, find: read
// only; write, edit, bash: mutating, asked through the permission gate and
// refused in plan mode), the subagent tool, which reaches the daemon
// (subagent.go), recall, which reads back what a compaction summarized
// (recall.go), and, for an agent with skills, the skill tool
// (skilltool.go). bash runs without the provider's API key variable.
// The tools of the agent's MCP servers (Options.MCPServers, mcp.go) join
// them as <server>__<tool>: read-only when the server annotates them
// readOnlyHint, else mutating like write.
// Options.Tools limits them: the model is offered only those, and a call
// of another is a tool error, never run.
//
// The system prompt is the runtime's own, then what was read when the
// runtime started (sysprompt.go): a subagent's delegated prompt, the
// project's AGENTS.md (or CLAUDE.md) and the names and descriptions of the
// agent's skills (runtime/skills).
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
// session_op list, compact and fork follow docs/protocol.md §9.2
// (sessionop.go, compaction.go). Compaction also runs on its own: between
// turns when the context is above 80% of the window, and before a provider
// call when it has reached the window; both emit the compaction event.
// allow_always grants are kept in grants.jsonl next to the transcript, so
// they hold for the Agent across restarts. A prompt's or steer's images
// are stored in images/ next to it (runtime/images, docs/protocol.md §13
// P4) before its message is written; the message names them with image
// blocks, each provider call reads their bytes back, and get_image serves
// them. A model named in Options.TextOnlyModels, or in its provider's
// ProviderSpec.TextOnlyModels, refuses images UNSUPPORTED.
// The selected reasoning level is kept in reasoning.json (reasoning.go),
// saved before set_reasoning_level is answered, so it is session-scoped as
// docs/protocol.md §9.2 says.
//
// # Parts
//
// Run builds a runtime (runtime.go), which coordinates parts that each own
// their state and the methods that change it:
//
//   - output (output.go): Stdout. Every event and response leaves through
//     it, one record per Write; it goes silent after a failed write or
//     `sim: hang`.
//   - agentStatus (status.go): the agent status and the idle-trim timer
//     that follows it.
//   - selection (models.go): the mode, the model and its reasoning level,
//     chosen from the fixed catalog of the provider (models); it answers
//     the mode, model and reasoning commands.
//   - conversation (conversation.go, compaction.go, sessionop.go): the live
//     window with its meta (thinking signatures, exit codes) and the latest
//     compaction, backed by the session store (session, session.go), which
//     writes transcript lines in order and makes them durable. It plans,
//     writes and installs compactions, lists the session and forks it.
//   - requests (requests.go): the open permission and UI requests, and
//     the answers to them.
//   - turnLoop (turn.go): the turn in flight, the follow-ups queued behind
//     it, the between-turn compaction running, shutdown, and the dedupe
//     keys of prompts accepted.
//   - grants (grants.go): the allow_always grants and grants.jsonl.
//   - toolbox (tools.go, subagent.go, recall.go, skilltool.go): the
//     tools, immutable; when an MCP server says its tools changed, a new
//     toolbox replaces it for the next provider call (mcp.go).
//   - promptContext (sysprompt.go): what the system prompt carries
//     besides the runtime's own text, immutable.
//
// The runtime handles commands (the stdin reader) and moves work between
// the parts: it starts turns and between-turn compactions and answers
// session_op. A turn's goroutine is turnState's (turn.go, providercall.go
// for the provider calls, toolcall.go for the tool calls and the permission
// gate).
//
// # Ordering guarantee
//
// One mutex, runtime.mu, guards the state of the parts (status, selection,
// conversation, requests, turn loop) and is held for every output record. A
// state change and the event announcing it are written under the same
// critical section, so the answer to get_sync (the daemon's own extension
// of the protocol: a request for an authoritative snapshot of the state)
// reflects exactly the events written before it and none written after:
// the daemon can resync clients from it without gaps or duplicates.
// Methods named ...Locked, of the runtime and of its parts, are called
// with runtime.mu held.
//
// The mutex is never held across a transcript fsync: an entry is written
// (write(2)) under it, in state order, fsynced without it, and the state
// change it backs is made and announced under it again (session.go). So a
// slow disk delays the turn that wrote, not the commands that only read.
// Nor is it held while a turn waits for the provider, a tool or an answer.
//
// Lock order: runtime.mu, then output.mu (which only keeps records whole)
// or the session store's locks (session.smu before session.wmu; smu is
// never taken with runtime.mu held). grants.mu is a leaf taken without
// runtime.mu: no event announces a grant.
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
