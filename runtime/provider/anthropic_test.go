package provider

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// msgStream writes the Anthropic Messages streaming events.
type msgStream struct{ *sseWriter }

func startMessages(t *testing.T, w http.ResponseWriter) msgStream {
	return msgStream{startSSE(t, w)}
}

func (s msgStream) messageStart(input, cacheWrite, cacheRead int) {
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_01", "type": "message", "role": "assistant", "content": []any{},
		"model": "claude-test-20250101", "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": input, "cache_creation_input_tokens": cacheWrite,
			"cache_read_input_tokens": cacheRead, "output_tokens": 1,
		},
	}})
}

func (s msgStream) blockStart(index int, block map[string]any) {
	s.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
}

func (s msgStream) delta(index int, delta map[string]any) {
	s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": delta})
}

func (s msgStream) blockStop(index int) {
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}

func (s msgStream) messageDelta(stop string, output int) {
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": output}})
}

func (s msgStream) messageStop() {
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

func (s msgStream) ping() { s.event("ping", map[string]any{"type": "ping"}) }

// textBlock streams a whole text block.
func (s msgStream) textBlock(index int, parts ...string) {
	s.blockStart(index, map[string]any{"type": "text", "text": ""})
	for _, p := range parts {
		s.delta(index, map[string]any{"type": "text_delta", "text": p})
	}
	s.blockStop(index)
}

// toolBlock streams a whole tool_use block with its input in pieces.
func (s msgStream) toolBlock(index int, id, name string, pieces ...string) {
	s.blockStart(index, map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}})
	for _, p := range pieces {
		s.delta(index, map[string]any{"type": "input_json_delta", "partial_json": p})
	}
	s.blockStop(index)
}

