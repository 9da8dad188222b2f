package acp

import (
	"encoding/json"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
)

// Translator turns ACP session/update notifications into adapter.Events:
// message and thought chunks into text and thinking, tool_call and
// tool_call_update (merged per call: status, title, raw input, content,
// diffs) into tool calls, current_mode_update into a mode change,
// config_option_update into mode, model and reasoning-level changes (the
// options of those categories), usage_update into the turn's usage
// (TakeUsage). Plans, command lists, other config options and session
// info are not part of the Shard protocol and are dropped. It is safe for
// concurrent use.
type Translator struct {
	ev adapter.Events

	mu    sync.Mutex
	tools map[string]*adapter.Tool
	// ids and values are the mapped config options (config.go) and their
	// current values (mode, model, thought level), as last said.
	ids    configIDs
	values [3]string
	// usage is the last usage_update since TakeUsage; costSeen and cost
	// the cumulative cost it last carried (USD).
	usage    *sdk.SessionUsageUpdate
	costSeen bool
	cost     float64
}

// NewTranslator reports to ev.
func NewTranslator(ev adapter.Events) *Translator {
	return &Translator{ev: ev, tools: map[string]*adapter.Tool{}}
}

// Update translates one session/update.
func (t *Translator) Update(u sdk.SessionUpdate) {
	switch {
	case u.AgentMessageChunk != nil:
		t.ev.Text(textOf(u.AgentMessageChunk.Content))
	case u.AgentThoughtChunk != nil:
		t.ev.Thinking(textOf(u.AgentThoughtChunk.Content))
	case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Image != nil:
		im := u.UserMessageChunk.Content.Image
		t.ev.UserImage(protocol.Image{Type: protocol.ImageType, Data: im.Data, MimeType: im.MimeType})
	case u.UserMessageChunk != nil:
		t.ev.UserText(textOf(u.UserMessageChunk.Content))
	case u.ToolCall != nil:
		c := u.ToolCall
		t.ev.ToolCall(t.merge(sdk.ToolCallUpdate{ToolCallId: c.ToolCallId, Title: &c.Title, Kind: &c.Kind,
			Status: &c.Status, RawInput: c.RawInput, RawOutput: c.RawOutput, Content: c.Content}))
	case u.ToolCallUpdate != nil:
		c := u.ToolCallUpdate
		t.ev.ToolCall(t.merge(sdk.ToolCallUpdate{ToolCallId: c.ToolCallId, Title: c.Title, Kind: c.Kind,
			Status: c.Status, RawInput: c.RawInput, RawOutput: c.RawOutput, Content: c.Content}))
	case u.CurrentModeUpdate != nil:
		t.ev.ModeChanged(string(u.CurrentModeUpdate.CurrentModeId))
	case u.ConfigOptionUpdate != nil:
		t.configUpdate(u.ConfigOptionUpdate.ConfigOptions)
	case u.UsageUpdate != nil:
		t.mu.Lock()
		uu := *u.UsageUpdate
		t.usage = &uu
		t.mu.Unlock()
	}
}

// SetConfig records the session's config options (the session/new, load
// or resume answer, or set_config_option's) without reporting them: the
// Offer or the command's answer says them.
func (t *Translator) SetConfig(opts []sdk.SessionConfigOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ids, t.values = idsOf(opts), valuesOf(opts)
}

// mapped is the ids of the mapped config options as last said.
func (t *Translator) mapped() configIDs {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ids
}

// configUpdate records the options of a config_option_update and reports
// a changed mode, model or reasoning level.
func (t *Translator) configUpdate(opts []sdk.SessionConfigOption) {
	t.mu.Lock()
	prev := t.values
	t.ids, t.values = idsOf(opts), valuesOf(opts)
	now := t.values
	t.mu.Unlock()
	report := [3]func(string){t.ev.ModeChanged, t.ev.ModelChanged, t.ev.LevelChanged}
	for i := range now {
		if now[i] != "" && now[i] != prev[i] {
			report[i](now[i])
		}
	}
}

