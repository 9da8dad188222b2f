package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/shard-dev/shard/protocol"
)

// anthropicProvider speaks the Anthropic Messages API.
type anthropicProvider struct {
	cfg      Config
	messages anthropic.MessageService
}

func newAnthropic(cfg Config) *anthropicProvider {
	if cfg.Model == "" {
		cfg.Model = DefaultAnthropicModel
	}
	// WithoutEnvironmentDefaults: no ANTHROPIC_* variable or profile file
	// overrides the caller's configuration.
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
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
	client := anthropic.NewClient(opts...)
	return &anthropicProvider{cfg: cfg, messages: client.Messages}
}

// Name implements Provider.
func (p *anthropicProvider) Name() string { return NameAnthropic }

// Models implements Provider.
func (p *anthropicProvider) Models() []protocol.ModelDescriptor {
	return []protocol.ModelDescriptor{descriptor(NameAnthropic, p.cfg.Model, p.cfg.ContextWindow)}
}

// ReasoningLevels implements Provider.
func (p *anthropicProvider) ReasoningLevels(model string) []Level { return anthropicLevels(model) }

// Stream implements Provider.
func (p *anthropicProvider) Stream(ctx context.Context, req Request) (Stream, error) {
	classify := func(err error) error { return classify(ctx, NameAnthropic, p.cfg.APIKey, err, anthropicAPIError) }
	params, err := p.params(req)
	if err != nil {
		return nil, classify(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	sdk := p.messages.NewStreaming(rctx, params)
	if err := sdk.Err(); err != nil {
		_ = sdk.Close()
		cancel()
		return nil, classify(err)
	}
	src := &anthropicPump{sdk: sdk, model: params.Model, blocks: make(map[int64]*anthropicBlock)}
	return newStream(src, cancel, classify), nil
}

// anthropicAPIError extracts a service answer from an anthropic-sdk-go error:
// an HTTP error status, or an error event inside the stream (status 200).
func anthropicAPIError(err error) (status int, kind, message string, ok bool) {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode, string(apiErr.Type()), apiErr.Message, true
	}
	return 0, "", "", false
}

// params converts req to a Messages API request.
func (p *anthropicProvider) params(req Request) (anthropic.MessageNewParams, error) {
	model := cmp.Or(req.Model, p.cfg.Model)
	params := anthropic.MessageNewParams{Model: model}
	maxTokens := req.MaxTokens
	if err := anthropicReasoning(&params, model, req.Reasoning, &maxTokens); err != nil {
		return params, err
	}
	params.MaxTokens = int64(maxTokens)

	for _, t := range req.Tools {
		schema, err := schemaObject(t)
		if err != nil {
			return params, err
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: anthropicSchema(schema)}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, m := range req.Messages {
		msg, ok, err := anthropicMessage(m, req.Signatures)
		if err != nil {
			return params, err
		}
		if ok {
			params.Messages = append(params.Messages, msg)
		}
	}

	// Prompt caching: breakpoints after the tools, after the system prompt
	// and on the last block of the conversation, so every call reads the
	// prefix the previous one wrote (cache_read / cache_write in usage).
	if n := len(params.Tools); n > 0 {
		*params.Tools[n-1].GetCacheControl() = anthropic.NewCacheControlEphemeralParam()
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	if n := len(params.Messages); n > 0 {
		last := params.Messages[n-1]
		var content []anthropic.ContentBlockParamUnion
		switch {
		case last.OfUser != nil:
			content = last.OfUser.Content
		case last.OfAssistant != nil:
			content = last.OfAssistant.Content
		}
		if k := len(content); k > 0 {
			if cc := content[k-1].GetCacheControl(); cc != nil {
				*cc = anthropic.NewCacheControlEphemeralParam()
			}
		}
	}
	return params, nil
}

// anthropicReasoning applies the reasoning level to params and settles
// max_tokens (*maxTokens, 0 = default) so that it leaves room for the answer.
func anthropicReasoning(params *anthropic.MessageNewParams, model, level string, maxTokens *int) error {
	mode := anthropicThinking(model)
	if level != "" && level != levelOff {
		valid := false
		for _, l := range anthropicLevels(model) {
			valid = valid || l.ID == level
		}
		if !valid {
			return fmt.Errorf("%w: model %q has no reasoning level %q", ErrInvalidRequest, model, level)
		}
	}
	switch {
	case level == "", level == levelOff, mode == thinkingNone:
		if level == levelOff && mode == thinkingAdaptive {
			d := anthropic.NewThinkingConfigDisabledParam()
			params.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &d}
		}
		if *maxTokens == 0 {
			*maxTokens = anthropicDefaultMaxTokens(model)
		}
	case mode == thinkingAdaptive:
		params.Thinking = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
		params.OutputConfig = anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffort(level)}
		if *maxTokens == 0 {
			*maxTokens = anthropicAdaptiveTokens
		}
	default:
		budget := thinkingBudgetOf(level)
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(budget))
		// budget_tokens must be below max_tokens.
		if *maxTokens <= budget {
			*maxTokens = budget + anthropicAnswerTokens
		}
	}
	return nil
}

