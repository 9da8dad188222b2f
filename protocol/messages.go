package protocol

import "encoding/json"

// Header is the envelope every message shares (docs/protocol.md §5). It is
// embedded in each typed message so that `id`, `type` and `agent_id` flatten
// into the same JSON object as the payload.
//
// Type is declared first so that every marshalled message starts with
// `{"type":` — PeekType's fast path relies on it, even for responses that
// carry an id.
type Header struct {
	// Type names the message, e.g. "prompt" or "agent.list".
	Type string `json:"type"`
	// ID correlates a command with its response. Events never set it.
	ID string `json:"id,omitempty"`
	// AgentID routes a per-agent message on a daemon connection. It is
	// omitted on direct connections and on orchestrator messages.
	AgentID string `json:"agent_id,omitempty"`
}

// Head returns the envelope of a message; it lets code handle any typed
// message through the Typed interface.
func (h *Header) Head() *Header { return h }

// Typed is implemented by every typed message in this package. (The
// protocol's conversation `Message` keeps its name; see types.go.)
type Typed interface{ Head() *Header }

// Per-agent command types (docs/protocol.md §9).
const (
	TypePrompt              = "prompt"
	TypeSteer               = "steer"
	TypeAbort               = "abort"
	TypeSetMode             = "set_mode"
	TypeListModes           = "list_modes"
	TypeListModels          = "list_models"
	TypeSetModel            = "set_model"
	TypeListReasoningLevels = "list_reasoning_levels"
	TypeSetReasoningLevel   = "set_reasoning_level"
	TypeSessionOp           = "session_op"
	TypePermissionResponse  = "permission_response"
	TypeUIResponse          = "ui_response"
	// TypeGetSync is a daemon → runtime extension (docs/protocol.md §9.1).
	TypeGetSync = "get_sync"
)

// Per-agent event types (docs/protocol.md §9).
const (
	TypeHello                 = "hello"
	TypeSync                  = "sync"
	TypeStatus                = "status"
	TypeResponse              = "response"
	TypeTurnStart             = "turn_start"
	TypeMessageDelta          = "message_delta"
	TypeMessageComplete       = "message_complete"
	TypeToolCall              = "tool_call"
	TypeToolResult            = "tool_result"
	TypeTurnEnd               = "turn_end"
	TypeUsage                 = "usage"
	TypeCompaction            = "compaction"
	TypeError                 = "error"
	TypePermissionRequest     = "permission_request"
	TypePermissionResolved    = "permission_resolved"
	TypeUIRequest             = "ui_request"
	TypeUIResolved            = "ui_resolved"
	TypeModelChanged          = "model_changed"
	TypeModeChanged           = "mode_changed"
	TypeReasoningLevelChanged = "reasoning_level_changed"
)

// ---- Lifecycle events (§9.1) ----

// Hello is the first message on every connection.
type Hello struct {
	Header
	ProtocolVersion string   `json:"protocol_version"`
	ServerVersion   string   `json:"server_version"`
	Capabilities    []string `json:"capabilities"`
}

// LiveWindow is the post-compaction message window carried by sync.
type LiveWindow struct {
	Messages        []Message `json:"messages"`
	CompactionIndex *int      `json:"compaction_index,omitempty"`
}

// Sync is the agent bootstrap event: the authoritative current state.
type Sync struct {
	Header
	Status          AgentStatus       `json:"status"`
	Mode            string            `json:"mode"`
	Capabilities    []string          `json:"capabilities,omitempty"`
	RuntimeEpoch    *int64            `json:"runtime_epoch,omitempty"`
	LiveWindow      LiveWindow        `json:"live_window"`
	PendingRequests []json.RawMessage `json:"pending_requests"`
}

// Status is the agent status event.
type Status struct {
	Header
	Status AgentStatus `json:"status"`
	Detail string      `json:"detail,omitempty"`
}

// ---- Drive commands (§9.2) ----

// Streaming behaviours for prompt.
const (
	BehaviorSteer    = "steer"
	BehaviorFollowUp = "follow_up"
)

// Prompt sends a user message.
type Prompt struct {
	Header
	Message           string  `json:"message"`
	Images            []Image `json:"images,omitempty"`
	StreamingBehavior string  `json:"streaming_behavior,omitempty"`
	// DedupeKey is a Shard extension the daemon sets on completion reports:
	// a runtime that already accepted a prompt with this key (it is kept in
	// the session transcript) acknowledges a repeat without delivering it
	// again, so a report re-sent after a daemon crash is accepted once.
	DedupeKey string `json:"dedupe_key,omitempty"`
}