func TestAnthropicTextStreamingAndUsage(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(10, 50, 200)
		s.ping()
		s.textBlock(0, "Hel", "lo, ", "wörld")
		s.messageDelta("end_turn", 12)
		s.messageStop()
	})
	st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{Messages: []protocol.Message{
		{ID: "m1", Role: "user", Content: []protocol.ContentBlock{{Type: "text", Text: "hi"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)

	if a.Text[0] != "Hello, wörld" || len(a.Text) != 1 {
		t.Errorf("text = %v", a.Text)
	}
	if a.Stop != StopEndTurn {
		t.Errorf("stop = %q", a.Stop)
	}
	want := protocol.Usage{Input: 10, Output: 12, CacheRead: 200, CacheWrite: 50, ContextTokens: 272, Model: "claude-test-20250101"}
	if a.Usage == nil || *a.Usage != want {
		t.Errorf("usage = %+v, want %+v", a.Usage, want)
	}

	req := f.only(t)
	if req.Path != "/v1/messages" {
		t.Errorf("path = %q", req.Path)
	}
	// The SDK sends the key as a bearer token (older versions: X-Api-Key).
	if req.Header.Get("Authorization") != "Bearer "+testKey && req.Header.Get("X-Api-Key") != testKey {
		t.Errorf("no auth header with the key")
	}
	if req.Header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	if get(t, req.Body, "model") != "test-model" || get(t, req.Body, "stream") != true {
		t.Errorf("model/stream wrong: %s", req.Raw)
	}
	if get(t, req.Body, "max_tokens") != float64(anthropicAnswerTokens) {
		t.Errorf("max_tokens = %v, want the default %d", get(t, req.Body, "max_tokens"), anthropicAnswerTokens)
	}
	if has(req.Body, "thinking") || has(req.Body, "system") || has(req.Body, "tools") {
		t.Errorf("unasked fields: %s", req.Raw)
	}
}

func TestAnthropicRequestConversion(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(1, 0, 0)
		s.textBlock(0, "ok")
		s.messageDelta("end_turn", 1)
		s.messageStop()
	})
	req := conversation()
	req.Model = "claude-sonnet-4-5"
	req.Reasoning = "low"
	st, err := f.provider(t, NameAnthropic, "").Stream(background(t), req)
	if err != nil {
		t.Fatal(err)
	}
	mustRead(t, st)
	st.Close()

	body := f.only(t).Body
	if get(t, body, "model") != "claude-sonnet-4-5" {
		t.Errorf("model = %v", get(t, body, "model"))
	}
	if got := asJSON(t, get(t, body, "thinking")); got != canonical(t, `{"type":"enabled","budget_tokens":4096}`) {
		t.Errorf("thinking = %s", got)
	}
	if get(t, body, "max_tokens") != float64(budgetLow+anthropicAnswerTokens) {
		t.Errorf("max_tokens = %v, want budget + answer", get(t, body, "max_tokens"))
	}
	wantSystem := `[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}]`
	if got := asJSON(t, get(t, body, "system")); got != canonical(t, wantSystem) {
		t.Errorf("system = %s", got)
	}
	want := `[
		{"role":"user","content":[{"type":"text","text":"list the files"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"I should call ls.","signature":"sig-abc"},
			{"type":"text","text":"Let me look."},
			{"type":"tool_use","id":"call_1","name":"ls","input":{"path":"."}},
			{"type":"tool_use","id":"call_2","name":"read","input":{"path":"go.mod","limit":10}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"a.go\nb.go"}]},
			{"type":"tool_result","tool_use_id":"call_2","is_error":true,"content":[{"type":"text","text":"no such file"}]},
			{"type":"text","text":"also check c.go","cache_control":{"type":"ephemeral"}}]}]`
	if got := asJSON(t, get(t, body, "messages")); got != canonical(t, want) {
		t.Errorf("messages =\n%s\nwant\n%s", got, canonical(t, want))
	}
	wantTools := `[
		{"name":"ls","description":"List a directory.",
			"input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}},
		{"name":"noargs","description":"No arguments.","input_schema":{"type":"object","properties":{}},
			"cache_control":{"type":"ephemeral"}}]`
	if got := asJSON(t, get(t, body, "tools")); got != canonical(t, wantTools) {
		t.Errorf("tools =\n%s\nwant\n%s", got, canonical(t, wantTools))
	}
}

func TestAnthropicUnsignedThinkingIsDropped(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(1, 0, 0)
		s.messageDelta("end_turn", 0)
		s.messageStop()
	})
	req := conversation()
	req.Signatures = map[BlockRef]Signature{}
	req.Messages[1].Content[0] = protocol.ContentBlock{Type: "thinking"} // a redacted block
	req.Signatures[BlockRef{MessageID: "m2", Index: 0}] = Signature{Value: "opaque-data", Redacted: true}
	req.Messages = append(req.Messages, protocol.Message{ID: "m4", Role: "assistant", Content: []protocol.ContentBlock{
		{Type: "thinking", Text: "unsigned"}, {Type: "text", Text: "done"},
	}})
	st, err := f.provider(t, NameAnthropic, "").Stream(background(t), req)
	if err != nil {
		t.Fatal(err)
	}
	a := mustRead(t, st)
	st.Close()
	if a.Stop != StopEndTurn || len(a.Text) != 0 {
		t.Errorf("answer = %+v", a)
	}
	body := f.only(t).Body
	if got := asJSON(t, get(t, body, "messages", 1, "content", 0)); got != canonical(t, `{"type":"redacted_thinking","data":"opaque-data"}`) {
		t.Errorf("redacted block = %s", got)
	}
	if got := asJSON(t, get(t, body, "messages", 3, "content")); got != canonical(t, `[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}}]`) {
		t.Errorf("unsigned thinking not dropped: %s", got)
	}
}