// thinkingBudgetOf is the budget_tokens of a budget-mode level.
func thinkingBudgetOf(level string) int {
	switch level {
	case levelLow:
		return budgetLow
	case levelMedium:
		return budgetMedium
	}
	return budgetHigh
}

// anthropicSchema converts a JSON schema object to the SDK's input schema:
// properties and required are fields, everything else rides along.
func anthropicSchema(schema map[string]any) anthropic.ToolInputSchemaParam {
	var s anthropic.ToolInputSchemaParam
	extra := make(map[string]any)
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			s.Properties = v
		case "required":
			if list, ok := v.([]any); ok {
				for _, r := range list {
					if name, ok := r.(string); ok {
						s.Required = append(s.Required, name)
					}
				}
			}
		default:
			extra[k] = v
		}
	}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	if len(extra) > 0 {
		s.ExtraFields = extra
	}
	return s
}

// anthropicMessage converts one protocol message; ok is false when nothing of
// it can be sent. In a user message tool_result blocks go first, as the API
// requires, then its text and image blocks (base64 source) in their order. Thinking blocks are sent with their signature and dropped without
// one; empty text blocks are dropped (the API rejects them).
func anthropicMessage(m protocol.Message, sigs map[BlockRef]Signature) (msg anthropic.MessageParam, ok bool, err error) {
	var blocks []anthropic.ContentBlockParamUnion
	switch m.Role {
	case roleUser:
		for _, b := range m.Content {
			if b.Type == protocol.BlockToolResult {
				tr := anthropic.ToolResultBlockParam{ToolUseID: b.ToolCallID}
				if text := toolResultText(b, false); text != "" {
					tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: text}}}
				}
				if b.IsError || (b.Content != nil && b.Content.Kind == "error") {
					tr.IsError = anthropic.Bool(true)
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &tr})
			}
		}
		for _, b := range m.Content {
			switch {
			case b.Type == protocol.BlockText && b.Text != "":
				blocks = append(blocks, anthropic.NewTextBlock(b.Text))
			case b.Type == protocol.BlockImage && b.Data == "":
				blocks = append(blocks, anthropic.NewTextBlock(imagePlaceholder(b)))
			case b.Type == protocol.BlockImage:
				blocks = append(blocks, anthropic.NewImageBlockBase64(b.MimeType, b.Data))
			}
		}
		if len(blocks) == 0 {
			return msg, false, nil
		}
		return anthropic.NewUserMessage(blocks...), true, nil
	case roleAssistant:
		for i, b := range m.Content {
			switch b.Type {
			case protocol.BlockThinking:
				sig, signed := sigs[BlockRef{MessageID: m.ID, Index: i}]
				switch {
				case !signed || sig.Value == "":
				case sig.Redacted:
					blocks = append(blocks, anthropic.NewRedactedThinkingBlock(sig.Value))
				default:
					blocks = append(blocks, anthropic.NewThinkingBlock(sig.Value, b.Text))
				}
			case protocol.BlockText:
				if b.Text != "" {
					blocks = append(blocks, anthropic.NewTextBlock(b.Text))
				}
			case protocol.BlockToolCall:
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, toolArgs(b), b.Name))
			}
		}
		if len(blocks) == 0 {
			return msg, false, nil
		}
		return anthropic.NewAssistantMessage(blocks...), true, nil
	}
	return msg, false, fmt.Errorf("%w: message %q has role %q", ErrInvalidRequest, m.ID, m.Role)
}

// anthropicPump translates Messages API stream events.
type anthropicPump struct {
	sdk     *ssestream.Stream[anthropic.MessageStreamEventUnion]
	model   string // requested model, when message_start names none
	indexer blockIndexer
	blocks  map[int64]*anthropicBlock // by the event's content block index
	usage   protocol.Usage
	started bool   // message_start seen
	stop    string // stop_reason from message_delta
}

