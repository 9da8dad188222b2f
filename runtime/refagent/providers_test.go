package refagent

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// testAPIKey is the key every fake-provider runtime gets. It must never
// appear on stdout or stderr.
const testAPIKey = "sk-shard-test-0123456789-secret"

// startWithProvider starts a runtime talking to the fake service f as the
// named provider.
func startWithProvider(t *testing.T, f *fakellm.Server, name, model string, mod func(*Options)) *harness {
	t.Helper()
	base := f.URL
	if name == "openai" {
		base += "/v1"
	}
	h := start(t, func(o *Options) {
		o.Provider = name
		o.BaseURL = base
		o.ProviderModel = model
		o.APIKey = testAPIKey
		if mod != nil {
			mod(o)
		}
	})
	h.handshake()
	return h
}

// TestOpenAIEndToEnd drives a runtime against a fake OpenAI-compatible
// server: streamed text, a bash call whose id, name and arguments arrive
// across many chunks, the permission gate, the tool result (with its exit
// code) in the second provider call, and usage per call and per turn.
func TestOpenAIEndToEnd(t *testing.T) {
	const command = `echo "hi from bash"; exit 3`
	args := string(protocol.MustMarshal(map[string]string{"command": command}))
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n > 1 {
			fakellm.Reply(w, r, fakellm.Turn{Text: "The command failed with 3.", Usage: fakellm.Usage{Input: 120, Output: 4}})
			return
		}
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"role": "assistant", "content": ""}, nil))
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "Let me "}, nil))
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "run it."}, nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_abc", "", ""), nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "", "bash", ""), nil))
		for _, frag := range []string{args[:3], args[3:11], args[11:20], args[20:]} {
			s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "", "", frag), nil))
		}
		s.Event("", fakellm.ChatChunk(map[string]any{}, "tool_calls"))
		s.Event("", fakellm.ChatUsage(100, 20, 0))
		s.Event("", "[DONE]")
	})
	h := startWithProvider(t, f, "openai", "test-model", nil)

	h.prompt("run the command")
	evs := h.until(protocol.TypePermissionRequest)
	wantTypes(t, evs, "response", "status", "turn_start", "message_delta*", "message_complete", "usage", "permission_request")
	var text, callArgs strings.Builder
	var callStart *protocol.MessageDelta
	for _, d := range of[*protocol.MessageDelta](evs) {
		switch d.Kind {
		case protocol.DeltaText:
			text.WriteString(d.TextDelta)
		case protocol.DeltaToolCall:
			if d.ToolCallID != "" {
				callStart = d
				continue
			}
			callArgs.WriteString(d.ArgsDelta)
		}
	}
	if text.String() != "Let me run it." || callStart == nil || callStart.ToolCallID != "call_abc" || callStart.Name != "bash" || callStart.BlockIndex != 1 {
		t.Fatalf("deltas: text %q, call start %+v", text.String(), callStart)
	}
	if callArgs.String() != args {
		t.Fatalf("streamed args %q, want %q", callArgs.String(), args)
	}
	mc := one[*protocol.MessageComplete](t, evs)
	if c := mc.Message.Content; len(c) != 2 || c[0].Text != "Let me run it." || c[1].Type != protocol.BlockToolCall || c[1].Args["command"] != command {
		t.Fatalf("message %+v", mc.Message)
	}
	u := one[*protocol.UsageEvent](t, evs)
	if u.Input != 100 || u.Output != 20 || u.ContextTokens != 120 || u.Model != fakellm.Model {
		t.Fatalf("usage %+v", u.Usage)
	}
	req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
	if req.ToolName != "bash" || !strings.Contains(req.Prompt, "echo") || req.Details[0].Format != "command" {
		t.Fatalf("permission_request %+v", req)
	}
	h.next() // status waiting_for_permission

	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "ok"}, RequestID: req.RequestID, ChoiceID: "allow"})
	evs = h.untilIdle()
	wantTypes(t, evs, "permission_resolved", "status", "response", "tool_call", "tool_result",
		"message_delta*", "message_complete", "usage", "turn_end", "status")
	call := one[*protocol.ToolCall](t, evs)
	if call.ToolCallID != "call_abc" || call.ReadOnly == nil || *call.ReadOnly {
		t.Fatalf("tool_call %+v", call)
	}
	res := one[*protocol.ToolResult](t, evs)
	if !res.IsError || res.ExitCode == nil || *res.ExitCode != 3 || res.Content.Text != "hi from bash\n" || res.DurationMs == nil {
		t.Fatalf("tool_result %+v", res)
	}
	end := one[*protocol.TurnEnd](t, evs)
	if end.Usage == nil || end.Usage.Input != 220 || end.Usage.Output != 24 || end.Usage.ContextTokens != 124 {
		t.Fatalf("turn usage %+v", end.Usage)
	}

	// What the service saw: the key, the tools, the system prompt, and on
	// the second call the whole exchange with the exit code as text.
	first, second := f.Request(t, 1), f.Request(t, 2)
	if first.Path != "/v1/chat/completions" || first.Header.Get("Authorization") != "Bearer "+testAPIKey {
		t.Fatalf("path %q auth %q", first.Path, first.Header.Get("Authorization"))
	}
	if fakellm.Get(t, first.Body, "model") != "test-model" || fakellm.Get(t, first.Body, "stream") != true {
		t.Fatalf("first request %s", first.Raw)
	}
	var tools []string
	for _, tl := range fakellm.Get(t, first.Body, "tools").([]any) {
		tools = append(tools, fakellm.Get(t, tl, "function", "name").(string))
	}
	if want := []string{"read", "ls", "grep", "find", "write", "edit", "bash", "ask", "recall"}; !slices.Equal(tools, want) {
		t.Fatalf("tools %v, want %v (no subagent without a daemon)", tools, want)
	}
	if sys := fakellm.Get(t, first.Body, "messages", 0); fakellm.Get(t, sys, "role") != "system" || !strings.Contains(fakellm.Get(t, sys, "content").(string), h.opts.Cwd) {
		t.Fatalf("system message %v", sys)
	}
	msgs := fakellm.Get(t, second.Body, "messages").([]any)
	if len(msgs) != 4 {
		t.Fatalf("second request messages %s", second.Raw)
	}
	if fakellm.Get(t, msgs[2], "tool_calls", 0, "id") != "call_abc" || fakellm.Get(t, msgs[2], "tool_calls", 0, "function", "arguments") != args {
		t.Fatalf("assistant message %v", msgs[2])
	}
	if fakellm.Get(t, msgs[3], "role") != "tool" || fakellm.Get(t, msgs[3], "tool_call_id") != "call_abc" ||
		fakellm.Get(t, msgs[3], "content") != "Error: hi from bash\n[exit code: 3]" {
		t.Fatalf("tool message %v", msgs[3])
	}

	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	for _, rec := range h.all() {
		if strings.Contains(string(rec), testAPIKey) {
			t.Fatalf("the API key reached stdout: %s", rec)
		}
	}
	if strings.Contains(h.stderr.String(), testAPIKey) {
		t.Fatal("the API key reached stderr")
	}
}

