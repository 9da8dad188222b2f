package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/shard-dev/shard/protocol"
)

// openaiProvider speaks OpenAI-compatible chat completions.
type openaiProvider struct {
	cfg  Config
	chat openai.ChatCompletionService
	// official is true for OpenAI's own endpoint, which wants
	// max_completion_tokens; compatible servers get max_tokens.
	official bool
}

func newOpenAI(cfg Config) *openaiProvider {
	if cfg.Model == "" {
		cfg.Model = DefaultOpenAIModel
	}
	// The chat service is built from explicit options only: openai.NewClient
	// would also read OPENAI_* environment variables (base URL, organization,
	// extra headers), and the caller's configuration is the only source.
	opts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return noticeRetry(cfg.MaxRetries, req, next)
		}),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return &openaiProvider{
		cfg:      cfg,
		chat:     openai.NewChatCompletionService(opts...),
		official: isOfficialOpenAI(cfg.BaseURL),
	}
}

// isOfficialOpenAI reports whether baseURL is OpenAI's own API.
func isOfficialOpenAI(baseURL string) bool {
	if baseURL == "" {
		return true
	}
	u, err := url.Parse(baseURL)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// Name implements Provider.
func (p *openaiProvider) Name() string { return NameOpenAI }

// Models implements Provider.
func (p *openaiProvider) Models() []protocol.ModelDescriptor {
	return []protocol.ModelDescriptor{descriptor(NameOpenAI, p.cfg.Model, p.cfg.ContextWindow)}
}

// ReasoningLevels implements Provider.
func (p *openaiProvider) ReasoningLevels(model string) []Level { return openaiLevels(model) }

// Stream implements Provider.
func (p *openaiProvider) Stream(ctx context.Context, req Request) (Stream, error) {
	classify := func(err error) error { return classify(ctx, NameOpenAI, p.cfg.APIKey, err, openaiAPIError) }
	params, err := p.params(req)
	if err != nil {
		return nil, classify(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	sdk := p.chat.NewStreaming(rctx, params)
	if err := sdk.Err(); err != nil {
		_ = sdk.Close()
		cancel()
		return nil, classify(err)
	}
	src := &openaiPump{sdk: sdk, model: string(params.Model), calls: make(map[int64]*openaiCall)}
	return newStream(src, cancel, classify), nil
}

// openaiAPIError extracts a service answer from an openai-go error: an HTTP
// error status, or an error object sent inside the stream.
func openaiAPIError(err error) (status int, kind, message string, ok bool) {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode, apiErr.Type, apiErr.Message, true
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		var body struct {
			Error json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(streamErr.Event.Data, &body)
		var obj struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(body.Error, &obj) != nil {
			_ = json.Unmarshal(body.Error, &obj.Message) // a bare string
		}
		return 0, obj.Type, obj.Message, true
	}
	return 0, "", "", false
}

// params converts req to a chat completion request.
func (p *openaiProvider) params(req Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{
		Model: shared.ChatModel(cmp.Or(req.Model, p.cfg.Model)),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{
			IncludeUsage: openai.Bool(true),
		},
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		msgs, err := openaiMessages(m)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		schema, err := schemaObject(t)
		if err != nil {
			return params, err
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if req.Reasoning != "" {
		params.ReasoningEffort = shared.ReasoningEffort(req.Reasoning)
	}
	if req.MaxTokens > 0 {
		if p.official {
			params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			params.MaxTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	return params, nil
}

// openaiMessages converts one protocol message. A user message becomes one
// "tool" message per tool_result block followed by a user message with its
// text and images (its content a string when it has no image, else parts:
// text parts and image_url parts with a data: URL, in the message's order);
// an assistant message becomes one assistant message with its text and
// tool_calls (thinking is dropped). Messages left empty are skipped.
func openaiMessages(m protocol.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	var out []openai.ChatCompletionMessageParamUnion
	var text []string
	switch m.Role {
	case roleUser:
		var parts []openai.ChatCompletionContentPartUnionParam
		hasImage := false
		for _, b := range m.Content {
			switch b.Type {
			case protocol.BlockToolResult:
				out = append(out, openai.ToolMessage(toolResultText(b, true), b.ToolCallID))
			case protocol.BlockText:
				if b.Text != "" {
					text = append(text, b.Text)
					parts = append(parts, openai.TextContentPart(b.Text))
				}
			case protocol.BlockImage:
				if b.Data == "" {
					parts = append(parts, openai.TextContentPart(imagePlaceholder(b)))
					continue
				}
				hasImage = true
				parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(b)}))
			}
		}
		switch {
		case hasImage:
			out = append(out, openai.UserMessage(parts))
		case len(parts) > 0:
			text = text[:0]
			for _, p := range parts { // all text: texts and placeholders
				text = append(text, p.OfText.Text)
			}
			out = append(out, openai.UserMessage(strings.Join(text, "\n\n")))
		}
	case roleAssistant:
		var asst openai.ChatCompletionAssistantMessageParam
		for _, b := range m.Content {
			switch b.Type {
			case protocol.BlockText:
				if b.Text != "" {
					text = append(text, b.Text)
				}
			case protocol.BlockToolCall:
				args, err := toolArgsJSON(b)
				if err != nil {
					return nil, err
				}
				asst.ToolCalls = append(asst.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: b.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      b.Name,
							Arguments: args,
						},
					},
				})
			}
		}
		if len(text) > 0 {
			asst.Content.OfString = param.NewOpt(strings.Join(text, "\n\n"))
		}
		if len(text) > 0 || len(asst.ToolCalls) > 0 {
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &asst})
		}
	default:
		return nil, fmt.Errorf("%w: message %q has role %q", ErrInvalidRequest, m.ID, m.Role)
	}
	return out, nil
}