// anthropicBlock is one content block of the answer.
type anthropicBlock struct {
	typ   string // text | thinking | redacted_thinking | tool_use | other
	args  bool   // tool_use: an input_json_delta arrived
	input string // tool_use: the input of content_block_start, raw JSON
}

func (p *anthropicPump) close() error { return p.sdk.Close() }

func (p *anthropicPump) step(out []Event) ([]Event, error) {
	if !p.sdk.Next() {
		if err := p.sdk.Err(); err != nil {
			return out, err
		}
		return out, ErrTruncated // the body ended before message_stop
	}
	ev := p.sdk.Current()
	switch ev.Type {
	case "message_start":
		m := ev.Message
		p.started = true
		p.model = cmp.Or(m.Model, p.model)
		p.usage = protocol.Usage{
			Input:      m.Usage.InputTokens,
			Output:     m.Usage.OutputTokens,
			CacheRead:  m.Usage.CacheReadInputTokens,
			CacheWrite: m.Usage.CacheCreationInputTokens,
		}
	case "content_block_start":
		out = p.blockStart(out, ev)
	case "content_block_delta":
		out = p.blockDelta(out, ev)
	case "content_block_stop":
		b := p.blocks[ev.Index]
		if b != nil && b.typ == "tool_use" && !b.args && b.input != "" && b.input != "{}" && b.input != "null" {
			// The whole input came with the start (no deltas follow).
			out = append(out, Event{Kind: EventToolCallArgs, Index: p.indexer.index(int(ev.Index)), ArgsDelta: b.input})
		}
	case "message_delta":
		if r := ev.Delta.StopReason; r != "" {
			p.stop = string(r)
		}
		// Counts in message_delta are cumulative; input and cache counts
		// appear there only on some deployments.
		u := ev.Usage
		if u.JSON.OutputTokens.Valid() {
			p.usage.Output = u.OutputTokens
		}
		p.usage.Input = max(p.usage.Input, u.InputTokens)
		p.usage.CacheRead = max(p.usage.CacheRead, u.CacheReadInputTokens)
		p.usage.CacheWrite = max(p.usage.CacheWrite, u.CacheCreationInputTokens)
	case "message_stop":
		if !p.started {
			return out, ErrTruncated
		}
		u := p.usage
		u.Model = p.model
		out = append(out, Event{Kind: EventUsage, Usage: usageWithContext(u)})
		return append(out, Event{Kind: EventStop, StopReason: cmp.Or(p.stop, StopEndTurn)}), io.EOF
	}
	return out, nil
}

// blockStart opens a content block.
func (p *anthropicPump) blockStart(out []Event, ev anthropic.MessageStreamEventUnion) []Event {
	cb := ev.ContentBlock
	b := &anthropicBlock{typ: cb.Type}
	p.blocks[ev.Index] = b
	key := int(ev.Index)
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			out = append(out, Event{Kind: EventText, Index: p.indexer.index(key), Text: cb.Text})
		}
	case "thinking":
		if cb.Thinking != "" {
			out = append(out, Event{Kind: EventThinking, Index: p.indexer.index(key), Text: cb.Thinking})
		}
		if cb.Signature != "" {
			out = append(out, Event{Kind: EventThinking, Index: p.indexer.index(key), Signature: cb.Signature})
		}
	case "redacted_thinking":
		out = append(out, Event{Kind: EventThinking, Index: p.indexer.index(key), Signature: cb.Data, Redacted: true})
	case "tool_use":
		b.input = cb.JSON.Input.Raw()
		out = append(out, Event{Kind: EventToolCallStart, Index: p.indexer.index(key), ToolCallID: cb.ID, ToolName: cb.Name})
	default:
		b.typ = "other" // server tools and other blocks the runtime does not model
	}
	return out
}

// blockDelta continues a content block.
func (p *anthropicPump) blockDelta(out []Event, ev anthropic.MessageStreamEventUnion) []Event {
	b := p.blocks[ev.Index]
	if b == nil || b.typ == "other" {
		return out
	}
	d := ev.Delta
	idx := func() int { return p.indexer.index(int(ev.Index)) }
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			out = append(out, Event{Kind: EventText, Index: idx(), Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			out = append(out, Event{Kind: EventThinking, Index: idx(), Text: d.Thinking})
		}
	case "signature_delta":
		if d.Signature != "" {
			out = append(out, Event{Kind: EventThinking, Index: idx(), Signature: d.Signature})
		}
	case "input_json_delta":
		if d.PartialJSON != "" {
			b.args = true
			out = append(out, Event{Kind: EventToolCallArgs, Index: idx(), ArgsDelta: d.PartialJSON})
		}
	}
	return out
}
