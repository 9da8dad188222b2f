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
// diffs) into tool calls, current_mode_update into a mode change. Plans,
// command lists, config and session info are not part of the Shard
// protocol and are dropped. It is safe for concurrent use.
type Translator struct {
	ev adapter.Events

	mu    sync.Mutex
	tools map[string]*adapter.Tool
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
	}
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
