package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// sampleEvents holds one fully populated value of every event type that
// DecodeEvent knows. Values use JSON-native dynamic types (float64, []any,
// map[string]any) so that a decode gives them back unchanged.
func sampleEvents() []protocol.Typed {
	i := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	yes := true
	h := func(typ string) protocol.Header { return protocol.Header{Type: typ, AgentID: "a-3"} }
	usage := protocol.Usage{Input: 10, Output: 20, CacheRead: 3, CacheWrite: 4, Cost: 0.25, ContextTokens: 1000, Model: "m"}
	model := protocol.ModelDescriptor{ID: "p/m", Provider: "p", Model: "m", ContextWindow: 200000}
	info := protocol.AgentInfo{
		AgentID: "a-3", Name: "n", Cwd: "/w", Model: "m", Provider: "p", Mode: "code",
		Status: protocol.StatusStreaming, RuntimeState: protocol.RuntimeRunning, CreatedAt: 1700000000000,
		Usage: &usage, ParentAgentID: "a-1", Alias: "al", DefinitionName: "def", DisplayName: "Disp",
	}
	render := &protocol.RenderDescriptor{
		Kind: "command", Command: "ls", ExitCode: i(0), DurationMs: i64(12),
		Pairs: []protocol.KV{{K: "k", V: "v"}},
		Hunks: []protocol.Hunk{{OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 3, Lines: []string{" a", "+b"}}},
		Root:  &protocol.TreeNode{Name: "root", Children: []protocol.TreeNode{{Name: "leaf"}}},
		Paths: []protocol.PathEntry{{Path: "/x", Kind: "file", Hint: "h"}},
	}
	return []protocol.Typed{
		&protocol.Hello{Header: protocol.Header{Type: protocol.TypeHello}, ProtocolVersion: protocol.Version, ServerVersion: "0.0.1", Capabilities: []string{"websocket"}},
		&protocol.Sync{
			Header: h(protocol.TypeSync), Status: protocol.StatusWaitingForPermission, Mode: "code",
			Capabilities: []string{"streaming-deltas"}, RuntimeEpoch: i64(2),
			LiveWindow: protocol.LiveWindow{
				Messages: []protocol.Message{
					{ID: "m1", Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "hi\u2028there"}}},
					{ID: "m2", Role: "assistant", Content: []protocol.ContentBlock{
						{Type: protocol.BlockThinking, Text: "hmm"},
						{Type: protocol.BlockToolCall, ID: "tc1", Name: "read", Args: map[string]any{"file": "config.json"}},
						{Type: protocol.BlockToolResult, ToolCallID: "tc1", Content: &protocol.ToolResultContent{Kind: "json", Value: map[string]any{"n": 1.0}}, IsError: true},
					}},
				},
				CompactionIndex: i(1),
			},
			PendingRequests: []json.RawMessage{json.RawMessage(`{"type":"permission_request","request_id":"req-7"}`)},
		},
		&protocol.Status{Header: h(protocol.TypeStatus), Status: protocol.StatusIdle, Detail: "d"},
		&protocol.Response{Header: protocol.Header{Type: protocol.TypeResponse, ID: "r1"}, Command: "agent.list", Success: true, Data: json.RawMessage(`{"agents":[]}`)},
		&protocol.Response{Header: protocol.Header{Type: protocol.TypeResponse, ID: "r2"}, Command: "prompt",
			Error: &protocol.Error{Code: protocol.CodeConflict, Message: "busy", Data: map[string]any{"turn_id": "t1"}}},
		&protocol.TurnStart{Header: h(protocol.TypeTurnStart), TurnID: "t1"},
		&protocol.MessageDelta{Header: h(protocol.TypeMessageDelta), MessageID: "m2", BlockIndex: 1, Kind: protocol.DeltaText, TextDelta: "Reading\u2028config\u2029…<&>"},
		&protocol.MessageDelta{Header: h(protocol.TypeMessageDelta), MessageID: "m2", BlockIndex: 2, Kind: protocol.DeltaToolCall, ToolCallID: "tc1", Name: "read", ArgsDelta: `{"fi`},
		&protocol.MessageComplete{Header: h(protocol.TypeMessageComplete), MessageID: "m2", Message: protocol.Message{ID: "m2", Role: "assistant", Content: []protocol.ContentBlock{
			{Type: protocol.BlockText, Text: "done"},
			{Type: protocol.BlockToolCall, ID: "tc2", Name: "noargs", Args: map[string]any{}},
		}}},
		&protocol.ToolCall{Header: h(protocol.TypeToolCall), ToolCallID: "tc1", Name: "read", Args: map[string]any{"file": "config.json", "n": 2.0, "list": []any{"a", true}}, Render: render, ReadOnly: &yes},
		&protocol.ToolResult{Header: h(protocol.TypeToolResult), ToolCallID: "tc1", Content: protocol.ToolResultContent{Kind: "text", Text: "…"}, IsError: false, ExitCode: i(1), DurationMs: i64(5), Render: &protocol.RenderDescriptor{Kind: "text", Text: "x"}},
		&protocol.TurnEnd{Header: h(protocol.TypeTurnEnd), TurnID: "t1", Usage: &usage},
		&protocol.UsageEvent{Header: h(protocol.TypeUsage), Usage: usage},
		&protocol.Compaction{Header: h(protocol.TypeCompaction), Index: 1, TokensBefore: 100, TokensAfter: 10, FirstKeptEntryID: "e9", MessageRange: [2]string{"m1", "m5"}},
		&protocol.ErrorEvent{Header: h(protocol.TypeError), Code: protocol.CodeProviderError, Message: "overloaded", Fatal: true},
		&protocol.PermissionRequest{Header: h(protocol.TypePermissionRequest), RequestID: "req-7", ToolName: "bash", Input: map[string]any{"command": "rm -rf build"},
			Prompt: "Run?", Options: []string{"allow", "allow_always", "deny"},
			Details: []protocol.PermissionDetail{{Label: "Command", Value: "rm -rf build", Format: "command"}},
			Choices: []protocol.PermissionChoice{{ID: "c1", Label: "Allow", Description: "once", Accelerator: "y", Intent: "allow"}}},
		&protocol.PermissionResolved{Header: h(protocol.TypePermissionResolved), RequestID: "req-7", Decision: "allow_always", Source: "web"},
		&protocol.PermissionResolved{Header: h(protocol.TypePermissionResolved), RequestID: "req-8", ChoiceID: "c1"},
		&protocol.UIRequest{Header: h(protocol.TypeUIRequest), RequestID: "u1", Kind: protocol.UISelect, Title: "t", Message: "m", Options: []string{"a", "b"}, Placeholder: "p", Prefill: "f", NotifyType: "info"},
		&protocol.UIResolved{Header: h(protocol.TypeUIResolved), RequestID: "u1", Value: json.RawMessage(`["a"]`), Source: "cli"},
		&protocol.ModelChanged{Header: h(protocol.TypeModelChanged), Previous: model, Active: model, Effective: "next_call", Capabilities: []string{"model-switch"}},
		&protocol.ModeChanged{Header: h(protocol.TypeModeChanged), PreviousMode: "plan", Mode: "code"},
		&protocol.ReasoningLevelChanged{Header: h(protocol.TypeReasoningLevelChanged), Model: model, Previous: "low", Active: "high", Effective: "next_call"},
		&protocol.AgentSpawned{Header: protocol.Header{Type: protocol.TypeAgentSpawned}, Info: info},
		&protocol.AgentRemoved{Header: protocol.Header{Type: protocol.TypeAgentRemoved, AgentID: "agent_1"}, SessionID: "sess_1"},
		&protocol.AgentUpdated{Header: protocol.Header{Type: protocol.TypeAgentUpdated, AgentID: "agent_1"}, Info: info},
		&protocol.AgentExited{Header: h(protocol.TypeAgentExited), RuntimeState: protocol.RuntimeFailed, Reason: "crash", ExitCode: i(137)},
		&protocol.AgentStatusChanged{Header: h(protocol.TypeAgentStatusChanged), Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeStopped, Detail: "reaped"},
		&protocol.AgentActivity{Header: h(protocol.TypeAgentActivity), Timestamp: 1700000000000, Phase: protocol.PhaseTool, Status: protocol.StatusStreaming, ToolName: "bash"},
		&protocol.SubagentRunChanged{Header: protocol.Header{Type: protocol.TypeSubagentRunChanged}, ParentAgentID: "p", JobID: "job-1", RunID: "run-1",
			Alias: "al", DefinitionName: "d", DisplayName: "D", State: protocol.RunFailed, PreviousState: protocol.RunActive, Error: "x", EndedAt: 5},
		&protocol.WorkspaceCreated{Header: protocol.Header{Type: protocol.TypeWorkspaceCreated}, Workspace: sampleWorkspace().Summary()},
		&protocol.WorkspaceAttached{Header: protocol.Header{Type: protocol.TypeWorkspaceAttached, AgentID: "agent-2"}, SessionID: "sess-2", Workspace: sampleWorkspace().Summary()},
		&protocol.WorkspaceRetired{Header: protocol.Header{Type: protocol.TypeWorkspaceRetired}, Workspace: retiredWorkspace()},
		&protocol.WorkspaceConflict{Header: protocol.Header{Type: protocol.TypeWorkspaceConflict}, Reason: "worktree is on branch other, not shard/ws-1", Workspace: sampleWorkspace().Summary()},
	}
}