// TestAnthropicThinkingEndToEnd drives a runtime against a fake Anthropic
// server: a thinking block with its signature, text, a read-only tool call
// in fragments, and a second call that sends the signed thinking back. The
// reasoning level chosen before the prompt sets the thinking budget.
func TestAnthropicThinkingEndToEnd(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(50, 0, 0)
		if n > 1 {
			s.TextBlock(0, "It says ", "hello.")
			s.End("end_turn", 6)
			return
		}
		s.ThinkingBlock(0, "SIG-123", "I should ", "read it.")
		s.TextBlock(1, "Reading.")
		s.ToolBlock(2, "toolu_1", "read", `{"pa`, `th": "no`, `tes.txt"}`)
		s.End("tool_use", 30)
	})
	h := startWithProvider(t, f, "anthropic", "claude-sonnet-4-5", nil)
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The model advertises levels, so the reasoning controls are on.
	d := h.quietSync()
	if !slices.Contains(d.Capabilities, "reasoning-switch") {
		t.Fatalf("capabilities %v", d.Capabilities)
	}
	h.send(protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "r"}, Model: "anthropic/claude-sonnet-4-5", Effort: "high"})
	r, before := h.response("r")
	mustResponse(t, r, protocol.TypeSetReasoningLevel)
	if ch := one[*protocol.ReasoningLevelChanged](t, before); ch.Previous != "off" || ch.Active != "high" || ch.Effective != "next_provider_call" {
		t.Fatalf("reasoning_level_changed %+v", ch)
	}

	h.prompt("what do my notes say?")
	evs := h.untilIdle()
	wantTypes(t, evs, "response", "status", "turn_start", "message_delta*", "message_complete", "usage",
		"tool_call", "tool_result", "message_delta*", "message_complete", "usage", "turn_end", "status")
	var thinking strings.Builder
	for _, d := range of[*protocol.MessageDelta](evs) {
		if d.Kind == protocol.DeltaThinking {
			thinking.WriteString(d.TextDelta)
		}
	}
	if thinking.String() != "I should read it." {
		t.Fatalf("thinking deltas %q", thinking.String())
	}
	mc := of[*protocol.MessageComplete](evs)[0].Message
	if len(mc.Content) != 3 || mc.Content[0].Type != protocol.BlockThinking || mc.Content[2].Args["path"] != "notes.txt" {
		t.Fatalf("first message %+v", mc)
	}
	if strings.Contains(string(protocol.MustMarshal(evs)), "SIG-123") {
		t.Fatal("the thinking signature reached the wire")
	}
	res := one[*protocol.ToolResult](t, evs)
	if res.IsError || res.Content.Text != "hello\n" || res.Render == nil || res.Render.Kind != "code" || res.ExitCode != nil {
		t.Fatalf("tool_result %+v", res)
	}
	if u := of[*protocol.UsageEvent](evs)[0]; u.Input != 50 || u.Output != 30 || u.Model != fakellm.Model {
		t.Fatalf("usage %+v", u.Usage)
	}

	first, second := f.Request(t, 1), f.Request(t, 2)
	if first.Header.Get("X-Api-Key") != testAPIKey && first.Header.Get("Authorization") != "Bearer "+testAPIKey {
		t.Fatal("no key header")
	}
	if got := string(protocol.MustMarshal(fakellm.Get(t, first.Body, "thinking"))); got != `{"budget_tokens":20480,"type":"enabled"}` {
		t.Fatalf("thinking %s", got)
	}
	back := fakellm.Get(t, second.Body, "messages", 1, "content", 0)
	if fakellm.Get(t, back, "type") != "thinking" || fakellm.Get(t, back, "thinking") != "I should read it." || fakellm.Get(t, back, "signature") != "SIG-123" {
		t.Fatalf("thinking sent back as %v", back)
	}
	result := fakellm.Get(t, second.Body, "messages", 2, "content", 0)
	if fakellm.Get(t, result, "type") != "tool_result" || fakellm.Get(t, result, "tool_use_id") != "toolu_1" {
		t.Fatalf("tool result sent as %v", result)
	}
}

