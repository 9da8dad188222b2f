package refagent

// Permission and UI requests: the write gate, allow-always, timeouts,
// abort while a request is open, ask/select, and get_sync meanwhile.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// startWrite prompts a write and reads up to its permission request.
func startWrite(t *testing.T, h *harness, path, content string) (*protocol.PermissionRequest, []event) {
	t.Helper()
	args := protocol.MustMarshal(map[string]string{"path": path, "content": content})
	h.prompt("sim: tool write " + string(args))
	evs := h.until(protocol.TypePermissionRequest)
	st := h.next()
	if s, ok := st.msg.(*protocol.Status); !ok || s.Status != protocol.StatusWaitingForPermission {
		t.Fatalf("want status waiting_for_permission after the request, got %s", st.raw)
	}
	return evs[len(evs)-1].msg.(*protocol.PermissionRequest), append(evs, st)
}

func TestWriteAskedThenAllowed(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, evs := startWrite(t, h, "sub/dir/out.txt", "hello")
	wantTypes(t, evs, "response", "status", "turn_start", "message_delta*", "message_complete", "usage", "permission_request", "status")
	if req.RequestID == "" || req.ToolName != "write" || req.Prompt != "Allow write to sub/dir/out.txt?" ||
		!slices.Equal(req.Options, []string{"allow", "allow_always", "deny"}) {
		t.Fatalf("permission_request %+v", req)
	}
	if in, _ := req.Input.(map[string]any); in["path"] != "sub/dir/out.txt" || in["content"] != "hello" {
		t.Fatalf("input %+v", req.Input)
	}
	wantDetails := []protocol.PermissionDetail{{Label: "path", Value: "sub/dir/out.txt", Format: "path"}, {Label: "new file", Value: "hello", Format: "code"}}
	wantChoices := []protocol.PermissionChoice{
		{ID: "allow", Label: "Allow once", Intent: "allow", Accelerator: "y"},
		{ID: "allow_always", Label: "Always allow this exact request", Intent: "persist", Accelerator: "a"},
		{ID: "deny", Label: "Deny", Intent: "deny", Accelerator: "n"},
	}
	if !slices.Equal(req.Details, wantDetails) || !slices.Equal(req.Choices, wantChoices) {
		t.Fatalf("details %+v choices %+v", req.Details, req.Choices)
	}
	target := filepath.Join(h.opts.Cwd, "sub", "dir", "out.txt")
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file exists before permission: %v", err)
	}

	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "r1"}, RequestID: req.RequestID, Decision: "allow"})
	evs = h.untilIdle()
	wantTypes(t, evs, "permission_resolved", "status", "response", "tool_call", "tool_result",
		"message_delta*", "message_complete", "usage", "turn_end", "status")
	res := one[*protocol.PermissionResolved](t, evs)
	if res.RequestID != req.RequestID || res.Decision != "allow" || res.ChoiceID != "" || res.Source != "client" {
		t.Fatalf("permission_resolved %+v", res)
	}
	if s := statuses(evs); s[0] != protocol.StatusStreaming {
		t.Fatalf("statuses %v", s)
	}
	mustResponse(t, evs[2].msg.(*protocol.Response), protocol.TypePermissionResponse)
	call := one[*protocol.ToolCall](t, evs)
	if call.ReadOnly == nil || *call.ReadOnly {
		t.Fatalf("write must be reported as mutating: %+v", call)
	}
	if call.Render == nil || call.Render.Kind != "diff" || call.Render.Path != "sub/dir/out.txt" {
		t.Fatalf("tool_call render %+v, want the diff preview", call.Render)
	}
	tr := one[*protocol.ToolResult](t, evs)
	if tr.IsError || tr.Content.Text != "Created sub/dir/out.txt (5 bytes)" || tr.Render == nil || tr.Render.Kind != "diff" {
		t.Fatalf("tool_result %+v", tr)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "hello" {
		t.Fatalf("file = %q, %v", b, err)
	}
}