// eventTypes is every event type DecodeEvent decodes into a typed value.
var eventTypes = []string{
	protocol.TypeHello, protocol.TypeSync, protocol.TypeStatus, protocol.TypeResponse,
	protocol.TypeTurnStart, protocol.TypeMessageDelta, protocol.TypeMessageComplete,
	protocol.TypeToolCall, protocol.TypeToolResult, protocol.TypeTurnEnd, protocol.TypeUsage,
	protocol.TypeCompaction, protocol.TypeError, protocol.TypePermissionRequest,
	protocol.TypePermissionResolved, protocol.TypeUIRequest, protocol.TypeUIResolved,
	protocol.TypeModelChanged, protocol.TypeModeChanged, protocol.TypeReasoningLevelChanged,
	protocol.TypeAgentSpawned, protocol.TypeAgentExited, protocol.TypeAgentStatusChanged,
	protocol.TypeAgentActivity, protocol.TypeSubagentRunChanged,
	protocol.TypeWorkspaceCreated, protocol.TypeWorkspaceAttached, protocol.TypeWorkspaceRetired,
	protocol.TypeWorkspaceConflict, protocol.TypeAgentRemoved, protocol.TypeAgentUpdated,
}

func TestDecodeEventRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, ev := range sampleEvents() {
		typ := ev.Head().Type
		seen[typ] = true
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			rec, err := protocol.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			assertNoRawSeparators(t, rec)
			got, err := protocol.DecodeEvent(rec)
			if err != nil {
				t.Fatalf("DecodeEvent(%s): %v", rec, err)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(ev) {
				t.Fatalf("decoded %T, want %T", got, ev)
			}
			if !reflect.DeepEqual(got, ev) {
				t.Errorf("round trip changed the event:\n got %+v\nwant %+v\nrecord %s", got, ev, rec)
			}
		})
	}
	for _, typ := range eventTypes {
		if !seen[typ] {
			t.Errorf("no round-trip sample for event %q", typ)
		}
	}
}

