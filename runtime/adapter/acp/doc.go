// Package acp is the adapter backend for agents that speak the Agent
// Client Protocol (JSON-RPC over the agent's stdio, github.com/coder/acp-go-sdk):
// Gemini CLI, codex-acp, claude-agent-acp and others. The adapter is the
// ACP client: it starts the agent, runs initialize (advertising
// fs/read_text_file and fs/write_text_file, confined to the agent's cwd,
// writes asked through the permission gate; and terminal/*, every
// command asked through the same gate, terminal.go), opens or loads
// the session, sends session/prompt and session/cancel, and translates
// session/update (translate.go) and session/request_permission for the
// adapter Host.
package acp
