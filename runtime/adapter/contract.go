package adapter

import (
	"context"
	"errors"

	"github.com/shard-dev/shard/protocol"
)

// Backend is one third-party agent behind the adapter: the half of an
// adapter that speaks the agent's own protocol. Its translator reports what
// the agent does through Events, in the agent's order; the Host turns that
// into the Shard per-agent protocol.
type Backend interface {
	// Start starts the agent and opens its session (loading the one of a
	// previous generation where the agent offers that), and says what the
	// agent offers. History a load replays is reported through ev with
	// Replay set before Start returns. Start is called once.
	Start(ctx context.Context, ev Events) (Offer, error)
	// Prompt runs one turn of the agent on a user message of text and
	// images (checked already; images only when Offer.Images) and returns
	// when the agent ended it. Cancelling ctx does not end it: Cancel does.
	Prompt(ctx context.Context, text string, images []protocol.Image) (TurnResult, error)
	// Cancel asks the agent to end the turn in flight (its open permission
	// requests are answered "cancelled" by the Host).
	Cancel()
	// SetMode and SetModel switch the session's mode or model; an agent
	// that offers none returns ErrUnsupported.
	SetMode(ctx context.Context, mode string) error
	SetModel(ctx context.Context, model string) error
	// Done is closed once the agent is gone (exited, or its stream
	// ended); Err then says why.
	Done() <-chan struct{}
	Err() error
	// Close stops the agent and waits for it.
	Close() error
}

// ErrUnsupported is what a Backend returns for something its agent does
// not offer; the Host answers UNSUPPORTED.
var ErrUnsupported = errors.New("not offered by this agent")

// Offer is what the agent offers once its session is open.
type Offer struct {
	// Modes is the agent's mode catalog (empty: it has none) and Mode the
	// active one.
	Modes []protocol.ModeDescriptor
	Mode  string
	// Models is the agent's model catalog (empty: it has none) and Model
	// the active model's id.
	Models []protocol.ModelDescriptor
	Model  string
	// Images says the agent takes images in a prompt (ACP's
	// promptCapabilities.image). Without it a prompt with images is
	// refused UNSUPPORTED, never sent without them.
	Images bool
	// Levels is the agent's reasoning-level catalog (ACP's config option
	// of category thought_level; empty: it has none) and Level the active
	// one.
	Levels []Level
	Level  string
	// Resumed says the agent took up the previous generation's session
	// without replaying it (ACP's session/resume): the Host shows the
	// live window it kept (Options.SessionDir) instead of a replay.
	Resumed bool
}

// Level is one reasoning level of the agent (docs/protocol.md §9.2
// list_reasoning_levels).
type Level struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// LevelSetter is a Backend whose agent has reasoning levels
// (Offer.Levels): SetLevel switches the session's level.
type LevelSetter interface {
	SetLevel(ctx context.Context, level string) error
}

// TurnResult is how a turn ended.
type TurnResult struct {
	// StopReason is the agent's own (ACP: end_turn, max_tokens,
	// max_turn_requests, refusal, cancelled).
	StopReason string
	// Usage is the turn's token usage when the agent reported it (its
	// context_tokens and cost too, where it gave them).
	Usage *protocol.Usage
	// ContextWindow is the size of the agent's context window in tokens,
	// when it said (ACP's usage_update size); it becomes the active
	// model's context_window. 0: not said.
	ContextWindow int
}

// Stop reasons the Host itself interprets.
const (
	StopCancelled = "cancelled"
	StopEndTurn   = "end_turn"
)

// Tool call statuses (ACP's).
const (
	ToolPending    = "pending"
	ToolInProgress = "in_progress"
	ToolCompleted  = "completed"
	ToolFailed     = "failed"
)

// Tool is the current state of one tool call of the agent, as its
// translator merged the agent's updates.
type Tool struct {
	ID   string
	Name string // a short name (the agent's kind or title)
	// Title is the agent's human description of the call.
	Title string
	Args  map[string]any
	// ReadOnly is set when the agent says the call only reads.
	ReadOnly bool
	Status   string
	// Output is the text the call produced so far.
	Output string
	// Diffs are the file changes the call shows.
	Diffs []Diff
}

// Diff is one file change a tool call shows.
type Diff struct {
	Path     string
	Old, New string
}

// Ask is a permission request of the agent: the call it is about and the
// agent's own options.
type Ask struct {
	Tool    Tool
	Options []Option
}

// Option is one of the agent's answers to a permission request.
type Option struct {
	ID   string
	Name string
	// Kind is allow_once, allow_always, reject_once or reject_always.
	Kind string
}

// Option kinds (ACP's).
const (
	AllowOnce    = "allow_once"
	AllowAlways  = "allow_always"
	RejectOnce   = "reject_once"
	RejectAlways = "reject_always"
)

// Answer is the outcome of an Ask: the option chosen, or Cancelled (the
// turn was aborted, or no option fits the answer).
type Answer struct {
	OptionID  string
	Cancelled bool
	// Reason is the person's reason given with the answer
	// (permission_response.reason, docs/protocol.md §9.5); a backend
	// passes it on where its agent can take it (pi: the refusal the model
	// sees; ACP: _meta, which the agent may ignore).
	Reason string
}

// Events receives what the agent does. Every method but Ask returns at
// once; Ask blocks until a client (or the headless policy, a timeout or
// an abort) answers.
type Events interface {
	// UserText is a user message the agent replays (Replay only).
	UserText(text string)
	// UserImage is an image of a user message the agent replays (Replay
	// only); it joins the user message being replayed.
	UserImage(im protocol.Image)
	// Text and Thinking are streamed chunks of the agent's answer.
	Text(text string)
	Thinking(text string)
	// ToolCall reports a new tool call or a change to one.
	ToolCall(t Tool)
	// ModeChanged, ModelChanged and LevelChanged report the agent
	// switching mode, model or reasoning level on its own.
	ModeChanged(mode string)
	ModelChanged(model string)
	LevelChanged(level string)
	// Ask asks the clients for a permission.
	Ask(ctx context.Context, a Ask) Answer
	// ProtocolError reports output of the agent that is not its protocol
	// (the line is dropped, never logged).
	ProtocolError(detail string)
}
