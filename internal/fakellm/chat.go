package fakellm

// The OpenAI chat completions stream: unnamed events each carrying a
// chat.completion.chunk, the last choice with a finish_reason, then (when
// the request asked for include_usage) a chunk with usage and no choices,
// then the data "[DONE]".

// ChatChunk is a chat.completion.chunk with one choice carrying delta;
// finish is its finish_reason (nil, "stop", "tool_calls", "length").
func ChatChunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": Model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
	}
}

// ChatUsage is the usage chunk that ends a stream asked with include_usage:
// no choices; cached is the part of prompt read from the cache.
func ChatUsage(prompt, completion, cached int) map[string]any {
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": Model,
		"choices": []any{},
		"usage": map[string]any{
			"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached},
		},
	}
}

// ChatToolDelta is a delta carrying one fragment of the tool call at index;
// an empty id or name is left out, as services do after a call's first
// fragment.
func ChatToolDelta(index int, id, name, args string) map[string]any {
	fn := map[string]any{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	tc := map[string]any{"index": index, "function": fn}
	if id != "" {
		tc["id"] = id
		tc["type"] = "function"
	}
	return map[string]any{"tool_calls": []any{tc}}
}

func replyChat(a *answer) {
	e := a.events
	e.Event("", ChatChunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, w := range words(a.Thinking) {
		e.Event("", ChatChunk(map[string]any{"reasoning_content": w}, nil))
		if !a.pace() {
			return
		}
	}
	for _, w := range words(a.Text) {
		e.Event("", ChatChunk(map[string]any{"content": w}, nil))
		if !a.pace() {
			return
		}
	}
	finish := "stop"
	for i, c := range a.Calls {
		finish = "tool_calls"
		e.Event("", ChatChunk(ChatToolDelta(i, c.ID, c.Name, c.Args), nil))
		if !a.pace() {
			return
		}
	}
	e.Event("", ChatChunk(map[string]any{}, finish))
	e.Event("", ChatUsage(a.Usage.Input, a.Usage.Output, a.Usage.CacheRead))
	e.Event("", "[DONE]")
}