func TestAnthropicThinkingAndParallelToolUse(t *testing.T) {
	args := `{"command":"go test ./...","timeout_ms":60000,"note":"ü \"q\""}`
	pieces := splitEvery(args, 3)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(30, 0, 0)
		s.blockStart(0, map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		s.delta(0, map[string]any{"type": "thinking_delta", "thinking": "Run the "})
		s.delta(0, map[string]any{"type": "thinking_delta", "thinking": "tests."})
		s.delta(0, map[string]any{"type": "signature_delta", "signature": "EqQBCgIYAhIM"})
		s.blockStop(0)
		s.textBlock(1, "Running.")
		s.toolBlock(2, "toolu_01", "bash", pieces...)
		s.ping()
		s.toolBlock(3, "toolu_02", "ls", `{"path"`, `:"."}`)
		s.blockStart(4, map[string]any{"type": "tool_use", "id": "toolu_03", "name": "noargs", "input": map[string]any{}})
		s.blockStop(4)
		s.messageDelta("tool_use", 80)
		s.messageStop()
	})
	st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{Reasoning: "high"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)

	if a.Thinking[0] != "Run the tests." || a.Sigs[0] != "EqQBCgIYAhIM" {
		t.Errorf("thinking = %q, signature = %q", a.Thinking[0], a.Sigs[0])
	}
	if a.Text[1] != "Running." {
		t.Errorf("text = %v", a.Text)
	}
	if c := a.Calls[2]; c == nil || c.ID != "toolu_01" || c.Name != "bash" || c.Args != args || c.Deltas != len(pieces) {
		t.Errorf("call 2 = %+v, want args %q in %d deltas", c, args, len(pieces))
	}
	if c := a.Calls[3]; c == nil || c.ID != "toolu_02" || c.Name != "ls" || c.Args != `{"path":"."}` {
		t.Errorf("call 3 = %+v", c)
	}
	if c := a.Calls[4]; c == nil || c.ID != "toolu_03" || c.Args != "" {
		t.Errorf("call 4 = %+v (no arguments)", c)
	}
	if a.Stop != StopToolUse {
		t.Errorf("stop = %q", a.Stop)
	}
	if a.Usage == nil || a.Usage.Input != 30 || a.Usage.Output != 80 {
		t.Errorf("usage = %+v", a.Usage)
	}
	body := f.only(t).Body
	if got := asJSON(t, get(t, body, "thinking")); got != canonical(t, `{"type":"enabled","budget_tokens":20480}`) {
		t.Errorf("thinking = %s", got)
	}
}

func TestAnthropicRedactedThinkingAndWholeInput(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(5, 0, 0)
		s.blockStart(0, map[string]any{"type": "redacted_thinking", "data": "ENCRYPTED"})
		s.blockStop(0)
		// A compatible server that sends the whole input with the start.
		s.blockStart(1, map[string]any{"type": "tool_use", "id": "toolu_9", "name": "read", "input": map[string]any{"path": "a"}})
		s.blockStop(1)
		s.messageDelta("tool_use", 9)
		s.messageStop()
	})
	st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)
	if ev := a.Events[0]; ev.Kind != EventThinking || !ev.Redacted || ev.Signature != "ENCRYPTED" || ev.Index != 0 {
		t.Errorf("redacted thinking event = %+v", ev)
	}
	if c := a.Calls[1]; c == nil || canonical(t, c.Args) != `{"path":"a"}` {
		t.Errorf("call = %+v", c)
	}
}

func TestAnthropicAdaptiveThinking(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(1, 0, 0)
		s.messageDelta("end_turn", 1)
		s.messageStop()
	})
	p := f.provider(t, NameAnthropic, "")
	for level, want := range map[string]string{
		"medium": `{"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"}}`,
		"off":    `{"thinking":{"type":"disabled"}}`,
	} {
		st, err := p.Stream(background(t), Request{Model: "claude-opus-4-6", Reasoning: level})
		if err != nil {
			t.Fatal(err)
		}
		mustRead(t, st)
		st.Close()
		reqs := f.requests()
		body := reqs[len(reqs)-1].Body
		got := map[string]any{"thinking": body["thinking"]}
		if has(body, "output_config") {
			got["output_config"] = body["output_config"]
		}
		if asJSON(t, got) != canonical(t, want) {
			t.Errorf("level %s: %s, want %s", level, asJSON(t, got), want)
		}
	}
}