// Block keys of the OpenAI pump's indexer: tool calls use their index.
const (
	openaiKeyThinking = -2
	openaiKeyText     = -1
)

// openaiPump translates chat.completion.chunk events.
type openaiPump struct {
	sdk    *ssestream.Stream[openai.ChatCompletionChunk]
	model  string // requested model, when chunks name none
	blocks blockIndexer
	calls  map[int64]*openaiCall // by the chunk's tool-call index
	order  []*openaiCall
	finish string          // finish_reason of choice 0; "" until seen
	usage  *protocol.Usage // last usage seen
}

// openaiCall is one tool call being assembled.
type openaiCall struct {
	key     int // blockIndexer key
	id      string
	name    string
	started bool
	pending strings.Builder // arguments received before the name
}

func (p *openaiPump) close() error { return p.sdk.Close() }

func (p *openaiPump) step(out []Event) ([]Event, error) {
	if !p.sdk.Next() {
		if err := p.sdk.Err(); err != nil {
			return out, err
		}
		// A clean end of the body: [DONE], or a server that closes without
		// it. The answer is complete only if its finish_reason arrived.
		if p.finish == "" {
			return out, ErrTruncated
		}
		return p.end(out), io.EOF
	}
	chunk := p.sdk.Current()
	if chunk.JSON.Usage.Valid() {
		u := chunk.Usage
		cached := u.PromptTokensDetails.CachedTokens
		written := u.PromptTokensDetails.CacheWriteTokens
		p.usage = usageWithContext(protocol.Usage{
			Input:      max(u.PromptTokens-cached-written, 0),
			Output:     u.CompletionTokens,
			CacheRead:  cached,
			CacheWrite: written,
			Model:      cmp.Or(chunk.Model, p.model),
		})
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue // n is 1; ignore anything else
		}
		out = p.delta(out, choice.Delta)
		if choice.FinishReason != "" {
			p.finish = choice.FinishReason
		}
	}
	return out, nil
}

// delta translates one choice delta.
func (p *openaiPump) delta(out []Event, d openai.ChatCompletionChunkChoiceDelta) []Event {
	// Reasoning text of compatible servers (vLLM, DeepSeek, llama.cpp use
	// "reasoning_content"; Ollama and others "reasoning").
	for _, field := range []string{"reasoning_content", "reasoning"} {
		// Extra fields are never "valid" to the SDK (they have no schema):
		// take the raw JSON, which is "null" or a string.
		f, ok := d.JSON.ExtraFields[field]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			out = append(out, Event{Kind: EventThinking, Index: p.blocks.index(openaiKeyThinking), Text: s})
			break
		}
	}
	if d.Content != "" {
		out = append(out, Event{Kind: EventText, Index: p.blocks.index(openaiKeyText), Text: d.Content})
	}
	for _, tc := range d.ToolCalls {
		out = p.toolCall(out, tc)
	}
	return out
}

// toolCall folds one tool-call fragment into its call. Fragments are keyed
// by index; ids are optional after the first (and some servers send none),
// and a fragment with a different id at a known index opens a new call (for
// servers that number every call 0).
func (p *openaiPump) toolCall(out []Event, tc openai.ChatCompletionChunkChoiceDeltaToolCall) []Event {
	c := p.calls[tc.Index]
	if c == nil || (tc.ID != "" && c.id != "" && tc.ID != c.id) {
		c = &openaiCall{key: len(p.order)}
		p.calls[tc.Index] = c
		p.order = append(p.order, c)
	}
	if c.id == "" {
		c.id = tc.ID
	}
	if c.name == "" {
		c.name = tc.Function.Name
	}
	args := tc.Function.Arguments
	if !c.started {
		if c.name == "" {
			c.pending.WriteString(args)
			return out
		}
		out = p.start(out, c)
	}
	if args != "" {
		out = append(out, Event{Kind: EventToolCallArgs, Index: p.blocks.index(c.key), ArgsDelta: args})
	}
	return out
}

// start opens call c's block, with any arguments that arrived before its name.
func (p *openaiPump) start(out []Event, c *openaiCall) []Event {
	c.started = true
	if c.id == "" {
		c.id = newToolCallID()
	}
	idx := p.blocks.index(c.key)
	out = append(out, Event{Kind: EventToolCallStart, Index: idx, ToolCallID: c.id, ToolName: c.name})
	if c.pending.Len() > 0 {
		out = append(out, Event{Kind: EventToolCallArgs, Index: idx, ArgsDelta: c.pending.String()})
		c.pending.Reset()
	}
	return out
}

// end appends the final events of a complete answer.
func (p *openaiPump) end(out []Event) []Event {
	for _, c := range p.order {
		if !c.started {
			out = p.start(out, c) // a call whose name never came: the runtime reports it
		}
	}
	if p.usage != nil {
		out = append(out, Event{Kind: EventUsage, Usage: p.usage})
	}
	reason := p.finish
	switch {
	case len(p.order) > 0:
		// Some servers say "stop" after tool calls.
		reason = StopToolUse
	case reason == "stop":
		reason = StopEndTurn
	case reason == "length":
		reason = StopMaxTokens
	case reason == "tool_calls", reason == "function_call":
		reason = StopToolUse
	}
	return append(out, Event{Kind: EventStop, StopReason: reason})
}
