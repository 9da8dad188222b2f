// Package acpface is Shard's ACP face for editors: an Agent Client Protocol
// agent on stdio (the agent side of github.com/coder/acp-go-sdk) that fronts
// a running daemon, so that an editor which launches ACP agents by command
// (Zed, JetBrains, Neovim plugins, acpx) drives Shard's durable agents.
//
// The face is a plain client of the daemon's wire protocol (package client,
// over the unix socket): it holds no authority of its own and links no
// actor, daemon or runtime code. An ACP session is one durable Shard agent,
// and the ACP sessionId is its agent_id. Closing the editor closes the face's
// connection, which detaches it (docs/protocol.md §3): the agent keeps
// running, and a later face resumes it with session/load or session/resume.
//
// What maps to what is docs/protocol.md, Appendix C. The choices made where
// neither protocol decides are written where they are made, and there.
package acpface