func TestWriteDenied(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "denied.txt", "x")
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, ChoiceID: "deny"})
	evs := h.untilIdle()
	res := one[*protocol.PermissionResolved](t, evs)
	if res.ChoiceID != "deny" || res.Decision != "" || res.Source != "client" {
		t.Fatalf("permission_resolved %+v (an answer by choice_id is echoed as choice_id)", res)
	}
	if r := one[*protocol.Response](t, evs); r.ID != "" || !r.Success {
		t.Fatalf("response to a command without id: %+v", r)
	}
	tr := one[*protocol.ToolResult](t, evs)
	if !tr.IsError || tr.Content.Message != "permission denied" {
		t.Fatalf("tool_result %+v", tr)
	}
	if _, err := os.Stat(filepath.Join(h.opts.Cwd, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("denied write happened: %v", err)
	}
}

func TestAllowAlwaysRemembersExactRequest(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "a.txt", "same")
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, ChoiceID: "allow_always"})
	evs := h.untilIdle()
	if r := one[*protocol.PermissionResolved](t, evs); r.ChoiceID != "allow_always" {
		t.Fatalf("resolved %+v", r)
	}
	if err := os.Remove(filepath.Join(h.opts.Cwd, "a.txt")); err != nil {
		t.Fatalf("first write did not happen: %v", err)
	}

	// The identical request (keys in another order) runs without asking.
	h.prompt(`sim: tool write {"content":"same","path":"a.txt"}`)
	evs = h.untilIdle()
	if n := len(of[*protocol.PermissionRequest](evs)); n != 0 {
		t.Fatalf("remembered request asked again: %v", types(evs))
	}
	if tr := one[*protocol.ToolResult](t, evs); tr.IsError {
		t.Fatalf("tool_result %+v", tr)
	}
	if b, err := os.ReadFile(filepath.Join(h.opts.Cwd, "a.txt")); err != nil || string(b) != "same" {
		t.Fatalf("second write: %q %v", b, err)
	}

	// A different request asks again.
	startWrite(t, h, "a.txt", "different")
}

func TestUnknownChoiceLeavesRequestOpen(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "c.txt", "v")
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "bad"}, RequestID: req.RequestID, ChoiceID: "maybe"})
	r, before := h.response("bad")
	if len(before) != 0 {
		t.Fatalf("events before the rejection: %v", types(before))
	}
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, "maybe")

	d := h.quietSync()
	if d.Status != protocol.StatusWaitingForPermission || len(d.PendingRequests) != 1 {
		t.Fatalf("request not open after an unknown choice: %+v", d)
	}

	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "good"}, RequestID: req.RequestID, ChoiceID: "allow", Source: "web"})
	evs := h.untilIdle()
	if res := one[*protocol.PermissionResolved](t, evs); res.ChoiceID != "allow" || res.Source != "web" {
		t.Fatalf("resolved %+v", res)
	}

	// A late answer is dropped silently: success, no event.
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "late"}, RequestID: req.RequestID, Decision: "deny"})
	r, before = h.response("late")
	mustResponse(t, r, protocol.TypePermissionResponse)
	if len(before) != 0 {
		t.Fatalf("late answer produced events: %v", types(before))
	}
	h.quietSync()
}