func TestAnthropicUnknownReasoningLevel(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		t.Error("no request may be sent")
	})
	for _, tc := range []struct{ model, level string }{
		{"claude-sonnet-4-5", "extreme"},
		{"claude-3-5-haiku-latest", "low"}, // cannot think at all
	} {
		st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{Model: tc.model, Reasoning: tc.level})
		if st != nil {
			t.Fatal("got a stream")
		}
		assertProviderError(t, err, "no reasoning level")
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("errors.Is(err, ErrInvalidRequest) = false for %v", err)
		}
	}
}

func TestAnthropicMidStreamDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(s msgStream)
	}{
		{"connection dropped", func(msgStream) { disconnect() }},
		{"body ends without message_stop", func(s msgStream) { s.blockStop(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				s := startMessages(t, w)
				s.messageStart(5, 0, 0)
				s.textBlock(0, "partial")
				s.blockStart(1, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": map[string]any{}})
				s.delta(1, map[string]any{"type": "input_json_delta", "partial_json": `{"comm`})
				tc.end(s)
			})
			st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			a, err := readAll(t, st)
			assertProviderError(t, err, "anthropic: stream ended unexpectedly")
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("errors.Is(err, ErrTruncated) = false for %v", err)
			}
			if a.Text[0] != "partial" || a.Stop != "" || a.Usage != nil {
				t.Errorf("answer before the failure = %+v", a)
			}
		})
	}
}

func TestAnthropicHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   []string
	}{
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your rate limit (key ` + testKey + `)"},"request_id":"req_1"}`,
			[]string{"anthropic: rate limited (429)", "rate_limit_error: Number of request tokens", "[redacted]"}},
		{500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			[]string{"anthropic: HTTP 500 Internal Server Error", "api_error: Internal server error"}},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			[]string{"anthropic: overloaded (529)", "overloaded_error: Overloaded"}},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				jsonError(w, tc.status, tc.body)
			})
			st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{})
			if st != nil {
				t.Fatal("got a stream for a failed request")
			}
			assertProviderError(t, err, tc.want...)
			if got := HTTPStatus(err); got != tc.status {
				t.Errorf("HTTPStatus = %d, want %d", got, tc.status)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("requests = %d, want 1 (MaxRetries 0: no retry)", n)
			}
		})
	}
}

func TestAnthropicErrorEventInStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(5, 0, 0)
		s.textBlock(0, "a")
		s.event("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
	})
	st, err := f.provider(t, NameAnthropic, "").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = readAll(t, st)
	assertProviderError(t, err, "anthropic: error while streaming: overloaded_error: Overloaded")
	if HTTPStatus(err) != 0 {
		t.Errorf("HTTPStatus = %d, want 0 for an in-stream error", HTTPStatus(err))
	}
}

func TestAnthropicCancelMidStream(t *testing.T) {
	released := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(t, w)
		s.messageStart(5, 0, 0)
		s.blockStart(0, map[string]any{"type": "text", "text": ""})
		s.delta(0, map[string]any{"type": "text_delta", "text": "so"})
		select {
		case <-r.Context().Done():
		case <-released:
		}
	})
	defer close(released)
	ctx, cancel := context.WithCancel(background(t))
	defer cancel()
	st, err := f.provider(t, NameAnthropic, "").Stream(ctx, Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ev, err := st.Next(); err != nil || ev.Text != "so" {
		t.Fatalf("first event = %+v, %v", ev, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	within(t, 2*time.Second, "Next after cancel", func() {
		_, err = st.Next()
	})
	assertProviderError(t, err, "anthropic: request cancelled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled) = false for %v", err)
	}
}
