package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// chunk is one chat.completion.chunk with a single choice.
func chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion.chunk",
		"created": 1700000000,
		"model":   "test-model-2025",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
	}
}

// usageChunk is the last chunk of a stream with include_usage: no choices.
func usageChunk(prompt, completion, cached int) map[string]any {
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model-2025",
		"choices": []any{},
		"usage": map[string]any{
			"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached},
		},
	}
}

// toolDelta is a delta carrying one tool-call fragment; empty id/name are
// left out, as servers do after the first fragment.
func toolDelta(index int, id, name, args string) map[string]any {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"] = id
		tc["type"] = "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	return map[string]any{"tool_calls": []any{tc}}
}

func TestOpenAITextStreaming(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		s.event("", chunk(map[string]any{"content": "Hel"}, nil))
		s.comment("keep-alive")
		s.event("", chunk(map[string]any{"content": "lo, wörld"}, nil))
		s.event("", chunk(map[string]any{}, "stop"))
		s.event("", usageChunk(100, 7, 40))
		s.event("", "[DONE]")
	})
	p := f.provider(t, NameOpenAI, "/v1")
	st, err := p.Stream(background(t), Request{Messages: []protocol.Message{
		{ID: "m1", Role: "user", Content: []protocol.ContentBlock{{Type: "text", Text: "hi"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)

	if got := a.Text[0]; got != "Hello, wörld" {
		t.Errorf("text = %q", got)
	}
	if len(a.Text) != 1 {
		t.Errorf("text blocks = %v, want only block 0", a.Text)
	}
	if a.Stop != StopEndTurn {
		t.Errorf("stop = %q, want end_turn", a.Stop)
	}
	want := protocol.Usage{Input: 60, Output: 7, CacheRead: 40, ContextTokens: 107, Model: "test-model-2025"}
	if a.Usage == nil || *a.Usage != want {
		t.Errorf("usage = %+v, want %+v", a.Usage, want)
	}
	if k := a.Events[len(a.Events)-2].Kind; k != EventUsage {
		t.Errorf("event before stop = %v, want usage", k)
	}

	req := f.only(t)
	if req.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", req.Path)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization header = %q, want the bearer key", got)
	}
	if get(t, req.Body, "model") != "test-model" || get(t, req.Body, "stream") != true {
		t.Errorf("model/stream wrong: %s", req.Raw)
	}
	if get(t, req.Body, "stream_options", "include_usage") != true {
		t.Errorf("stream_options.include_usage not requested: %s", req.Raw)
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "reasoning_effort", "tools"} {
		if has(req.Body, k) {
			t.Errorf("request has %q unasked: %s", k, req.Raw)
		}
	}
}

func TestOpenAIRequestConversion(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"content": "ok"}, "stop"))
		s.event("", "[DONE]")
	})
	p := f.provider(t, NameOpenAI, "/v1")
	req := conversation()
	req.Model = "o3-mini"
	req.Reasoning = "high"
	req.MaxTokens = 1234
	st, err := p.Stream(background(t), req)
	if err != nil {
		t.Fatal(err)
	}
	mustRead(t, st)
	st.Close()

	body := f.only(t).Body
	if get(t, body, "model") != "o3-mini" || get(t, body, "reasoning_effort") != "high" {
		t.Errorf("model/reasoning_effort wrong: %v", body)
	}
	// A compatible server (not api.openai.com) gets max_tokens.
	if get(t, body, "max_tokens") != float64(1234) || has(body, "max_completion_tokens") {
		t.Errorf("max tokens field wrong: %v", body)
	}
	want := `[
		{"role":"system","content":"You are a coding agent."},
		{"role":"user","content":"list the files"},
		{"role":"assistant","content":"Let me look.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\"path\":\".\"}"}},
			{"id":"call_2","type":"function","function":{"name":"read","arguments":"{\"limit\":10,\"path\":\"go.mod\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"a.go\nb.go"},
		{"role":"tool","tool_call_id":"call_2","content":"Error: no such file"},
		{"role":"user","content":"also check c.go"}]`
	if got := asJSON(t, get(t, body, "messages")); got != canonical(t, want) {
		t.Errorf("messages =\n%s\nwant\n%s", got, canonical(t, want))
	}
	wantTools := `[
		{"type":"function","function":{"name":"ls","description":"List a directory.",
			"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}},
		{"type":"function","function":{"name":"noargs","description":"No arguments.",
			"parameters":{"type":"object","properties":{}}}}]`
	if got := asJSON(t, get(t, body, "tools")); got != canonical(t, wantTools) {
		t.Errorf("tools =\n%s\nwant\n%s", got, canonical(t, wantTools))
	}
}