func TestDecodeEventUnknown(t *testing.T) {
	t.Parallel()
	for _, rec := range []string{
		`{"type":"future_event","agent_id":"a-1","x":[1,2]}`,
		// Orchestrator commands are not events either. (This case used
		// workspace_created while that event had no typed struct; it has
		// one now and round-trips in TestDecodeEventRoundTrip.)
		`{"type":"workspace.create","cwd":"/r"}`,
		// Commands are not events.
		`{"type":"prompt","message":"hi"}`,
	} {
		ev, err := protocol.DecodeEvent([]byte(rec))
		if err != nil {
			t.Fatalf("DecodeEvent(%s): %v", rec, err)
		}
		u, ok := ev.(*protocol.Unknown)
		if !ok {
			t.Fatalf("DecodeEvent(%s) = %T, want *protocol.Unknown", rec, ev)
		}
		h, _ := protocol.DecodeHeader([]byte(rec))
		if u.Header != h || string(u.Raw) != rec {
			t.Errorf("Unknown = %+v %s, want header %+v and the raw record", u.Header, u.Raw, h)
		}
	}
	// Raw is a copy: the caller may reuse its buffer (Reader.Next does).
	buf := []byte(`{"type":"future_event"}`)
	ev, err := protocol.DecodeEvent(buf)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXX")
	if got := string(ev.(*protocol.Unknown).Raw); got != `{"type":"future_event"}` {
		t.Errorf("Unknown.Raw aliases the input: %s", got)
	}
}

func TestDecodeEventInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ rec, want string }{
		{`[]`, "JSON object"},
		{`{"type":1}`, `field "type"`},
		{`{"status":"idle"}`, `field "type": required`},
		{`{"type":"status","status":5}`, `field "status": expected string, got number`},
		{`{"type":"turn_end","usage":{"input":"many"}}`, `field "usage.input"`},
		{`{"type":"tool_call","args":[]}`, `field "args": expected object, got array`},
	} {
		ev, err := protocol.DecodeEvent([]byte(tt.rec))
		if ev != nil {
			t.Errorf("DecodeEvent(%s) = %#v, want nil", tt.rec, ev)
		}
		checkErr(t, err, tt.want)
	}
}

// zeroCommands returns a zero value of every command type, with only its
// type set.
func zeroCommands() []protocol.Typed {
	cmds := []protocol.Typed{
		&protocol.Prompt{}, &protocol.Steer{}, &protocol.Abort{}, &protocol.SetMode{},
		&protocol.ListModes{}, &protocol.ListModels{}, &protocol.SetModel{},
		&protocol.ListReasoningLevels{}, &protocol.SetReasoningLevel{}, &protocol.SessionOp{},
		&protocol.PermissionResponse{}, &protocol.UIResponse{}, &protocol.GetSync{},
		&protocol.AgentList{}, &protocol.AgentCreate{}, &protocol.AgentAttach{},
		&protocol.AgentDetach{}, &protocol.AgentTerminate{}, &protocol.AgentKill{},
		&protocol.AgentStatusCmd{}, &protocol.DaemonShutdown{}, &protocol.WSTicket{},
		&protocol.DaemonStatus{}, &protocol.AgentRemove{}, &protocol.AgentUpdate{}, &protocol.WorkspaceCreate{}, &protocol.WorkspaceAttach{},
		&protocol.WorkspaceList{}, &protocol.WorkspaceStatus{}, &protocol.WorkspaceRetire{},
		&protocol.WorkspaceDiff{}, &protocol.WorkspaceMerge{},
		&protocol.SubagentCreate{}, &protocol.SubagentWait{}, &protocol.SubagentSteer{},
		&protocol.SubagentRelaunch{}, &protocol.SubagentStatus{}, &protocol.SubagentStop{},
		&protocol.ClusterStatus{},
	}
	for i, c := range cmds {
		c.Head().Type = commandTypes[i]
	}
	return cmds
}

// TestTypeFirst checks that every typed message marshals with "type" as its
// first field, which PeekType and WithAgentID rely on, even with an id and
// an agent_id set.
func TestTypeFirst(t *testing.T) {
	t.Parallel()
	cmds := zeroCommands()
	// zeroCommands pairs values with commandTypes by position: check that
	// DecodeCommand agrees on the Go type of each.
	for _, c := range cmds {
		rec := protocol.MustMarshal(c)
		_, h, err := protocol.DecodeCommand(rec)
		if err != nil && strings.Contains(err.Error(), "unknown type") {
			t.Fatalf("%T: %v", c, err)
		}
		if h.Type != c.Head().Type {
			t.Fatalf("%T: decoded type %q", c, h.Type)
		}
	}
	msgs := append(sampleEvents(), cmds...)
	msgs = append(msgs, &protocol.Unknown{Header: protocol.Header{Type: "future"}})
	for _, m := range msgs {
		m.Head().ID = "id-1"
		m.Head().AgentID = "a-1"
		b := protocol.MustMarshal(m)
		if !bytes.HasPrefix(b, []byte(`{"type":`)) {
			t.Errorf("%T marshals as %s, want it to start with {\"type\":", m, b)
		}
		if got := protocol.PeekType(b); got != m.Head().Type {
			t.Errorf("PeekType(%s) = %q, want %q", b, got, m.Head().Type)
		}
	}
}

