package fakellm

import "net/http"

// Messages writes an Anthropic Messages stream: message_start, then per
// content block content_block_start, its deltas and content_block_stop,
// then message_delta with the stop reason and message_stop. Pings may come
// anywhere. Its methods write one event each, so a test can also send what
// the service would not.
type Messages struct {
	*Events
}

// StartMessages answers 200 with an event stream for Messages events.
func StartMessages(w http.ResponseWriter) Messages {
	return Messages{SSE(w)}
}

// MessageStart opens the message with its input usage; cacheWrite and
// cacheRead are the prompt-cache tokens the service reports beside input.
// Each message has an id of its own, as the service gives: Claude Code
// takes blocks with the same message id for parts of one message and
// merges them.
func (s Messages) MessageStart(input, cacheWrite, cacheRead int) {
	s.Event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id("msg_"), "type": "message", "role": "assistant", "content": []any{},
		"model": Model, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": input, "cache_creation_input_tokens": cacheWrite,
			"cache_read_input_tokens": cacheRead, "output_tokens": 1,
		},
	}})
}

// BlockStart opens the content block at index.
func (s Messages) BlockStart(index int, block map[string]any) {
	s.Event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
}

// Delta adds delta to the content block at index.
func (s Messages) Delta(index int, delta map[string]any) {
	s.Event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": delta})
}

// BlockStop closes the content block at index.
func (s Messages) BlockStop(index int) {
	s.Event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}

// MessageDelta gives the stop reason and the output usage.
func (s Messages) MessageDelta(stop string, output int) {
	s.Event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": output}})
}

// MessageStop ends the message.
func (s Messages) MessageStop() {
	s.Event("message_stop", map[string]any{"type": "message_stop"})
}

// End is MessageDelta then MessageStop.
func (s Messages) End(stop string, output int) {
	s.MessageDelta(stop, output)
	s.MessageStop()
}

// Ping is the keep-alive event clients must skip.
func (s Messages) Ping() { s.Event("ping", map[string]any{"type": "ping"}) }

// TextBlock streams a whole text block in parts.
func (s Messages) TextBlock(index int, parts ...string) {
	s.BlockStart(index, map[string]any{"type": "text", "text": ""})
	for _, p := range parts {
		s.Delta(index, map[string]any{"type": "text_delta", "text": p})
	}
	s.BlockStop(index)
}

// ThinkingBlock streams a whole thinking block in parts, then its
// signature.
func (s Messages) ThinkingBlock(index int, signature string, parts ...string) {
	s.BlockStart(index, map[string]any{"type": "thinking", "thinking": "", "signature": ""})
	for _, p := range parts {
		s.Delta(index, map[string]any{"type": "thinking_delta", "thinking": p})
	}
	s.Delta(index, map[string]any{"type": "signature_delta", "signature": signature})
	s.BlockStop(index)
}

// ToolBlock streams a whole tool_use block with its input in pieces.
func (s Messages) ToolBlock(index int, id, name string, pieces ...string) {
	s.BlockStart(index, map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}})
	for _, p := range pieces {
		s.Delta(index, map[string]any{"type": "input_json_delta", "partial_json": p})
	}
	s.BlockStop(index)
}

func replyMessages(a *answer) {
	s := Messages{a.events}
	s.MessageStart(a.Usage.Input-a.Usage.CacheRead, 0, a.Usage.CacheRead)
	index := 0
	// stream streams one block's pieces, pacing after each.
	stream := func(start map[string]any, deltas []map[string]any) bool {
		s.BlockStart(index, start)
		for _, d := range deltas {
			s.Delta(index, d)
			if !a.pace() {
				return false
			}
		}
		s.BlockStop(index)
		index++
		return true
	}
	if a.Thinking != "" {
		sig := a.Signature
		if sig == "" {
			sig = "fakellm-signature"
		}
		var deltas []map[string]any
		for _, w := range words(a.Thinking) {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": w})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": sig})
		if !stream(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas) {
			return
		}
	}
	if a.Text != "" {
		var deltas []map[string]any
		for _, w := range words(a.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": w})
		}
		if !stream(map[string]any{"type": "text", "text": ""}, deltas) {
			return
		}
	}
	stop := "end_turn"
	for _, c := range a.Calls {
		stop = "tool_use"
		if !stream(map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}},
			[]map[string]any{{"type": "input_json_delta", "partial_json": c.Args}}) {
			return
		}
	}
	s.End(stop, a.Usage.Output)
}
