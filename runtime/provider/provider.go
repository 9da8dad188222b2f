package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/shard-dev/shard/protocol"
)

// Provider names accepted by New.
const (
	NameOpenAI    = "openai"
	NameAnthropic = "anthropic"
)

// Default models used when Config.Model is empty.
const (
	DefaultOpenAIModel    = "gpt-4.1"
	DefaultAnthropicModel = "claude-sonnet-4-5"
)

// DefaultMaxRetries is a sensible Config.MaxRetries for production use: the
// SDKs retry connection failures, 408, 409, 429 and 5xx answers with
// exponential backoff, before any byte of the stream was read.
const DefaultMaxRetries = 2

// Request is one provider call.
type Request struct {
	// Model is the provider's model id; empty means Config.Model.
	Model string
	// System is the system prompt; empty sends none.
	System string
	// Messages is the conversation in the wire protocol's shape
	// (docs/protocol.md §11): user and assistant messages; assistant blocks
	// are text, thinking and tool_call; tool results are user messages with
	// tool_result blocks. A user message's image blocks are sent with their
	// base64 Data (docs/protocol.md §13 P4); one without Data is sent as a
	// line of text saying an image was there.
	Messages []protocol.Message
	// Tools are the tools the model may call.
	Tools []ToolSpec
	// Reasoning is a level id from ReasoningLevels; "" is the provider's
	// default (anthropic: no thinking; openai: no reasoning_effort sent).
	Reasoning string
	// MaxTokens caps the answer. 0 picks a default: for anthropic a per-model
	// value (raised to fit the thinking budget); for openai none is sent, so
	// the server's own limit applies.
	MaxTokens int
	// Signatures holds the provider's opaque signatures of the thinking
	// blocks in Messages, keyed by message id and block index, as received in
	// Event.Signature. Anthropic requires them to send thinking back; a
	// thinking block without one is dropped. May be nil.
	Signatures map[BlockRef]Signature
}

// BlockRef names one content block of a Request message.
type BlockRef struct {
	MessageID string // protocol.Message.ID
	Index     int    // index into protocol.Message.Content
}

// Signature is the opaque proof a provider attached to a thinking block.
type Signature struct {
	// Value is the signature (Anthropic "signature"), or the encrypted
	// content of a redacted thinking block (Anthropic "data").
	Value string
	// Redacted marks a redacted thinking block, whose text is empty.
	Redacted bool
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string
	Description string
	// Schema is the JSON schema of the tool's arguments, an object schema.
	// Empty means an object without properties.
	Schema json.RawMessage
}

// EventKind says what an Event carries.
type EventKind int

// Event kinds.
const (
	// EventText carries a text delta (Text) of block Index.
	EventText EventKind = iota + 1
	// EventThinking carries a thinking delta (Text) of block Index, or the
	// block's Signature (Text empty). For a redacted thinking block it
	// carries Redacted and the encrypted data in Signature.
	EventThinking
	// EventToolCallStart opens tool-call block Index: ToolCallID and
	// ToolName. It precedes every EventToolCallArgs of the block.
	EventToolCallStart
	// EventToolCallArgs carries a fragment (ArgsDelta) of the arguments'
	// JSON text of tool-call block Index. A call without arguments may have
	// none; treat an empty concatenation as {}.
	EventToolCallArgs
	// EventUsage carries the call's token usage. It is sent at most once,
	// right before EventStop, and not at all when the server sent none.
	EventUsage
	// EventStop ends the answer with StopReason. Next returns io.EOF after it.
	EventStop
)