func TestNewResponse(t *testing.T) {
	t.Parallel()
	t.Run("with data", func(t *testing.T) {
		t.Parallel()
		rec := protocol.NewResponse("r1", protocol.TypeAgentCreate, protocol.AgentCreateData{AgentID: "a-9"})
		if !bytes.HasPrefix(rec, []byte(`{"type":"response",`)) {
			t.Errorf("response does not start with its type: %s", rec)
		}
		got := decodeJSONObject(t, rec)
		want := map[string]any{"type": "response", "id": "r1", "command": "agent.create", "success": true, "data": map[string]any{"agent_id": "a-9"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("response = %v, want %v", got, want)
		}
	})
	t.Run("without data or id", func(t *testing.T) {
		t.Parallel()
		got := decodeJSONObject(t, protocol.NewResponse("", protocol.TypePrompt, nil))
		want := map[string]any{"type": "response", "command": "prompt", "success": true}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("response = %v, want %v", got, want)
		}
	})
	t.Run("data is not HTML escaped and has no raw separators", func(t *testing.T) {
		t.Parallel()
		rec := protocol.NewResponse("r", "x", map[string]string{"s": "<a>&\u2028"})
		assertNoRawSeparators(t, rec)
		if !bytes.Contains(rec, []byte(`<a>&\u2028`)) {
			t.Errorf("response = %s", rec)
		}
	})
	t.Run("decodes as a Response event", func(t *testing.T) {
		t.Parallel()
		ev, err := protocol.DecodeEvent(protocol.NewResponse("r1", "agent.list", protocol.AgentListData{Agents: []protocol.AgentInfo{}}))
		if err != nil {
			t.Fatal(err)
		}
		r := ev.(*protocol.Response)
		if r.ID != "r1" || r.Command != "agent.list" || !r.Success || string(r.Data) != `{"agents":[]}` || r.Error != nil {
			t.Errorf("response = %+v", r)
		}
	})
}

func TestNewErrorResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   string
		err  error
		want map[string]any
	}{
		{"protocol error", "r1", protocol.Errorf(protocol.CodeNotFound, "no agent %q", "a-1"),
			map[string]any{"type": "response", "id": "r1", "command": "agent.attach", "success": false,
				"error": map[string]any{"code": "NOT_FOUND", "message": `no agent "a-1"`}}},
		{"wrapped protocol error", "r1", fmt.Errorf("attach: %w", protocol.Errorf(protocol.CodeConflict, "busy")),
			map[string]any{"type": "response", "id": "r1", "command": "agent.attach", "success": false,
				"error": map[string]any{"code": "CONFLICT", "message": "busy"}}},
		{"error with data", "", &protocol.Error{Code: protocol.CodeRuntimeStartFailed, Message: "m", Data: map[string]any{"retry": true}},
			map[string]any{"type": "response", "command": "agent.attach", "success": false,
				"error": map[string]any{"code": "RUNTIME_START_FAILED", "message": "m", "data": map[string]any{"retry": true}}}},
		{"plain error", "r2", errors.New("disk full"),
			map[string]any{"type": "response", "id": "r2", "command": "agent.attach", "success": false,
				"error": map[string]any{"code": "INTERNAL_ERROR", "message": "disk full"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := protocol.NewErrorResponse(tt.id, protocol.TypeAgentAttach, tt.err)
			if !bytes.HasPrefix(rec, []byte(`{"type":"response"`)) {
				t.Errorf("response does not start with its type: %s", rec)
			}
			if got := decodeJSONObject(t, rec); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response = %v\nwant       %v", got, tt.want)
			}
		})
	}
}

func TestCodeOfAndAsError(t *testing.T) {
	t.Parallel()
	base := protocol.Errorf(protocol.CodeNotAttached, "agent %s", "a-1")
	wrapped := fmt.Errorf("route: %w", fmt.Errorf("lookup: %w", base))
	joined := errors.Join(errors.New("other"), base)
	plain := errors.New("boom")
	wrappedPlain := fmt.Errorf("ctx: %w", plain)

	tests := []struct {
		name     string
		err      error
		wantCode protocol.ErrorCode
		wantMsg  string
	}{
		{"protocol error", base, protocol.CodeNotAttached, "agent a-1"},
		{"wrapped twice", wrapped, protocol.CodeNotAttached, "agent a-1"},
		{"joined", joined, protocol.CodeNotAttached, "agent a-1"},
		{"plain", plain, protocol.CodeInternal, "boom"},
		{"wrapped plain", wrappedPlain, protocol.CodeInternal, "ctx: boom"},
	}
	for _, tt := range tests {
		if got := protocol.CodeOf(tt.err); got != tt.wantCode {
			t.Errorf("%s: CodeOf = %s, want %s", tt.name, got, tt.wantCode)
		}
		e := protocol.AsError(tt.err)
		if e.Code != tt.wantCode || e.Message != tt.wantMsg {
			t.Errorf("%s: AsError = %+v, want code %s message %q", tt.name, e, tt.wantCode, tt.wantMsg)
		}
	}
	if got := protocol.CodeOf(nil); got != "" {
		t.Errorf("CodeOf(nil) = %q, want empty", got)
	}
	if got := protocol.AsError(base); got != base {
		t.Errorf("AsError of a bare *Error should return it unchanged")
	}
	if got := base.Error(); got != "NOT_ATTACHED: agent a-1" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(wrapped, base) {
		t.Error("errors.Is lost the protocol error through wrapping")
	}
}