// TestSetModelMidStreamAppliesAtNextCall switches models while the first
// provider call streams: that call finishes on the old model, the next
// one (after the tool) uses the new one.
func TestSetModelMidStreamAppliesAtNextCall(t *testing.T) {
	release := make(chan struct{})
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n > 1 {
			fakellm.Reply(w, r, fakellm.Turn{Text: "done", Usage: fakellm.Usage{Input: 10, Output: 2}})
			return
		}
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "listing"}, nil))
		fakellm.Hold(r, release)
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_1", "ls", `{}`), nil))
		s.Event("", fakellm.ChatChunk(map[string]any{}, "tool_calls"))
		s.Event("", "[DONE]")
	})
	// The agent asked for gpt-5, which joins the catalog next to the
	// configured gpt-4.1.
	h := startWithProvider(t, f, "openai", "gpt-4.1", func(o *Options) { o.Model = "gpt-5" })
	h.send(protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, ID: "lm"}})
	r, _ := h.response("lm")
	var lm listModelsData
	if err := json.Unmarshal(r.Data, &lm); err != nil {
		t.Fatal(err)
	}
	if len(lm.Models) != 2 || lm.Models[0].ID != "openai/gpt-4.1" || lm.Active.ID != "openai/gpt-5" {
		t.Fatalf("list_models %s", r.Data)
	}

	h.prompt("list files")
	h.until(protocol.TypeMessageDelta)
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "sm"}, Model: "openai/gpt-4.1"})
	r, before := h.response("sm")
	mustResponse(t, r, protocol.TypeSetModel)
	ch := one[*protocol.ModelChanged](t, before)
	if ch.Previous.ID != "openai/gpt-5" || ch.Active.ID != "openai/gpt-4.1" || ch.Effective != "next_provider_call" {
		t.Fatalf("model_changed %+v", ch)
	}
	// gpt-4.1 has no reasoning levels: the reasoning controls go away.
	if slices.Contains(ch.Capabilities, "reasoning-catalog") || !slices.Contains(ch.Capabilities, "model-switch") {
		t.Fatalf("capabilities %v", ch.Capabilities)
	}
	var data setModelData
	if err := json.Unmarshal(r.Data, &data); err != nil || data.Active.ID != "openai/gpt-4.1" || data.Previous.ID != "openai/gpt-5" {
		t.Fatalf("set_model data %s", r.Data)
	}
	close(release)
	evs := h.untilIdle()
	if n := len(of[*protocol.ToolResult](evs)); n != 1 {
		t.Fatalf("events %v", types(evs))
	}
	if m1, m2 := fakellm.Get(t, f.Request(t, 1).Body, "model"), fakellm.Get(t, f.Request(t, 2).Body, "model"); m1 != "gpt-5" || m2 != "gpt-4.1" {
		t.Fatalf("models asked for: %v then %v", m1, m2)
	}

	// Unknown: NOT_FOUND, no event; the same model again: no event.
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "bad"}, Model: "openai/gpt-9"})
	r, before = h.response("bad")
	mustErrorResponse(t, r, protocol.CodeNotFound, "gpt-9")
	if len(before) != 0 {
		t.Fatalf("unknown model produced %v", types(before))
	}
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "same"}, Model: "gpt-4.1"})
	r, before = h.response("same")
	mustResponse(t, r, protocol.TypeSetModel)
	if len(before) != 0 {
		t.Fatalf("idempotent set_model produced %v", types(before))
	}
	if d := h.quietSync(); slices.Contains(d.Capabilities, "reasoning-switch") {
		t.Fatalf("sync capabilities %v", d.Capabilities)
	}
}

