package fakellm

import (
	"maps"
	"strings"
)

// The OpenAI Responses stream: named events, each with a sequence_number,
// from response.created to response.completed (which carries the whole
// output and the usage). Every output item is announced by
// response.output_item.added and closed by response.output_item.done at
// its output_index; a message's text arrives in output_text deltas, a
// reasoning summary in reasoning_summary_text deltas, a function call's
// arguments in function_call_arguments deltas.

// responsesStream numbers the events of one Responses answer.
type responsesStream struct {
	*answer
	seq int
}

func (s *responsesStream) send(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	s.events.Event(typ, fields)
}

// response is the response object of the created and completed events.
func response(id, status string, output []any, usage map[string]any) map[string]any {
	r := map[string]any{"id": id, "object": "response", "created_at": 1700000000, "status": status, "model": Model,
		"output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}}
	if usage != nil {
		r["usage"] = usage
	}
	return r
}

func replyResponses(a *answer) {
	s := &responsesStream{answer: a}
	respID := id("resp_")
	s.send("response.created", map[string]any{"response": response(respID, "in_progress", []any{}, nil)})
	s.send("response.in_progress", map[string]any{"response": response(respID, "in_progress", []any{}, nil)})
	var output []any
	if a.Thinking != "" {
		item, ok := s.reasoning(len(output))
		if !ok {
			return
		}
		output = append(output, item)
	}
	if a.Text != "" {
		item, ok := s.message(len(output))
		if !ok {
			return
		}
		output = append(output, item)
	}
	for _, c := range a.Calls {
		item, ok := s.call(len(output), c)
		if !ok {
			return
		}
		output = append(output, item)
	}
	s.send("response.completed", map[string]any{"response": response(respID, "completed", output, map[string]any{
		"input_tokens": a.Usage.Input, "input_tokens_details": map[string]any{"cached_tokens": a.Usage.CacheRead},
		"output_tokens": a.Usage.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": a.Usage.Input + a.Usage.Output})})
}

// reasoning streams a reasoning item whose summary is the thinking.
func (s *responsesStream) reasoning(index int) (map[string]any, bool) {
	itemID := id("rs_")
	s.send("response.output_item.added", map[string]any{"output_index": index,
		"item": map[string]any{"type": "reasoning", "id": itemID, "summary": []any{}}})
	part := func(text string) map[string]any { return map[string]any{"type": "summary_text", "text": text} }
	at := map[string]any{"item_id": itemID, "output_index": index, "summary_index": 0}
	s.send("response.reasoning_summary_part.added", with(at, "part", part("")))
	for _, w := range words(s.Thinking) {
		s.send("response.reasoning_summary_text.delta", with(at, "delta", w))
		if !s.pace() {
			return nil, false
		}
	}
	s.send("response.reasoning_summary_text.done", with(at, "text", s.Thinking))
	s.send("response.reasoning_summary_part.done", with(at, "part", part(s.Thinking)))
	item := map[string]any{"type": "reasoning", "id": itemID, "summary": []any{part(s.Thinking)}}
	s.send("response.output_item.done", map[string]any{"output_index": index, "item": item})
	return item, true
}

// message streams an assistant message item with the text.
func (s *responsesStream) message(index int) (map[string]any, bool) {
	itemID := id("msg_")
	s.send("response.output_item.added", map[string]any{"output_index": index,
		"item": map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}})
	part := func(text string) map[string]any {
		return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	}
	at := map[string]any{"item_id": itemID, "output_index": index, "content_index": 0}
	s.send("response.content_part.added", with(at, "part", part("")))
	for _, w := range words(s.Text) {
		s.send("response.output_text.delta", with(with(at, "delta", w), "logprobs", []any{}))
		if !s.pace() {
			return nil, false
		}
	}
	s.send("response.output_text.done", with(with(at, "text", s.Text), "logprobs", []any{}))
	s.send("response.content_part.done", with(at, "part", part(s.Text)))
	item := map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "completed",
		"content": []any{part(s.Text)}}
	s.send("response.output_item.done", map[string]any{"output_index": index, "item": item})
	return item, true
}

// call streams a function_call item; a call of a namespace's tool
// ("<namespace>.<tool>", NamespaceSep) carries the namespace and the
// tool's own name.
func (s *responsesStream) call(index int, c ToolCall) (map[string]any, bool) {
	itemID := id("fc_")
	name, ns := c.Name, ""
	if i := strings.LastIndex(c.Name, NamespaceSep); i >= 0 {
		ns, name = c.Name[:i], c.Name[i+len(NamespaceSep):]
	}
	item := func(args, status string) map[string]any {
		it := map[string]any{"type": "function_call", "id": itemID, "call_id": c.ID, "name": name, "arguments": args, "status": status}
		if ns != "" {
			it["namespace"] = ns
		}
		return it
	}
	s.send("response.output_item.added", map[string]any{"output_index": index, "item": item("", "in_progress")})
	at := map[string]any{"item_id": itemID, "output_index": index}
	s.send("response.function_call_arguments.delta", with(at, "delta", c.Args))
	if !s.pace() {
		return nil, false
	}
	s.send("response.function_call_arguments.done", with(with(at, "arguments", c.Args), "name", name))
	done := item(c.Args, "completed")
	s.send("response.output_item.done", map[string]any{"output_index": index, "item": done})
	return done, true
}

// with is a copy of m with key set to v.
func with(m map[string]any, key string, v any) map[string]any {
	out := maps.Clone(m)
	out[key] = v
	return out
}
