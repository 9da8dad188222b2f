package attend

import (
	"github.com/shard-dev/shard/protocol"
)

// Event is what a Watcher reports to Options.Events: Synced, Request,
// Resolved, Notice, RunChanged, Usage, Status, Detached or Stopped.
type Event interface{ isEvent() }

// Request kinds.
const (
	// KindPermission is a permission_request: a tool call waits for it.
	KindPermission = "permission"
	// KindQuestion is a ui_request that asks something (select, confirm,
	// input, editor).
	KindQuestion = "question"
)

// Synced says the Watcher is attached and has the agent's authoritative
// state (a sync, docs/protocol.md §6.4): after Watch, after each reattach,
// and when the agent's runtime restarted. The open requests of that sync
// follow as Requests with Resync set.
type Synced struct {
	AgentID string
	// Status is the agent's status in the sync.
	Status protocol.AgentStatus
	// RuntimeEpoch is the runtime generation (0, then one more per new
	// process), when the daemon gave it.
	RuntimeEpoch *int64
	// Reattached is true for every sync after the first attachment of
	// this Watcher: requests may have been resolved meanwhile (they are
	// reported as Resolved with Missed set).
	Reattached bool
}

// Request is an open permission_request or ui_request a person may answer:
// the attached agent's own, or a descendant's delegated to it (AgentID
// then names the descendant). The same RequestID is reported again after
// each resync while it stays open: a caller dedups by RequestID.
type Request struct {
	// AgentID is the agent that asks (the record's agent_id).
	AgentID   string
	RequestID string
	// Kind is KindPermission or KindQuestion.
	Kind string
	// Resync is true when the request came from a sync rather than live:
	// the caller may have seen it before.
	Resync bool

	// Tool is a permission request's tool name; Input its arguments as
	// the runtime gave them, and Summary the one thing they act on (a
	// path, a command line), cut to a line.
	Tool    string
	Input   any
	Summary string
	// Prompt is a permission request's question ("Allow write to …?").
	Prompt string
	// Choices are a permission request's server-built choices
	// (docs/protocol.md §9.5), when it offered any.
	Choices []protocol.PermissionChoice

	// Title and Message are a question's text.
	Title   string
	Message string
	// UIKind is the question's kind: protocol.UISelect, UIConfirm, UIInput
	// or UIEditor.
	UIKind string
	// Multiple marks a select where several options may be picked.
	Multiple bool
	// Placeholder and Prefill are an input's or editor's hints.
	Placeholder string
	Prefill     string

	// Options are the answers to offer, the first the default: a
	// permission's option labels (protocol.OptionAllowOnce,
	// OptionAlwaysAllow, OptionDeny, those the request offers), a
	// select's options, a confirm's "yes" and "no"; none for input and
	// editor (free text).
	Options []string
}

// Resolved says an open request was closed: answered by this Watcher, by
// another client first, by the agent's headless policy, or withdrawn (an
// abort, a timeout, the runtime's exit). It is reported once per Request
// the Watcher reported.
type Resolved struct {
	AgentID   string
	RequestID string
	// Kind is the Request's kind.
	Kind string
	// Decision and ChoiceID are a permission's answer as resolved (one of
	// them); Option is its label (protocol.OptionAllowOnce, …).
	Decision string
	ChoiceID string
	// Value is a question's answer: a string, a []string, or nil
	// (dismissed). Option is the answer when it is one string.
	Value  any
	Option string
	// Source is who resolved it as the daemon said: the answering
	// client's transport ("unix", "websocket"), or "headless", "timeout",
	// "abort", "runtime_exit", … Empty when Missed.
	Source string
	// Mine is true when the answer that won is the one this Watcher sent.
	// Two clients that send the same answer at once cannot be told apart:
	// the outcome is the same, and it counts as Mine.
	Mine bool
	// By is whom the Watcher's winning answer was sent for
	// (AnswerQuestionBy); "" when it was its own user's, or not Mine.
	By string
	// Missed is true when the request was closed while the Watcher was
	// detached (it is missing from the next sync): how is unknown.
	Missed bool
}

// Notice is a ui_request of kind notify: it asks nothing (the runtime
// resolves it at once), so it is only shown.
type Notice struct {
	AgentID    string
	RequestID  string
	Title      string
	Message    string
	NotifyType string // info, warning or error
}

// RunChanged is a persisted transition of one of the attached agent's
// subagent runs (subagent_run_changed, docs/protocol.md §10.3), live only:
// after Detached, a caller that tracks runs reads subagent.status again.
type RunChanged struct {
	protocol.SubagentRunChanged
	// ChildAgentID is the run's child agent (the record's agent_id).
	ChildAgentID string
}

// Usage is the attached agent's usage after one provider call.
type Usage struct {
	AgentID string
	protocol.Usage
}

// Status is the attached agent's status event (idle, streaming, …).
type Status struct {
	AgentID string
	Status  protocol.AgentStatus
	Detail  string
}

// Detached says the connection was lost, or an attach failed; the Watcher
// dials and attaches again (backing off) until its context ends.
type Detached struct {
	Err error
}

// Stopped is the last event: the Watcher ended, because its context did
// (Err is the context's error), because the daemon refused the attach for
// good (Err carries its code: NOT_FOUND, the agent is gone;
// PERMISSION_DENIED), or because Options.Events panicked. Nothing follows
// it.
type Stopped struct {
	Err error
}

func (Synced) isEvent()     {}
func (Request) isEvent()    {}
func (Resolved) isEvent()   {}
func (Notice) isEvent()     {}
func (RunChanged) isEvent() {}
func (Usage) isEvent()      {}
func (Status) isEvent()     {}
func (Detached) isEvent()   {}
func (Stopped) isEvent()    {}