// TestSimSetModelMidStream does the same with the sim: the call in flight
// reports the old model in its usage, the next call the new one.
func TestSimSetModelMidStream(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "f.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: say first\nsim: sleep 200\nsim: tool read {\"path\":\"f.txt\"}\nsim: say second")
	h.until(protocol.TypeMessageDelta)
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "sm"}, Model: "sim-think"})
	r, _ := h.response("sm")
	mustResponse(t, r, protocol.TypeSetModel)
	evs := h.untilIdle()
	us := of[*protocol.UsageEvent](evs)
	if len(us) != 2 || us[0].Model != "sim" || us[1].Model != "sim-think" {
		t.Fatalf("usage models %+v", us)
	}
	if end := one[*protocol.TurnEnd](t, evs); end.Usage.Model != "sim-think" {
		t.Fatalf("turn usage %+v", end.Usage)
	}
	if txt := assistantText(evs); txt != "firstsecond" {
		t.Fatalf("replies %q", txt)
	}
}

// TestReasoningLevels covers list/set_reasoning_level with the sim: only
// while the active model has levels; stale model → CONFLICT; unknown
// effort → NOT_FOUND; an idempotent set emits nothing; the level reaches
// the next provider call.
func TestReasoningLevels(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	send := func(id string, v any) (*protocol.Response, []event) {
		h.send(v)
		return h.response(id)
	}
	r, _ := send("l0", protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels, ID: "l0"}})
	mustErrorResponse(t, r, protocol.CodeNotFound, "no reasoning levels")
	r, _ = send("s0", protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "s0"}, Model: "sim/sim", Effort: "low"})
	mustErrorResponse(t, r, protocol.CodeNotFound, "no reasoning levels")

	_, before := send("m", protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "m"}, Model: "sim/sim-think"})
	if ch := one[*protocol.ModelChanged](t, before); !slices.Contains(ch.Capabilities, "reasoning-catalog") || !slices.Contains(ch.Capabilities, "reasoning-switch") {
		t.Fatalf("model_changed capabilities %v", ch.Capabilities)
	}
	r, _ = send("l1", protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels, ID: "l1"}})
	mustResponse(t, r, protocol.TypeListReasoningLevels)
	var list listReasoningData
	if err := json.Unmarshal(r.Data, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range list.Levels {
		ids = append(ids, l.ID)
	}
	if list.Model.ID != "sim/sim-think" || !slices.Equal(ids, []string{"off", "low", "high"}) || list.Active != "off" || list.Effective != "next_provider_call" {
		t.Fatalf("list_reasoning_levels %s", r.Data)
	}

	r, before = send("stale", protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "stale"}, Model: "sim/sim", Effort: "low"})
	mustErrorResponse(t, r, protocol.CodeConflict, "not the active model")
	if len(before) != 0 {
		t.Fatalf("stale set produced %v", types(before))
	}
	r, _ = send("unk", protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "unk"}, Model: "sim/sim-think", Effort: "extreme"})
	mustErrorResponse(t, r, protocol.CodeNotFound, "extreme")

	r, before = send("set", protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "set"}, Model: "sim/sim-think", Effort: "low"})
	mustResponse(t, r, protocol.TypeSetReasoningLevel)
	ch := one[*protocol.ReasoningLevelChanged](t, before)
	if ch.Model.ID != "sim/sim-think" || ch.Previous != "off" || ch.Active != "low" {
		t.Fatalf("reasoning_level_changed %+v", ch)
	}
	if string(r.Data) != `{"model":{"id":"sim/sim-think","provider":"sim","model":"sim-think","context_window":200000},"previous":"off","active":"low","effective":"next_provider_call"}` {
		t.Fatalf("set_reasoning_level data %s", r.Data)
	}
	r, before = send("again", protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "again"}, Model: "sim-think", Effort: "low"})
	mustResponse(t, r, protocol.TypeSetReasoningLevel)
	if len(before) != 0 {
		t.Fatalf("idempotent set produced %v", types(before))
	}

	h.prompt("sim: say ok")
	mc := one[*protocol.MessageComplete](t, h.untilIdle())
	if b := mc.Message.Content; len(b) != 2 || b[0].Type != protocol.BlockThinking || b[0].Text != "Thinking with low effort." {
		t.Fatalf("message %+v", mc.Message)
	}

	// Back to a model without levels: the controls go away again.
	send("back", protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "back"}, Model: "sim"})
	r, _ = send("l2", protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels, ID: "l2"}})
	mustErrorResponse(t, r, protocol.CodeNotFound, "no reasoning levels")
}