func TestCodes(t *testing.T) {
	t.Parallel()
	want := []protocol.ErrorCode{
		"INVALID_REQUEST", "NOT_FOUND", "NOT_ATTACHED", "PERMISSION_DENIED", "PROTOCOL_ERROR",
		"TIMEOUT", "RUNTIME_START_FAILED", "SESSION_CORRUPT", "INTERNAL_ERROR", "PROVIDER_ERROR",
		"TOOL_ERROR", "CONFLICT",
	}
	if got := protocol.Codes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Codes() = %v, want the docs/protocol.md §8 registry %v", got, want)
	}
}

func TestWithAgentID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, id, want string
	}{
		{"type first", `{"type":"status","status":"idle"}`, "a-1", `{"type":"status","agent_id":"a-1","status":"idle"}`},
		{"type only", `{"type":"abort"}`, "a-1", `{"type":"abort","agent_id":"a-1"}`},
		{"type not first", `{"status":"idle","type":"status"}`, "a-1", `{"agent_id":"a-1","status":"idle","type":"status"}`},
		{"no type", `{"a":1}`, "a-1", `{"agent_id":"a-1","a":1}`},
		{"empty object", `{}`, "a-1", `{"agent_id":"a-1"}`},
		{"empty object with spaces", "{ \n }", "a-1", `{"agent_id":"a-1"}`},
		{"leading whitespace", ` {"a":1}`, "a-1", ` {"agent_id":"a-1","a":1}`},
		{"spaced keys", "{ \"type\" : \"x\" , \"a\":1}", "a-1", `{"agent_id":"a-1","type" : "x" , "a":1}`},
		{"escaped type", `{"type":"a\"b","x":1}`, "a-1", `{"agent_id":"a-1","type":"a\"b","x":1}`},
		{"id needing escapes", `{"type":"x"}`, "a\"b\\c", `{"type":"x","agent_id":"a\"b\\c"}`},
		{"id with control characters", `{"type":"x"}`, "a\x01\a\v", `{"type":"x","agent_id":"a\u0001\u0007\u000b"}`},
		{"id with astral rune", `{"type":"x"}`, "a\U0010FFFF", "{\"type\":\"x\",\"agent_id\":\"a\U0010FFFF\"}"},
		{"id with line separator", `{"type":"x"}`, "a\u2028", `{"type":"x","agent_id":"a\u2028"}`},
		{"id with html", `{"type":"x"}`, "<&>", `{"type":"x","agent_id":"<&>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := protocol.WithAgentID([]byte(tt.in), tt.id)
			if string(got) != tt.want {
				t.Errorf("WithAgentID(%s, %q) = %s, want %s", tt.in, tt.id, got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("output is not valid JSON: %s", got)
			}
			h, err := protocol.DecodeHeader(got)
			if err == nil && h.AgentID != tt.id {
				t.Errorf("agent_id = %q, want %q", h.AgentID, tt.id)
			}
		})
	}
	t.Run("non-object input is returned unchanged", func(t *testing.T) {
		t.Parallel()
		if got := protocol.WithAgentID([]byte(`"x"`), "a"); string(got) != `"x"` {
			t.Errorf("got %s", got)
		}
	})
	t.Run("input is not modified", func(t *testing.T) {
		t.Parallel()
		in := []byte(`{"type":"status","status":"idle"}`)
		orig := string(in)
		out := protocol.WithAgentID(in[:len(in):len(in)], "a-1")
		out[0] = 'X'
		if string(in) != orig {
			t.Errorf("input changed to %s", in)
		}
	})
}

func TestPeekType(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"type":"message_delta","text_delta":"x"}`, "message_delta"},     // fast path
		{`{"type":"agent.list","id":"1"}`, "agent.list"},                   // fast path
		{`{"id":"1","type":"status"}`, "status"},                           // fallback
		{` {"type":"status"}`, "status"},                                   // fallback: leading space
		{`{ "type" : "status" }`, "status"},                                // fallback: spaces
		{`{"type":"a\"b"}`, `a"b`},                                         // escaped quote
		{`{"type":"a\\"}`, `a\`},                                           // escaped backslash
		{`{"type":"\u0061bc"}`, "abc"},                                     // unicode escape
		{`{"type":""}`, ""},                                                // empty type is invalid
		{`{"type":5}`, ""},                                                 // not a string
		{`{"id":"1"}`, ""},                                                 // no type
		{`[{"type":"x"}]`, ""},                                             // not an object
		{`not json`, ""},                                                   // garbage
		{``, ""},                                                           // empty
		{"{\"type\":\"x\u2028y\",\"a\":1}", "x\u2028y"},                    // raw separator inside
		{`{"type":"x","agent_id":1}`, "x"},                                 // fast path ignores the rest
		{`{"type":"status","type":"hello"}`, "status"},                     // first wins on the fast path
		{`{"agent_id":"a","type":"status","type":"hello"}`, "hello"},       // last wins in encoding/json
		{`{"type":"status"` + strings.Repeat(" ", 10) + `}`, "status"},     // trailing spaces
		{`{"type":"prompt","message":"{\"type\":\"abort\"}"}`, "prompt"},   // nested lookalike
		{`{"message":"{\"type\":\"abort\"}","type":"prompt"}`, "prompt"},   // nested lookalike, fallback
		{`{"type":"x"` /* truncated: cheap path does not validate */, "x"}, // documented fast path
		{`{"type":"x` /* unterminated */, ""},                              // no closing quote
	}
	for _, tt := range tests {
		if got := protocol.PeekType([]byte(tt.in)); got != tt.want {
			t.Errorf("PeekType(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPeekTypeOfAnEventAllocatesNothing: an agent peeks at the type of
// every record its runtime writes; for the event types of §9 the answer
// is the constant, not a fresh string.
func TestPeekTypeOfAnEventAllocatesNothing(t *testing.T) {
	for _, typ := range []string{protocol.TypeMessageDelta, protocol.TypeStatus, protocol.TypeTurnEnd, protocol.TypeReasoningLevelChanged} {
		rec := []byte(`{"type":"` + typ + `","agent_id":"a"}`)
		var got string
		allocs := testing.AllocsPerRun(20, func() { got = protocol.PeekType(rec) })
		if got != typ {
			t.Errorf("PeekType(%s) = %q", rec, got)
		}
		if allocs != 0 {
			t.Errorf("PeekType(%s) allocates %.1f times, want 0", rec, allocs)
		}
	}
	if got := protocol.PeekType([]byte(`{"type":"agent.list"}`)); got != "agent.list" {
		t.Errorf("a command's type: %q", got)
	}
}

// TestNewResponseOverTheRecordLimit: an answer too large for one record is
// answered as an error naming its size, itself well within the limit, so a
// client is never left waiting for a record it would skip (docs/protocol.md
// §2).
func TestNewResponseOverTheRecordLimit(t *testing.T) {
	big := strings.Repeat("x", protocol.DefaultMaxRecord)
	rec := protocol.NewResponse("r-1", "agent.list", map[string]string{"blob": big})
	if len(rec) > 1<<10 {
		t.Fatalf("oversized answer is %d bytes, want a short error", len(rec))
	}
	var r protocol.Response
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatal(err)
	}
	if r.Success || r.ID != "r-1" || r.Command != "agent.list" || r.Error == nil || r.Error.Code != protocol.CodeInternal ||
		!strings.Contains(r.Error.Message, "record limit") || !strings.Contains(r.Error.Message, "pages") {
		t.Fatalf("oversized answer = %s", rec)
	}
	// Just under the limit is answered as it is.
	fits := strings.Repeat("x", protocol.DefaultMaxRecord-8<<10)
	var ok protocol.Response
	if err := json.Unmarshal(protocol.NewResponse("r-2", "agent.list", fits), &ok); err != nil || !ok.Success {
		t.Fatalf("an answer under the limit was refused: %+v, %v", ok.Error, err)
	}
}