// valuesOf is the current values of the mapped options (mode, model,
// thought level; "" for a category the agent lacks).
func valuesOf(opts []sdk.SessionConfigOption) [3]string {
	var out [3]string
	mode, model, thought := configSelects(opts)
	for i, s := range []*sdk.SessionConfigOptionSelect{mode, model, thought} {
		if s != nil {
			out[i] = string(s.CurrentValue)
		}
	}
	return out
}

// TakeUsage returns what the usage_updates since the last call said: the
// tokens in the agent's context, the size of its window, and the cost
// since the update before (ACP's cost is the session's cumulative; a
// generation's first is taken whole, and one in a currency other than USD
// is not counted). ok is false when there was none.
func (t *Translator) TakeUsage() (contextTokens, window int, cost float64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.usage
	if u == nil {
		return 0, 0, 0, false
	}
	t.usage = nil
	if c := u.Cost; c != nil && c.Currency == "USD" {
		cost = c.Amount
		if t.costSeen {
			cost = max(c.Amount-t.cost, 0)
		}
		t.costSeen, t.cost = true, c.Amount
	}
	return u.Used, u.Size, cost, true
}

// Merge folds an update (also the tool call of a permission request) into
// the call's state and returns a copy of it.
func (t *Translator) Merge(u sdk.ToolCallUpdate) adapter.Tool { return t.merge(u) }

func (t *Translator) merge(u sdk.ToolCallUpdate) adapter.Tool {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := string(u.ToolCallId)
	tc := t.tools[id]
	if tc == nil {
		tc = &adapter.Tool{ID: id, Name: "tool", Status: adapter.ToolPending}
		t.tools[id] = tc
	}
	if u.Title != nil && *u.Title != "" {
		tc.Title = *u.Title
	}
	if u.Kind != nil && *u.Kind != "" {
		tc.Name = string(*u.Kind)
		switch *u.Kind {
		case sdk.ToolKindRead, sdk.ToolKindSearch, sdk.ToolKindFetch, sdk.ToolKindThink:
			tc.ReadOnly = true
		default:
			tc.ReadOnly = false
		}
	}
	if u.Status != nil && *u.Status != "" {
		tc.Status = string(*u.Status)
	}
	if u.RawInput != nil {
		tc.Args = argsOf(u.RawInput)
	}
	if len(u.Content) > 0 {
		var out strings.Builder
		tc.Diffs = nil
		for _, c := range u.Content {
			switch {
			case c.Content != nil:
				out.WriteString(textOf(c.Content.Content))
			case c.Diff != nil:
				d := adapter.Diff{Path: c.Diff.Path, New: c.Diff.NewText}
				if c.Diff.OldText != nil {
					d.Old = *c.Diff.OldText
				}
				tc.Diffs = append(tc.Diffs, d)
			}
		}
		tc.Output = out.String()
	}
	if u.RawOutput != nil && len(u.Content) == 0 {
		tc.Output = outputOf(u.RawOutput)
	}
	cp := *tc
	cp.Diffs = append([]adapter.Diff(nil), tc.Diffs...)
	if tc.Status == adapter.ToolCompleted || tc.Status == adapter.ToolFailed {
		delete(t.tools, id) // a later update of it starts afresh
	}
	return cp
}

// textOf is the text of a content block ("" for images and the like; a
// resource link shows its URI).
func textOf(c sdk.ContentBlock) string {
	switch {
	case c.Text != nil:
		return c.Text.Text
	case c.ResourceLink != nil:
		return c.ResourceLink.Uri
	}
	return ""
}

// argsOf is the raw input as an object; anything else is wrapped.
func argsOf(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil && m != nil {
		return m
	}
	return map[string]any{"input": v}
}

// outputOf renders a raw output: a string as is, else JSON.
func outputOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if m, ok := v.(map[string]any); ok {
		// The shapes of command results (codex: formatted_output).
		for _, k := range []string{"formatted_output", "output", "aggregated_output", "stdout"} {
			if s, ok := m[k].(string); ok {
				return s
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