// TestOpenAIReasoningEffortReachesTheRequest checks that a level chosen for
// an OpenAI reasoning model is sent as reasoning_effort.
func TestOpenAIReasoningEffortReachesTheRequest(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 5, Output: 1}}
	}))
	h := startWithProvider(t, f, "openai", "gpt-5", nil)
	h.send(protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, ID: "r"}, Model: "openai/gpt-5", Effort: "high"})
	r, _ := h.response("r")
	mustResponse(t, r, protocol.TypeSetReasoningLevel)
	h.prompt("think hard")
	h.untilIdle()
	if got := fakellm.Get(t, f.Request(t, 1).Body, "reasoning_effort"); got != "high" {
		t.Fatalf("reasoning_effort %v", got)
	}
}

// TestProviderHTTPErrorEndsTurn: a 500 is an error event with
// PROVIDER_ERROR, then turn_end and status error; the runtime recovers.
func TestProviderHTTPErrorEndsTurn(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			fakellm.JSONError(w, http.StatusInternalServerError, `{"error":{"message":"the model crashed","type":"server_error"}}`)
			return
		}
		fakellm.Reply(w, r, fakellm.Turn{Text: "back", Usage: fakellm.Usage{Input: 5, Output: 1}})
	})
	h := startWithProvider(t, f, "openai", "test-model", nil)
	h.prompt("hello")
	evs := h.untilIdle()
	wantTypes(t, evs, "response", "status", "turn_start", "error", "turn_end", "status")
	e := one[*protocol.ErrorEvent](t, evs)
	if e.Code != protocol.CodeProviderError || !strings.Contains(e.Message, "HTTP 500") || !strings.Contains(e.Message, "the model crashed") || e.Fatal {
		t.Fatalf("error %+v", e)
	}
	if s := statuses(evs); s[len(s)-1] != protocol.StatusError {
		t.Fatalf("statuses %v", s)
	}
	if f.Count() != 1 {
		t.Fatalf("%d requests: a runtime without MaxRetries must not retry", f.Count())
	}
	h.prompt("again")
	if txt := assistantText(h.untilIdle()); txt != "back" {
		t.Fatalf("reply after recovery %q", txt)
	}
}