// Steer is shorthand for a prompt with streaming_behavior "steer".
type Steer struct {
	Header
	Message string  `json:"message"`
	Images  []Image `json:"images,omitempty"`
	// Strict is a Shard extension used by the daemon for subagent.steer
	// (docs/protocol.md §10.3 strict active steer): the runtime accepts the
	// message only into a turn in flight and answers CONFLICT otherwise,
	// instead of starting a new turn with it. On success the response data is
	// SteerData.
	Strict bool `json:"strict,omitempty"`
}

// SteerData is the data of a successful strict steer: the turn it joined.
type SteerData struct {
	TurnID string `json:"turn_id"`
}

// Abort cancels the current turn.
type Abort struct{ Header }

// SetMode switches the agent's mode.
type SetMode struct {
	Header
	Mode string `json:"mode"`
}

// ListModes asks for the mode catalog.
type ListModes struct{ Header }

// ListModels asks for the model catalog.
type ListModels struct{ Header }

// SetModel queues a model selection for the next provider call.
type SetModel struct {
	Header
	Model string `json:"model"`
}

// ListReasoningLevels asks for the active model's reasoning catalog.
type ListReasoningLevels struct{ Header }

// SetReasoningLevel selects a reasoning effort for the given model.
type SetReasoningLevel struct {
	Header
	Model  string `json:"model"`
	Effort string `json:"effort"`
}

// Session operations.
const (
	SessionOpList    = "list"
	SessionOpCompact = "compact"
	SessionOpFork    = "fork"
)

// SessionOp runs a session operation (list, compact, fork).
type SessionOp struct {
	Header
	Op   string         `json:"op"`
	Args *SessionOpArgs `json:"args,omitempty"`
}

// SessionOpArgs holds the op-specific arguments of session_op.
type SessionOpArgs struct {
	KeepRecentTokens *int64 `json:"keep_recent_tokens,omitempty"`
	FromEntryID      string `json:"from_entry_id,omitempty"`
}

// GetSync is the daemon's request for an authoritative state snapshot (a
// daemon → runtime extension, docs/protocol.md §9.1): the snapshot is in the
// runtime's stdout order, so every later line is newer than it. The runtime
// answers with a response whose data is GetSyncData.
type GetSync struct{ Header }

// GetSyncData is the data of the runtime's get_sync response.
type GetSyncData struct {
	Status          AgentStatus       `json:"status"`
	Mode            string            `json:"mode"`
	Capabilities    []string          `json:"capabilities,omitempty"`
	LiveWindow      LiveWindow        `json:"live_window"`
	PendingRequests []json.RawMessage `json:"pending_requests"`
}

// ---- Response envelope (§9.3) ----