func TestPermissionTimeout(t *testing.T) {
	h := start(t, func(o *Options) {
		o.HeadlessTimeout = 100 * time.Millisecond
		o.HeadlessPolicy = protocol.HeadlessQueue
	})
	h.handshake()
	req, _ := startWrite(t, h, "t.txt", "v")
	evs := h.untilIdle()
	wantTypes(t, evs, "permission_resolved", "status", "tool_call", "tool_result",
		"message_delta*", "message_complete", "usage", "turn_end", "status")
	res := one[*protocol.PermissionResolved](t, evs)
	if res.RequestID != req.RequestID || res.Decision != "deny" || res.Source != "timeout" {
		t.Fatalf("resolved %+v", res)
	}
	if tr := one[*protocol.ToolResult](t, evs); !tr.IsError || !strings.Contains(tr.Content.Message, "TIMEOUT") {
		t.Fatalf("tool_result %+v", tr)
	}
	if _, err := os.Stat(filepath.Join(h.opts.Cwd, "t.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("timed-out write happened: %v", err)
	}
}

func TestUITimeout(t *testing.T) {
	h := start(t, func(o *Options) { o.HeadlessTimeout = 100 * time.Millisecond })
	h.handshake()
	h.prompt(`sim: ask confirm "Proceed?"`)
	evs := h.untilIdle()
	res := one[*protocol.UIResolved](t, evs)
	if string(res.Value) != "null" || res.Source != "timeout" {
		t.Fatalf("ui_resolved %+v (value %s)", res, res.Value)
	}
	if txt := assistantText(evs); !strings.Contains(txt, "TIMEOUT") {
		t.Fatalf("reply %q", txt)
	}
}

func TestAbortWhileWaitingForPermission(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "ab.txt", "v")
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "a1"}})
	evs := h.untilIdle()
	wantTypes(t, evs, "permission_resolved", "status", "response", "turn_end", "status")
	res := one[*protocol.PermissionResolved](t, evs)
	if res.RequestID != req.RequestID || res.Decision != "deny" || res.Source != "abort" {
		t.Fatalf("resolved %+v", res)
	}
	mustResponse(t, evs[2].msg.(*protocol.Response), protocol.TypeAbort)
	d := h.quietSync()
	if d.Status != protocol.StatusIdle || len(d.PendingRequests) != 0 {
		t.Fatalf("after abort: %+v", d)
	}
	// The transcript never keeps an unanswered call.
	w := d.LiveWindow.Messages
	if last := w[len(w)-1]; last.Role != roleUser || last.Content[0].Type != protocol.BlockToolResult || !last.Content[0].IsError {
		t.Fatalf("last window message %+v", last)
	}
}

func TestAskSelect(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt(`sim: ask select "Pick a colour" red green "light blue"`)
	evs := h.until(protocol.TypeUIRequest)
	req := evs[len(evs)-1].msg.(*protocol.UIRequest)
	if req.RequestID == "" || req.Kind != "select" || req.Title != "Pick a colour" || !slices.Equal(req.Options, []string{"red", "green", "light blue"}) {
		t.Fatalf("ui_request %+v", req)
	}
	if st := h.next(); st.msg.(*protocol.Status).Status != protocol.StatusWaitingForUI {
		t.Fatalf("want waiting_for_ui, got %s", st.raw)
	}
	d := h.quietSync()
	if len(d.PendingRequests) != 1 || !bytes.Equal(d.PendingRequests[0], evs[len(evs)-1].raw) {
		t.Fatalf("pending %s", d.PendingRequests)
	}
	h.send(protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, ID: "u"}, RequestID: req.RequestID, Value: json.RawMessage(`"green"`)})
	evs = h.untilIdle()
	wantTypes(t, evs, "ui_resolved", "status", "response", "message_delta*", "message_complete", "usage", "turn_end", "status")
	res := one[*protocol.UIResolved](t, evs)
	if res.RequestID != req.RequestID || string(res.Value) != `"green"` || res.Source != "client" {
		t.Fatalf("ui_resolved %+v", res)
	}
	if txt := assistantText(evs); txt != "answer: green" {
		t.Fatalf("reply %q", txt)
	}
}

// askAndAnswer prompts msg (one `sim: ask`), checks the ui_request it
// opens with check, answers it with value and returns the request and the
// events up to idle.
func askAndAnswer(t *testing.T, h *harness, msg string, check func(*protocol.UIRequest) bool, value string) (*protocol.UIRequest, []event) {
	t.Helper()
	h.prompt(msg)
	evs := h.until(protocol.TypeUIRequest)
	req := evs[len(evs)-1].msg.(*protocol.UIRequest)
	if req.RequestID == "" || !check(req) {
		t.Fatalf("%s: ui_request %s", msg, evs[len(evs)-1].raw)
	}
	h.send(protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, ID: h.id("u")}, RequestID: req.RequestID, Value: json.RawMessage(value)})
	evs = h.untilIdle()
	if res := one[*protocol.UIResolved](t, evs); res.RequestID != req.RequestID || string(res.Value) != value || res.Source != "client" {
		t.Fatalf("%s: ui_resolved %+v", msg, res)
	}
	return req, evs
}

