package provider

import (
	"errors"
	"net/http"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

func TestAnthropicTextStreamingAndUsage(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(10, 50, 200)
		s.Ping()
		s.TextBlock(0, "Hel", "lo, ", "wörld")
		s.MessageDelta("end_turn", 12)
		s.MessageStop()
	})
	st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), Request{Messages: []protocol.Message{
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
	want := protocol.Usage{Input: 10, Output: 12, CacheRead: 200, CacheWrite: 50, ContextTokens: 272, Model: fakellm.Model}
	if a.Usage == nil || *a.Usage != want {
		t.Errorf("usage = %+v, want %+v", a.Usage, want)
	}

	req := f.Only(t)
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
	if fakellm.Get(t, req.Body, "model") != "test-model" || fakellm.Get(t, req.Body, "stream") != true {
		t.Errorf("model/stream wrong: %s", req.Raw)
	}
	if fakellm.Get(t, req.Body, "max_tokens") != float64(anthropicAnswerTokens) {
		t.Errorf("max_tokens = %v, want the default %d", fakellm.Get(t, req.Body, "max_tokens"), anthropicAnswerTokens)
	}
	if has(req.Body, "thinking") || has(req.Body, "system") || has(req.Body, "tools") {
		t.Errorf("unasked fields: %s", req.Raw)
	}
}

func TestAnthropicRequestConversion(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(1, 0, 0)
		s.TextBlock(0, "ok")
		s.MessageDelta("end_turn", 1)
		s.MessageStop()
	})
	req := conversation()
	req.Model = "claude-sonnet-4-5"
	req.Reasoning = "low"
	st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), req)
	if err != nil {
		t.Fatal(err)
	}
	mustRead(t, st)
	st.Close()

	body := f.Only(t).Body
	if fakellm.Get(t, body, "model") != "claude-sonnet-4-5" {
		t.Errorf("model = %v", fakellm.Get(t, body, "model"))
	}
	if got := asJSON(t, fakellm.Get(t, body, "thinking")); got != canonical(t, `{"type":"enabled","budget_tokens":4096}`) {
		t.Errorf("thinking = %s", got)
	}
	if fakellm.Get(t, body, "max_tokens") != float64(budgetLow+anthropicAnswerTokens) {
		t.Errorf("max_tokens = %v, want budget + answer", fakellm.Get(t, body, "max_tokens"))
	}
	wantSystem := `[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}]`
	if got := asJSON(t, fakellm.Get(t, body, "system")); got != canonical(t, wantSystem) {
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
	if got := asJSON(t, fakellm.Get(t, body, "messages")); got != canonical(t, want) {
		t.Errorf("messages =\n%s\nwant\n%s", got, canonical(t, want))
	}
	wantTools := `[
		{"name":"ls","description":"List a directory.",
			"input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}},
		{"name":"noargs","description":"No arguments.","input_schema":{"type":"object","properties":{}},
			"cache_control":{"type":"ephemeral"}}]`
	if got := asJSON(t, fakellm.Get(t, body, "tools")); got != canonical(t, wantTools) {
		t.Errorf("tools =\n%s\nwant\n%s", got, canonical(t, wantTools))
	}
}

func TestAnthropicUnsignedThinkingIsDropped(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(1, 0, 0)
		s.MessageDelta("end_turn", 0)
		s.MessageStop()
	})
	req := conversation()
	req.Signatures = map[BlockRef]Signature{}
	req.Messages[1].Content[0] = protocol.ContentBlock{Type: "thinking"} // a redacted block
	req.Signatures[BlockRef{MessageID: "m2", Index: 0}] = Signature{Value: "opaque-data", Redacted: true}
	req.Messages = append(req.Messages, protocol.Message{ID: "m4", Role: "assistant", Content: []protocol.ContentBlock{
		{Type: "thinking", Text: "unsigned"}, {Type: "text", Text: "done"},
	}})
	st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), req)
	if err != nil {
		t.Fatal(err)
	}
	a := mustRead(t, st)
	st.Close()
	if a.Stop != StopEndTurn || len(a.Text) != 0 {
		t.Errorf("answer = %+v", a)
	}
	body := f.Only(t).Body
	if got := asJSON(t, fakellm.Get(t, body, "messages", 1, "content", 0)); got != canonical(t, `{"type":"redacted_thinking","data":"opaque-data"}`) {
		t.Errorf("redacted block = %s", got)
	}
	if got := asJSON(t, fakellm.Get(t, body, "messages", 3, "content")); got != canonical(t, `[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}}]`) {
		t.Errorf("unsigned thinking not dropped: %s", got)
	}
}

func TestAnthropicThinkingAndParallelToolUse(t *testing.T) {
	args := `{"command":"go test ./...","timeout_ms":60000,"note":"ü \"q\""}`
	pieces := splitEvery(args, 3)
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(30, 0, 0)
		s.ThinkingBlock(0, "EqQBCgIYAhIM", "Run the ", "tests.")
		s.TextBlock(1, "Running.")
		s.ToolBlock(2, "toolu_01", "bash", pieces...)
		s.Ping()
		s.ToolBlock(3, "toolu_02", "ls", `{"path"`, `:"."}`)
		s.BlockStart(4, map[string]any{"type": "tool_use", "id": "toolu_03", "name": "noargs", "input": map[string]any{}})
		s.BlockStop(4)
		s.MessageDelta("tool_use", 80)
		s.MessageStop()
	})
	st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), Request{Reasoning: "high"})
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
	body := f.Only(t).Body
	if got := asJSON(t, fakellm.Get(t, body, "thinking")); got != canonical(t, `{"type":"enabled","budget_tokens":20480}`) {
		t.Errorf("thinking = %s", got)
	}
}

func TestAnthropicRedactedThinkingAndWholeInput(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(5, 0, 0)
		s.BlockStart(0, map[string]any{"type": "redacted_thinking", "data": "ENCRYPTED"})
		s.BlockStop(0)
		// A compatible server that sends the whole input with the start.
		s.BlockStart(1, map[string]any{"type": "tool_use", "id": "toolu_9", "name": "read", "input": map[string]any{"path": "a"}})
		s.BlockStop(1)
		s.MessageDelta("tool_use", 9)
		s.MessageStop()
	})
	st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), Request{})
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
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(1, 0, 0)
		s.MessageDelta("end_turn", 1)
		s.MessageStop()
	})
	p := testProvider(t, f, NameAnthropic, "")
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
		reqs := f.Requests()
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
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		t.Error("no request may be sent")
	})
	for _, tc := range []struct{ model, level string }{
		{"claude-sonnet-4-5", "extreme"},
		{"claude-3-5-haiku-latest", "low"}, // cannot think at all
	} {
		st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), Request{Model: tc.model, Reasoning: tc.level})
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
		end  func(s fakellm.Messages)
	}{
		{"connection dropped", func(fakellm.Messages) { fakellm.Disconnect() }},
		{"body ends without message_stop", func(s fakellm.Messages) { s.BlockStop(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
				s := fakellm.StartMessages(w)
				s.MessageStart(5, 0, 0)
				s.TextBlock(0, "partial")
				s.BlockStart(1, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": map[string]any{}})
				s.Delta(1, map[string]any{"type": "input_json_delta", "partial_json": `{"comm`})
				tc.end(s)
			})
			st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), Request{})
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

func TestAnthropicErrorEventInStream(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(5, 0, 0)
		s.TextBlock(0, "a")
		s.Event("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
	})
	st, err := testProvider(t, f, NameAnthropic, "").Stream(background(t), Request{})
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
