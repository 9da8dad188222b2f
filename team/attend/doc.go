// Package attend is how a team sees and answers what its agents ask.
//
// A team's lead is a durable agent and its workers are subagent children
// of the lead. A child with no interactive client of its own has its
// permission and UI requests delegated to the nearest ancestor that has
// one (docs/protocol.md §6.3), so one interactive attachment to the lead
// sees every question of the team: the lead's own and its workers'. The
// team coordinator turns each into a decision in its queue and, when a
// person decides, answers the request (docs/protocol.md §10.4, "The daemon
// attaches to each lead as an interactive client").
//
// The package exists so that the coordinator, an actor, never does that
// I/O itself: a Watcher is a plain client of the daemon's wire protocol
// (package client) that attaches to one agent, keeps the attachment across
// dropped connections, and hands what happens to a callback the caller
// supplies, as values that say what a person must decide (Request), what
// was decided and by whom (Resolved), and what the team's runs and costs
// do (RunChanged, Usage). It holds no actor code; its goroutines are owned
// (internal/xsync) and end with the context Watch was given.
//
// First answer wins (docs/protocol.md §6.3): the daemon answers a late
// answer success and does nothing with it, so a Watcher tells its caller
// who won by the request's …_resolved event; an answer that lost is an
// *AnsweredError, whose code is CONFLICT.
package attend