// String returns the kind's name, for logs and test failures.
func (k EventKind) String() string {
	switch k {
	case EventText:
		return "text"
	case EventThinking:
		return "thinking"
	case EventToolCallStart:
		return "tool_call_start"
	case EventToolCallArgs:
		return "tool_call_args"
	case EventUsage:
		return "usage"
	case EventStop:
		return "stop"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Stop reasons reported by EventStop. Anthropic's own reasons
// ("stop_sequence", "pause_turn", "refusal", …) pass through unchanged; an
// OpenAI finish_reason without an equivalent passes through as is.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
)

// Event is one step of a streamed answer.
type Event struct {
	Kind EventKind
	// Index is the content block's index within the assistant message:
	// the same for every event of one block, and numbered 0, 1, 2, … in the
	// order the blocks' first events arrive, so it is the block's position
	// in the assembled message (and in BlockRef.Index when it is sent back).
	// Unset on EventUsage and EventStop.
	Index int
	// Text is the text or thinking delta.
	Text string
	// ToolCallID and ToolName are set on EventToolCallStart.
	ToolCallID, ToolName string
	// ArgsDelta is set on EventToolCallArgs: a JSON text fragment.
	ArgsDelta string
	// Usage is set on EventUsage. Input excludes cache reads and writes
	// (Anthropic's convention, also applied to OpenAI's cached tokens);
	// ContextTokens is everything the call consumed and produced.
	Usage *protocol.Usage
	// StopReason is set on EventStop: StopEndTurn, StopToolUse,
	// StopMaxTokens or a provider-specific reason.
	StopReason string
	// Signature is set on an EventThinking that carries a thinking block's
	// signature (Anthropic), needed to send the block back later; see
	// Request.Signatures.
	Signature string
	// Redacted marks an EventThinking for a redacted thinking block; its
	// encrypted data is in Signature.
	Redacted bool
}

// Stream is one streamed answer.
//
// Next returns the next event, io.EOF after EventStop, and otherwise an error
// carrying PROVIDER_ERROR; once it returned an error it keeps returning it.
// Next must not be called concurrently with itself. Close releases the HTTP
// stream; it may be called from any goroutine, also while Next is blocked
// (which then returns promptly), and more than once.
type Stream interface {
	Next() (Event, error)
	Close() error
}

// Level is one reasoning level of a model (docs/protocol.md §9.2 reasoning
// catalog).
type Level struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Provider is a model service.
type Provider interface {
	// Name is "openai" or "anthropic".
	Name() string
	// Stream sends req and returns its answer once the service accepted it.
	// An error (HTTP status, connection failure, invalid request) carries
	// PROVIDER_ERROR. Cancelling ctx aborts the HTTP stream promptly.
	Stream(ctx context.Context, req Request) (Stream, error)
	// Models is the secret-free model catalog; it holds at least the
	// configured model, first.
	Models() []protocol.ModelDescriptor
	// ReasoningLevels lists the reasoning levels the model accepts in
	// Request.Reasoning, or nil when it has none.
	ReasoningLevels(model string) []Level
}

// Config configures a Provider.
type Config struct {
	// Name is "openai" or "anthropic".
	Name string
	// BaseURL is the service endpoint; empty means the service's own
	// (https://api.openai.com/v1/, https://api.anthropic.com/). For an
	// OpenAI-compatible server it is the URL the "/chat/completions" path is
	// appended to, usually ending in "/v1".
	BaseURL string
	// Model is the default model; empty means DefaultOpenAIModel or
	// DefaultAnthropicModel.
	Model string
	// APIKey is the key, already read by the caller from the environment
	// variable named by provider.api_key_env. It is sent only in the
	// service's auth header and never appears in errors. May be empty for
	// local servers.
	APIKey string
	// HTTPClient overrides the HTTP client; nil means a plain client without
	// timeouts (a stream lasts as long as the model writes; cancel the
	// context to stop it).
	HTTPClient *http.Client
	// MaxRetries is how many times the SDK retries a failed request before
	// streaming starts; 0 means no retries. See DefaultMaxRetries.
	MaxRetries int
	// ContextWindow is the configured model's context window in tokens,
	// reported in Models; 0 means the known value for well-known models and
	// none otherwise.
	ContextWindow int
}

// New returns the provider cfg.Name names: "openai" or "anthropic". An
// unknown name yields an error wrapping ErrUnknownProvider.
func New(cfg Config) (Provider, error) {
	if cfg.MaxRetries < 0 {
		return nil, fmt.Errorf("%w: MaxRetries must not be negative", ErrInvalidConfig)
	}
	if cfg.ContextWindow < 0 {
		return nil, fmt.Errorf("%w: ContextWindow must not be negative", ErrInvalidConfig)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	switch cfg.Name {
	case NameOpenAI:
		return newOpenAI(cfg), nil
	case NameAnthropic:
		return newAnthropic(cfg), nil
	}
	return nil, fmt.Errorf("%w %q (want %q or %q)", ErrUnknownProvider, cfg.Name, NameOpenAI, NameAnthropic)
}

// DefaultAPIKeyEnv is the conventional environment variable holding the key
// of the named provider ("" for an unknown name), for a provider.api_key_env
// left empty.
func DefaultAPIKeyEnv(name string) string {
	switch name {
	case NameOpenAI:
		return "OPENAI_API_KEY"
	case NameAnthropic:
		return "ANTHROPIC_API_KEY"
	}
	return ""
}
