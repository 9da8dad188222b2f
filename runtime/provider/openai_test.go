package provider

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

func TestOpenAITextStreaming(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"role": "assistant", "content": ""}, nil))
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "Hel"}, nil))
		s.Comment("keep-alive")
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "lo, wörld"}, nil))
		s.Event("", fakellm.ChatChunk(map[string]any{}, "stop"))
		s.Event("", fakellm.ChatUsage(100, 7, 40))
		s.Event("", "[DONE]")
	})
	p := testProvider(t, f, NameOpenAI, "/v1")
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
	want := protocol.Usage{Input: 60, Output: 7, CacheRead: 40, ContextTokens: 107, Model: fakellm.Model}
	if a.Usage == nil || *a.Usage != want {
		t.Errorf("usage = %+v, want %+v", a.Usage, want)
	}
	if k := a.Events[len(a.Events)-2].Kind; k != EventUsage {
		t.Errorf("event before stop = %v, want usage", k)
	}

	req := f.Only(t)
	if req.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", req.Path)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization header = %q, want the bearer key", got)
	}
	if fakellm.Get(t, req.Body, "model") != "test-model" || fakellm.Get(t, req.Body, "stream") != true {
		t.Errorf("model/stream wrong: %s", req.Raw)
	}
	if fakellm.Get(t, req.Body, "stream_options", "include_usage") != true {
		t.Errorf("stream_options.include_usage not requested: %s", req.Raw)
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "reasoning_effort", "tools"} {
		if has(req.Body, k) {
			t.Errorf("request has %q unasked: %s", k, req.Raw)
		}
	}
}

func TestOpenAIRequestConversion(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "ok"}, "stop"))
		s.Event("", "[DONE]")
	})
	p := testProvider(t, f, NameOpenAI, "/v1")
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

	body := f.Only(t).Body
	if fakellm.Get(t, body, "model") != "o3-mini" || fakellm.Get(t, body, "reasoning_effort") != "high" {
		t.Errorf("model/reasoning_effort wrong: %v", body)
	}
	// A compatible server (not api.openai.com) gets max_tokens.
	if fakellm.Get(t, body, "max_tokens") != float64(1234) || has(body, "max_completion_tokens") {
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
	if got := asJSON(t, fakellm.Get(t, body, "messages")); got != canonical(t, want) {
		t.Errorf("messages =\n%s\nwant\n%s", got, canonical(t, want))
	}
	wantTools := `[
		{"type":"function","function":{"name":"ls","description":"List a directory.",
			"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}},
		{"type":"function","function":{"name":"noargs","description":"No arguments.",
			"parameters":{"type":"object","properties":{}}}}]`
	if got := asJSON(t, fakellm.Get(t, body, "tools")); got != canonical(t, wantTools) {
		t.Errorf("tools =\n%s\nwant\n%s", got, canonical(t, wantTools))
	}
}

func TestOpenAIToolCallSplitAcrossManyChunks(t *testing.T) {
	args := `{"path":"dir/ü.go","content":"line 1\nline \"2\"\t{}[]"}`
	pieces := splitEvery(args, 2)
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"role": "assistant", "content": nil}, nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_abc", "write", ""), nil))
		for _, piece := range pieces {
			s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "", "", piece), nil))
		}
		s.Event("", fakellm.ChatChunk(map[string]any{}, "tool_calls"))
		s.Event("", fakellm.ChatUsage(50, 20, 0))
		s.Event("", "[DONE]")
	})
	st, err := testProvider(t, f, NameOpenAI, "/v1").Stream(background(t), Request{})
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
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "Two calls."}, nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_a", "read", ""), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(1, "call_b", "ls", ""), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "", "", `{"path":`), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(1, "", "", `{"path":"."}`), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "", "", `"a.go"}`), nil))
		s.Event("", fakellm.ChatChunk(map[string]any{}, "tool_calls"))
		s.Event("", "[DONE]")
	})
	st, err := testProvider(t, f, NameOpenAI, "/v1").Stream(background(t), Request{})
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
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"role": "assistant", "reasoning_content": "Think"}, nil))
		s.Event("", fakellm.ChatChunk(map[string]any{"reasoning_content": "ing…"}, nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_x", "grep", `{"pattern":`), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "", "", `"TODO"}`), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(1, "", "ls", `{"path":"src"}`), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_y", "read", `{"path":"x"}`), nil))
		s.Event("", fakellm.ChatChunk(map[string]any{}, "stop"))
	})
	st, err := testProvider(t, f, NameOpenAI, "/v1").Stream(background(t), Request{})
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
		end  func(s *fakellm.Events)
	}{
		{"connection dropped", func(*fakellm.Events) { fakellm.Disconnect() }},
		{"body ends without finish_reason or [DONE]", func(*fakellm.Events) {}},
		{"[DONE] without finish_reason", func(s *fakellm.Events) { s.Event("", "[DONE]") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
				s := fakellm.SSE(w)
				s.Event("", fakellm.ChatChunk(map[string]any{"content": "partial"}, nil))
				s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_1", "bash", `{"command":"ec`), nil))
				tc.end(s)
			})
			st, err := testProvider(t, f, NameOpenAI, "/v1").Stream(background(t), Request{})
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

func TestOpenAIRetriesWhenAsked(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After-Ms", "1")
			fakellm.JSONError(w, 503, `{"error":{"message":"busy"}}`)
			return
		}
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "ok"}, "stop"))
		s.Event("", "[DONE]")
	})
	p, err := New(Config{Name: NameOpenAI, BaseURL: f.URL + "/v1", APIKey: testKey, HTTPClient: f.Client(), MaxRetries: 1})
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
	if n := len(f.Requests()); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
}

func TestOpenAIErrorEventInStream(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "a"}, nil))
		s.Event("", map[string]any{"error": map[string]any{"message": "model crashed", "type": "internal_error"}})
	})
	st, err := testProvider(t, f, NameOpenAI, "/v1").Stream(background(t), Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = readAll(t, st)
	assertProviderError(t, err, "error while streaming", "internal_error: model crashed")
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
