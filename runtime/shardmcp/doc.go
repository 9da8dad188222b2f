// Package shardmcp is Shard's orchestration as an MCP server for a hosted
// agent: an agent Shard runs through the ACP adapter (Claude Code, Codex,
// Gemini CLI) reaches subagent jobs and its team through MCP tools, the way
// the reference runtime's own agents use their `subagent` and `team` tools.
//
// The server is `shardd mcp` on stdio. It acts as one agent, the one named
// by SHARD_AGENT_ID, on the daemon socket SHARD_SOCKET: each tool call is
// one daemon command naming that agent as the parent or author, built and
// read by runtime/daemontool exactly as the reference runtime's tools build
// and read theirs. The daemon therefore enforces the same leases, limits and
// privacy for a hosted agent as for its own: a child's final text only to
// its owning parent, task text never in an answer, jobs.max_active and the
// other limits. A refusal is an MCP tool error (isError) whose text is
// "<command> failed: <CODE>: <message>" and whose structured content
// carries the code.
//
// The tools, one per command (docs/protocol.md, Appendix B):
//
//	subagent_create    subagent.create      (one child, or a batch)
//	subagent_wait      subagent.wait        read-only
//	subagent_status    subagent.status      read-only
//	subagent_steer     subagent.steer
//	subagent_stop      subagent.stop        destructive
//	team_create_tasks  team.task.create
//	team_goals         team.goal.list       read-only
//	team_board         team.goal.show       read-only
//	team_memory_list   team.memory.list     read-only
//	team_memory_write  team.memory.put
//	team_message       team.message
//	team_decisions     team.decision.list   read-only
//	team_answer        team.decision.answer (by_agent_id: the daemon takes
//	                   question decisions only from an agent)
//
// One tool per action, rather than the runtime's one tool with an action
// argument, because an MCP host lists, allows and shows tools by name: a
// person can allow subagent_status always and still be asked for
// subagent_stop, and each tool's schema holds only its own arguments.
package shardmcp