// TestProviderDisconnectKeepsPartialMessage: a stream cut mid-answer is a
// PROVIDER_ERROR; the text streamed so far is kept, the unfinished tool call
// is dropped (never run).
func TestProviderDisconnectKeepsPartialMessage(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.SSE(w)
		s.Event("", fakellm.ChatChunk(map[string]any{"content": "partial"}, nil))
		s.Event("", fakellm.ChatChunk(fakellm.ChatToolDelta(0, "call_1", "bash", `{"comm`), nil))
		fakellm.Disconnect()
	})
	h := startWithProvider(t, f, "openai", "test-model", nil)
	h.prompt("go")
	evs := h.untilIdle()
	wantTypes(t, evs, "response", "status", "turn_start", "message_delta*", "message_complete", "error", "turn_end", "status")
	mc := one[*protocol.MessageComplete](t, evs)
	if len(mc.Message.Content) != 1 || textOf(mc.Message) != "partial" {
		t.Fatalf("partial message %+v", mc.Message)
	}
	if e := one[*protocol.ErrorEvent](t, evs); e.Code != protocol.CodeProviderError {
		t.Fatalf("error %+v", e)
	}
}

// TestBashThroughTheRuntime runs bash with the sim: exit code and output,
// the environment without the provider's key variable, and abort killing a
// running command.
func TestBashThroughTheRuntime(t *testing.T) {
	h := start(t, func(o *Options) {
		o.APIKeyEnv = "SHARD_TEST_KEY"
		o.Environ = []string{"PATH=" + os.Getenv("PATH"), "SHARD_TEST_KEY=sekrit", "OTHER=kept"}
	})
	h.handshake()
	allow := func() {
		t.Helper()
		evs := h.until(protocol.TypePermissionRequest)
		req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
		h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow"})
	}

	h.prompt(`sim: tool bash {"command":"echo \"key=${SHARD_TEST_KEY:-unset} other=$OTHER\"; exit 4"}`)
	allow()
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if !res.IsError || res.ExitCode == nil || *res.ExitCode != 4 || res.Content.Text != "key=unset other=kept\n" {
		t.Fatalf("tool_result %+v", res)
	}

	marker := filepath.Join(h.opts.Cwd, "started")
	h.prompt(`sim: tool bash {"command":"touch started; sleep 30"}` + "\nsim: say never")
	allow()
	h.until(protocol.TypeToolCall)
	deadline := time.Now().Add(waitTimeout)
	for _, err := os.Stat(marker); err != nil; _, err = os.Stat(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	began := time.Now()
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "a"}})
	evs := h.untilIdle()
	if el := time.Since(began); el > 3*time.Second {
		t.Fatalf("abort took %s", el)
	}
	res = one[*protocol.ToolResult](t, evs)
	if !res.IsError || res.ExitCode == nil || *res.ExitCode == 0 || !strings.Contains(res.Content.Text, "aborted") {
		t.Fatalf("tool_result after abort %+v", res)
	}
	if txt := assistantText(evs); strings.Contains(txt, "never") {
		t.Fatalf("the turn went on after the abort: %q", txt)
	}
}