// Response answers a command. Command echoes the command's type.
type Response struct {
	Header
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// ---- Streaming & turn events (§9.4) ----

// TurnStart opens a turn.
type TurnStart struct {
	Header
	TurnID string `json:"turn_id"`
}

// Delta kinds of message_delta.
const (
	DeltaText     = "text"
	DeltaToolCall = "tool_call"
	DeltaThinking = "thinking"
)

// MessageDelta is a streaming content-block delta.
type MessageDelta struct {
	Header
	MessageID  string `json:"message_id"`
	BlockIndex int    `json:"block_index"`
	Kind       string `json:"kind"`
	TextDelta  string `json:"text_delta,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	ArgsDelta  string `json:"args_delta,omitempty"`
}

// MessageComplete is the final snapshot of a message.
type MessageComplete struct {
	Header
	MessageID string  `json:"message_id"`
	Message   Message `json:"message"`
}

// ToolCall announces a tool about to execute.
type ToolCall struct {
	Header
	ToolCallID string            `json:"tool_call_id"`
	Name       string            `json:"name"`
	Args       map[string]any    `json:"args"`
	Render     *RenderDescriptor `json:"render,omitempty"`
	ReadOnly   *bool             `json:"read_only,omitempty"`
}

// ToolResult reports a finished tool.
type ToolResult struct {
	Header
	ToolCallID string            `json:"tool_call_id"`
	Content    ToolResultContent `json:"content"`
	IsError    bool              `json:"is_error"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	DurationMs *int64            `json:"duration_ms,omitempty"`
	Render     *RenderDescriptor `json:"render,omitempty"`
}

// TurnEnd closes a turn.
type TurnEnd struct {
	Header
	TurnID string `json:"turn_id"`
	Usage  *Usage `json:"usage,omitempty"`
	// StopReason is why the turn ended, as a third-party agent said it
	// (ACP end_turn, max_tokens, max_turn_requests, refusal, cancelled).
	// Additive (docs/protocol.md, Appendix A); the reference runtime omits it.
	StopReason string `json:"stop_reason,omitempty"`
}

// UsageEvent is emitted after each provider call.
type UsageEvent struct {
	Header
	Usage
}

// Compaction reports a compaction run.
type Compaction struct {
	Header
	Index            int       `json:"index"`
	TokensBefore     int64     `json:"tokens_before"`
	TokensAfter      int64     `json:"tokens_after"`
	FirstKeptEntryID string    `json:"first_kept_entry_id"`
	MessageRange     [2]string `json:"message_range"`
}

// ErrorEvent is an asynchronous error.
type ErrorEvent struct {
	Header
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	Fatal   bool      `json:"fatal,omitempty"`
}

// ---- Permission & UI (§9.5) ----

// PermissionRequest asks attached clients to decide on a tool call.
type PermissionRequest struct {
	Header
	RequestID string             `json:"request_id"`
	ToolName  string             `json:"tool_name"`
	Input     any                `json:"input"`
	Prompt    string             `json:"prompt"`
	Options   []string           `json:"options"`
	Details   []PermissionDetail `json:"details,omitempty"`
	Choices   []PermissionChoice `json:"choices,omitempty"`
}

// PermissionResponse answers a permission request: exactly one of ChoiceID
// or Decision is set.
type PermissionResponse struct {
	Header
	RequestID string `json:"request_id"`
	ChoiceID  string `json:"choice_id,omitempty"`
	Decision  string `json:"decision,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Source is a Shard extension set by the daemon when it forwards the
	// winning response ("headless", or the answering connection), so the
	// runtime can echo it in permission_resolved. Clients do not set it.
	Source string `json:"source,omitempty"`
}

// PermissionResolved closes a permission request for every client.
type PermissionResolved struct {
	Header
	RequestID string `json:"request_id"`
	Decision  string `json:"decision,omitempty"`
	ChoiceID  string `json:"choice_id,omitempty"`
	Source    string `json:"source,omitempty"`
}

// UI request kinds.
const (
	UISelect  = "select"
	UIConfirm = "confirm"
	UIInput   = "input"
	UIEditor  = "editor"
	UINotify  = "notify"
)

// UIRequest asks attached clients for a UI dialog.
type UIRequest struct {
	Header
	RequestID   string   `json:"request_id"`
	Kind        string   `json:"kind"`
	Title       string   `json:"title,omitempty"`
	Message     string   `json:"message,omitempty"`
	Options     []string `json:"options,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Prefill     string   `json:"prefill,omitempty"`
	NotifyType  string   `json:"notify_type,omitempty"`
	// Multiple is a Shard extension (docs/protocol.md §9.5): a select
	// whose person may pick several options, answered with a list of
	// strings. Absent or false: one option, answered with a string.
	Multiple bool `json:"multiple,omitempty"`
}

// UIResponse answers a UI request. Value is a string, a list of strings or
// null; it is kept raw so that null and absence can be told apart.
type UIResponse struct {
	Header
	RequestID string          `json:"request_id"`
	Value     json.RawMessage `json:"value"`
	// Source: see PermissionResponse.Source.
	Source string `json:"source,omitempty"`
}

// UIResolved closes a UI request for every client.
type UIResolved struct {
	Header
	RequestID string          `json:"request_id"`
	Value     json.RawMessage `json:"value"`
	Source    string          `json:"source,omitempty"`
}

// ---- Model / mode events (§10.2) ----

// ModelChanged reports an accepted set_model.
type ModelChanged struct {
	Header
	Previous     ModelDescriptor `json:"previous"`
	Active       ModelDescriptor `json:"active"`
	Effective    string          `json:"effective"`
	Capabilities []string        `json:"capabilities,omitempty"`
}

// ModeChanged reports a real mode change.
type ModeChanged struct {
	Header
	PreviousMode string `json:"previous_mode"`
	Mode         string `json:"mode"`
}

// ReasoningLevelChanged reports a real reasoning-level change.
type ReasoningLevelChanged struct {
	Header
	Model     ModelDescriptor `json:"model"`
	Previous  string          `json:"previous"`
	Active    string          `json:"active"`
	Effective string          `json:"effective"`
}