func TestOpenAIToolCallSplitAcrossManyChunks(t *testing.T) {
	args := `{"path":"dir/ü.go","content":"line 1\nline \"2\"\t{}[]"}`
	pieces := splitEvery(args, 2)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"role": "assistant", "content": nil}, nil))
		s.event("", chunk(toolDelta(0, "call_abc", "write", ""), nil))
		for _, piece := range pieces {
			s.event("", chunk(toolDelta(0, "", "", piece), nil))
		}
		s.event("", chunk(map[string]any{}, "tool_calls"))
		s.event("", usageChunk(50, 20, 0))
		s.event("", "[DONE]")
	})
	st, err := f.provider(t, NameOpenAI, "/v1").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)

	c := a.Calls[0]
	if c == nil || c.ID != "call_abc" || c.Name != "write" {
		t.Fatalf("calls = %+v", a.Calls)
	}
	if c.Args != args {
		t.Errorf("args = %q, want exactly %q", c.Args, args)
	}
	if c.Deltas != len(pieces) {
		t.Errorf("args deltas = %d, want %d (streamed as they came)", c.Deltas, len(pieces))
	}
	if a.Stop != StopToolUse {
		t.Errorf("stop = %q, want tool_use", a.Stop)
	}
	if a.Usage == nil || a.Usage.Input != 50 || a.Usage.Output != 20 {
		t.Errorf("usage = %+v", a.Usage)
	}
}

func TestOpenAIParallelToolCalls(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"content": "Two calls."}, nil))
		s.event("", chunk(toolDelta(0, "call_a", "read", ""), nil))
		s.event("", chunk(toolDelta(1, "call_b", "ls", ""), nil))
		s.event("", chunk(toolDelta(0, "", "", `{"path":`), nil))
		s.event("", chunk(toolDelta(1, "", "", `{"path":"."}`), nil))
		s.event("", chunk(toolDelta(0, "", "", `"a.go"}`), nil))
		s.event("", chunk(map[string]any{}, "tool_calls"))
		s.event("", "[DONE]")
	})
	st, err := f.provider(t, NameOpenAI, "/v1").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)

	if a.Text[0] != "Two calls." {
		t.Errorf("text = %v", a.Text)
	}
	want := map[int]call{1: {ID: "call_a", Name: "read", Args: `{"path":"a.go"}`}, 2: {ID: "call_b", Name: "ls", Args: `{"path":"."}`}}
	for idx, w := range want {
		c := a.Calls[idx]
		if c == nil || c.ID != w.ID || c.Name != w.Name || c.Args != w.Args {
			t.Errorf("block %d = %+v, want %+v", idx, c, w)
		}
	}
	if len(a.Calls) != 2 || a.Stop != StopToolUse {
		t.Errorf("calls = %d, stop = %q", len(a.Calls), a.Stop)
	}
	if a.Usage != nil {
		t.Errorf("usage = %+v, want none (the server sent none)", a.Usage)
	}
}

// TestOpenAICompatibleServer is a llama.cpp/Ollama-style server: reasoning in
// "reasoning_content", no usage despite include_usage, tool-call ids only on
// the first fragment (one call has none at all), one call's arguments whole
// in one chunk, a call numbered 0 again with a new id, finish_reason "stop"
// after tool calls, and no [DONE].
func TestOpenAICompatibleServer(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"role": "assistant", "reasoning_content": "Think"}, nil))
		s.event("", chunk(map[string]any{"reasoning_content": "ing…"}, nil))
		s.event("", chunk(toolDelta(0, "call_x", "grep", `{"pattern":`), nil))
		s.event("", chunk(toolDelta(0, "", "", `"TODO"}`), nil))
		s.event("", chunk(toolDelta(1, "", "ls", `{"path":"src"}`), nil))
		s.event("", chunk(toolDelta(0, "call_y", "read", `{"path":"x"}`), nil))
		s.event("", chunk(map[string]any{}, "stop"))
	})
	st, err := f.provider(t, NameOpenAI, "/v1").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := mustRead(t, st)

	if a.Thinking[0] != "Thinking…" {
		t.Errorf("thinking = %v", a.Thinking)
	}
	if len(a.Calls) != 3 {
		t.Fatalf("calls = %v, want 3", a.Calls)
	}
	if c := a.Calls[1]; c.ID != "call_x" || c.Name != "grep" || c.Args != `{"pattern":"TODO"}` {
		t.Errorf("call 1 = %+v", c)
	}
	if c := a.Calls[2]; c.ID == "" || !strings.HasPrefix(c.ID, "call_") || c.Name != "ls" || c.Args != `{"path":"src"}` {
		t.Errorf("call 2 = %+v (an id must be made up)", c)
	}
	if c := a.Calls[3]; c.ID != "call_y" || c.Name != "read" || c.Args != `{"path":"x"}` {
		t.Errorf("call 3 = %+v", c)
	}
	if a.Usage != nil {
		t.Errorf("usage = %+v, want none", a.Usage)
	}
	if a.Stop != StopToolUse {
		t.Errorf("stop = %q, want tool_use", a.Stop)
	}
}

func TestOpenAIMidStreamDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(s *sseWriter)
	}{
		{"connection dropped", func(*sseWriter) { disconnect() }},
		{"body ends without finish_reason or [DONE]", func(*sseWriter) {}},
		{"[DONE] without finish_reason", func(s *sseWriter) { s.event("", "[DONE]") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				s := startSSE(t, w)
				s.event("", chunk(map[string]any{"content": "partial"}, nil))
				s.event("", chunk(toolDelta(0, "call_1", "bash", `{"command":"ec`), nil))
				tc.end(s)
			})
			st, err := f.provider(t, NameOpenAI, "/v1").Stream(background(t), Request{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			a, err := readAll(t, st)
			assertProviderError(t, err, "openai: stream ended unexpectedly")
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("errors.Is(err, ErrTruncated) = false for %v", err)
			}
			if a.Text[0] != "partial" || a.Stop != "" {
				t.Errorf("answer before the failure = %+v", a)
			}
			// The failure is sticky.
			if _, err2 := st.Next(); !errors.Is(err2, ErrTruncated) {
				t.Errorf("Next after failure = %v", err2)
			}
		})
	}
}

func TestOpenAIHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   []string
	}{
		{429, `{"error":{"message":"Rate limit reached for key ` + testKey + `","type":"requests","code":"rate_limit_exceeded"}}`,
			[]string{"openai: rate limited (429)", "Rate limit reached", "[redacted]"}},
		{500, `{"error":{"message":"The server had an error","type":"server_error"}}`,
			[]string{"openai: HTTP 500 Internal Server Error", "server_error: The server had an error"}},
		{502, `<html>bad gateway</html>`, []string{"HTTP 502 Bad Gateway"}},
		{401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error"}}`,
			[]string{"authentication failed (401)"}},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				jsonError(w, tc.status, tc.body)
			})
			st, err := f.provider(t, NameOpenAI, "/v1").Stream(background(t), Request{})
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

func TestOpenAIRetriesWhenAsked(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After-Ms", "1")
			jsonError(w, 503, `{"error":{"message":"busy"}}`)
			return
		}
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"content": "ok"}, "stop"))
		s.event("", "[DONE]")
	})
	p, err := New(Config{Name: NameOpenAI, BaseURL: f.srv.URL + "/v1", APIKey: testKey, HTTPClient: f.srv.Client(), MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if a := mustRead(t, st); a.Text[0] != "ok" {
		t.Errorf("text = %v", a.Text)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
}

func TestOpenAIErrorEventInStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"content": "a"}, nil))
		s.event("", map[string]any{"error": map[string]any{"message": "model crashed", "type": "internal_error"}})
	})
	st, err := f.provider(t, NameOpenAI, "/v1").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = readAll(t, st)
	assertProviderError(t, err, "error while streaming", "internal_error: model crashed")
}

func TestOpenAICancelMidStream(t *testing.T) {
	released := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startSSE(t, w)
		s.event("", chunk(map[string]any{"content": "thinking hard"}, nil))
		select { // the stream stalls until the client goes away
		case <-r.Context().Done():
		case <-released:
		}
	})
	defer close(released)
	ctx, cancel := context.WithCancel(background(t))
	defer cancel()
	st, err := f.provider(t, NameOpenAI, "/v1").Stream(ctx, Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ev, err := st.Next(); err != nil || ev.Text != "thinking hard" {
		t.Fatalf("first event = %+v, %v", ev, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	within(t, 2*time.Second, "Next after cancel", func() {
		_, err = st.Next()
	})
	assertProviderError(t, err, "openai: request cancelled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled) = false for %v", err)
	}
}

func TestOpenAIBaseURLChoosesMaxTokensField(t *testing.T) {
	for base, official := range map[string]bool{
		"":                           true,
		"https://api.openai.com/v1":  true,
		"http://127.0.0.1:8080/v1":   false,
		"http://localhost:11434/v1/": false,
	} {
		if got := isOfficialOpenAI(base); got != official {
			t.Errorf("isOfficialOpenAI(%q) = %v, want %v", base, got, official)
		}
	}
}