// TestAskMultiSelect: `sim: ask multi` is a select with multiple: true,
// answered with a list.
func TestAskMultiSelect(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	_, evs := askAndAnswer(t, h, `sim: ask multi "Pick toppings" ham egg "green pepper" message="any number"`, func(r *protocol.UIRequest) bool {
		return r.Kind == protocol.UISelect && r.Multiple && r.Title == "Pick toppings" && r.Message == "any number" &&
			slices.Equal(r.Options, []string{"ham", "egg", "green pepper"})
	}, `["ham","green pepper"]`)
	if txt := assistantText(evs); txt != "answer: ham, green pepper" {
		t.Fatalf("reply %q", txt)
	}
}

// TestAskEditorAndInput: `sim: ask editor` and `sim: ask input` carry
// their placeholder and prefill; the text answered comes back whole.
func TestAskEditorAndInput(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	_, evs := askAndAnswer(t, h, `sim: ask editor Commit message placeholder="subject, then body" prefill="fix: "`, func(r *protocol.UIRequest) bool {
		return r.Kind == protocol.UIEditor && r.Title == "Commit message" && r.Placeholder == "subject, then body" && r.Prefill == "fix: " && len(r.Options) == 0
	}, `"fix: the thing\n\nIt was broken."`)
	if txt := assistantText(evs); txt != "answer: fix: the thing\n\nIt was broken." {
		t.Fatalf("editor reply %q", txt)
	}
	_, evs = askAndAnswer(t, h, `sim: ask input Your name prefill=Ada`, func(r *protocol.UIRequest) bool {
		return r.Kind == protocol.UIInput && r.Title == "Your name" && r.Prefill == "Ada"
	}, `"Grace"`)
	if txt := assistantText(evs); txt != "answer: Grace" {
		t.Fatalf("input reply %q", txt)
	}
	_, evs = askAndAnswer(t, h, `sim: ask confirm Delete the branch?`, func(r *protocol.UIRequest) bool {
		return r.Kind == protocol.UIConfirm && r.Title == "Delete the branch?" && len(r.Options) == 0
	}, `"no"`)
	if txt := assistantText(evs); txt != "answer: no" {
		t.Fatalf("confirm reply %q", txt)
	}
}

// TestAskNotify: `sim: ask notify` announces a notify ui_request and
// resolves it at once (value null, source notify), as the ask tool does:
// the turn goes on without an answer.
func TestAskNotify(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: ask notify Tests pass type=warning\nsim: say after")
	evs := h.untilIdle()
	req := one[*protocol.UIRequest](t, evs)
	if req.Kind != protocol.UINotify || req.Title != "Tests pass" || req.NotifyType != "warning" {
		t.Fatalf("ui_request %+v", req)
	}
	res := one[*protocol.UIResolved](t, evs)
	if res.RequestID != req.RequestID || string(res.Value) != "null" || res.Source != "notify" {
		t.Fatalf("ui_resolved %+v (value %s)", res, res.Value)
	}
	if txt := assistantText(evs); txt != "notified: Tests passafter" {
		t.Fatalf("reply %q", txt)
	}
	if d := h.quietSync(); len(d.PendingRequests) != 0 || d.Status != protocol.StatusIdle {
		t.Fatalf("after the notify: %+v", d)
	}
}

func TestGetSyncDuringPermissionWait(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	_, evs := startWrite(t, h, "g.txt", "v")
	reqRaw := evs[len(evs)-2].raw
	d := h.quietSync()
	if d.Status != protocol.StatusWaitingForPermission || d.Mode != modeBuild {
		t.Fatalf("sync %+v", d)
	}
	if len(d.PendingRequests) != 1 || !bytes.Equal(d.PendingRequests[0], reqRaw) {
		t.Fatalf("pending %s, want exactly %s", d.PendingRequests, reqRaw)
	}
	w := d.LiveWindow.Messages
	mc := one[*protocol.MessageComplete](t, evs)
	if len(w) != 2 || w[0].Role != roleUser || w[1].ID != mc.MessageID {
		t.Fatalf("window %+v", w)
	}
}