// TestPlanModeRefusesBash: bash is mutating, so plan mode refuses it
// without asking.
func TestPlanModeRefusesBash(t *testing.T) {
	h := start(t, func(o *Options) { o.Mode = modePlan })
	h.handshake()
	h.prompt(`sim: tool bash {"command":"touch x"}`)
	evs := h.untilIdle()
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("plan mode asked for permission")
	}
	res := one[*protocol.ToolResult](t, evs)
	if !res.IsError || !strings.Contains(res.Content.Message, "plan mode") || res.ExitCode != nil {
		t.Fatalf("tool_result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(h.opts.Cwd, "x")); err == nil {
		t.Fatal("plan mode ran bash")
	}
}

// TestCostWhenPriced: a configured price adds cost to usage and turn_end.
func TestCostWhenPriced(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 1_000_000, Output: 500_000}}
	}))
	h := startWithProvider(t, f, "openai", "test-model", func(o *Options) {
		o.Prices = map[string]Price{"test-model": {Input: 2, Output: 8}}
	})
	h.prompt("hi")
	evs := h.untilIdle()
	if u := one[*protocol.UsageEvent](t, evs); u.Cost != 6 {
		t.Fatalf("usage %+v, want cost 2 + 4", u.Usage)
	}
	if end := one[*protocol.TurnEnd](t, evs); end.Usage.Cost != 6 {
		t.Fatalf("turn usage %+v", end.Usage)
	}
}

// TestUnknownProviderIsInvalidOptions: Run refuses a provider it does not
// know.
func TestUnknownProviderIsInvalidOptions(t *testing.T) {
	err := Run(t.Context(), Options{Stdio: Stdio{Stdin: strings.NewReader(""), Stdout: discard{}}, ProviderOptions: ProviderOptions{Provider: "llama"}})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "unknown provider") {
		t.Fatalf("Run = %v", err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestReadOnlyToolsRunWithoutAsking: ls is read-only, runs without the
// gate, and renders a path list.
func TestReadOnlyToolsRunWithoutAsking(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	if err := os.Mkdir(filepath.Join(h.opts.Cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "a.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: tool ls {}\nsim: tool grep {\"pattern\":\"package\"}")
	evs := h.untilIdle()
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("a read-only tool asked for permission")
	}
	for _, c := range of[*protocol.ToolCall](evs) {
		if c.ReadOnly == nil || !*c.ReadOnly {
			t.Fatalf("tool_call %+v: want read_only", c)
		}
	}
	res := of[*protocol.ToolResult](evs)
	if len(res) != 2 || res[0].IsError || res[0].Render == nil || res[0].Render.Kind != "path_list" || len(res[0].Render.Paths) != 2 {
		t.Fatalf("ls result %+v", res[0])
	}
	if res[1].IsError || !strings.Contains(res[1].Content.Text, "a.go") {
		t.Fatalf("grep result %+v", res[1])
	}
}
