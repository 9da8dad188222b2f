package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

const agentA = "agent-01"

// agentScript drives a fake daemon hosting agentA.
type agentScript struct {
	attachStatus protocol.AgentStatus
	attachError  protocol.ErrorCode
	onPrompt     func(c *daemonConn, m protocol.Prompt)
	onPermission func(c *daemonConn, m protocol.PermissionResponse)
	onUI         func(c *daemonConn, m protocol.UIResponse)
}

func (s agentScript) daemon(t *testing.T) *fakeDaemon {
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentAttach:
			if s.attachError != "" {
				c.respondError(h, s.attachError, "no agent "+h.AgentID)
				return
			}
			st := s.attachStatus
			if st == "" {
				st = protocol.StatusIdle
			}
			c.respond(h, protocol.AgentAttachData{Status: st, Info: protocol.AgentInfo{AgentID: h.AgentID, Status: st}})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, h.AgentID), Status: st, Mode: "build"})
		case protocol.TypePrompt:
			var m protocol.Prompt
			mustUnmarshal(t, rec, &m)
			c.respond(h, nil)
			if s.onPrompt != nil {
				s.onPrompt(c, m)
			}
		case protocol.TypePermissionResponse:
			var m protocol.PermissionResponse
			mustUnmarshal(t, rec, &m)
			c.respond(h, nil)
			if s.onPermission != nil {
				s.onPermission(c, m)
			}
		case protocol.TypeUIResponse:
			var m protocol.UIResponse
			mustUnmarshal(t, rec, &m)
			c.respond(h, nil)
			if s.onUI != nil {
				s.onUI(c, m)
			}
		default:
			c.respond(h, nil)
		}
	})
}

func mustUnmarshal(t *testing.T, rec []byte, v any) {
	if err := json.Unmarshal(rec, v); err != nil {
		t.Errorf("decode %s: %v", rec, err)
	}
}

func textDelta(agentID, text string) protocol.MessageDelta {
	return protocol.MessageDelta{Header: ev(protocol.TypeMessageDelta, agentID), MessageID: "m1", Kind: protocol.DeltaText, TextDelta: text}
}

func turnStart(id string) protocol.TurnStart {
	return protocol.TurnStart{Header: ev(protocol.TypeTurnStart, agentA), TurnID: id}
}

func turnEnd(id string) protocol.TurnEnd {
	return protocol.TurnEnd{Header: ev(protocol.TypeTurnEnd, agentA), TurnID: id}
}

func permissionRequest(id string) protocol.PermissionRequest {
	return protocol.PermissionRequest{
		Header: ev(protocol.TypePermissionRequest, agentA), RequestID: id, ToolName: "write",
		Input:   map[string]any{"path": "notes.md", "content": "secret body"},
		Options: []string{protocol.DecisionAllow, protocol.DecisionAllowAlways, protocol.DecisionDeny},
	}
}

// permissionTurn streams "Hello", asks for permission to write, and after
// the answer runs the tool and finishes " world".
func permissionTurn() agentScript {
	return agentScript{
		onPrompt: func(c *daemonConn, m protocol.Prompt) {
			c.send(protocol.Status{Header: ev(protocol.TypeStatus, agentA), Status: protocol.StatusStreaming})
			c.send(turnStart("t1"))
			c.send(textDelta(agentA, "Hel"))
			c.send(textDelta("agent-other", "NOT MINE"))
			c.send(protocol.AgentActivity{Header: ev(protocol.TypeAgentActivity, "agent-other"), Phase: protocol.PhaseTool})
			c.send(textDelta(agentA, "lo"))
			c.send(permissionRequest("req-1"))
		},
		onPermission: func(c *daemonConn, m protocol.PermissionResponse) {
			c.send(protocol.PermissionResolved{Header: ev(protocol.TypePermissionResolved, agentA), RequestID: m.RequestID, Decision: m.Decision})
			if m.Decision != protocol.DecisionDeny {
				c.send(protocol.ToolCall{Header: ev(protocol.TypeToolCall, agentA), ToolCallID: "tc1", Name: "write", Args: map[string]any{"path": "notes.md", "content": "secret body"}})
				c.send(protocol.ToolResult{Header: ev(protocol.TypeToolResult, agentA), ToolCallID: "tc1", Content: protocol.ToolResultContent{Kind: "text", Text: "wrote 11 bytes"}})
			} else {
				c.send(protocol.ToolResult{Header: ev(protocol.TypeToolResult, agentA), ToolCallID: "tc1", IsError: true, Content: protocol.ToolResultContent{Kind: "error", Message: "permission denied"}})
			}
			c.send(textDelta(agentA, " world"))
			c.send(protocol.MessageComplete{Header: ev(protocol.TypeMessageComplete, agentA), MessageID: "m1"})
			c.send(turnEnd("t1"))
			c.send(protocol.Status{Header: ev(protocol.TypeStatus, agentA), Status: protocol.StatusIdle})
		},
	}
}

func TestPromptStreamsTextAndAnswersPermission(t *testing.T) {
	d := permissionTurn().daemon(t)
	r := runCtl(t, nil, d.path, "y\n", "prompt", agentA, "write", "the notes")
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r.stdout != "Hello world\n" {
		t.Fatalf("stdout = %q", r.stdout)
	}
	for _, want := range []string{
		"Allow write notes.md? [y]es/[n]o/[a]lways: y\n",
		"⚙ write notes.md\n",
		"↳ ok\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "secret body") || strings.Contains(r.stdout, "NOT MINE") {
		t.Errorf("leaked args or another agent's text:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}

	var p protocol.Prompt
	recs := d.records(protocol.TypePrompt)
	if len(recs) != 1 {
		t.Fatalf("prompts = %d", len(recs))
	}
	mustUnmarshal(t, recs[0], &p)
	if p.AgentID != agentA || p.Message != "write the notes" || p.StreamingBehavior != "" {
		t.Fatalf("prompt sent = %s", recs[0])
	}
	var a protocol.AgentAttach
	mustUnmarshal(t, d.records(protocol.TypeAgentAttach)[0], &a)
	if a.Role != protocol.RoleInteractive || a.AgentID != agentA {
		t.Fatalf("attach = %+v", a)
	}
	recs = d.records(protocol.TypePermissionResponse)
	if len(recs) != 1 {
		t.Fatalf("permission responses = %d", len(recs))
	}
	var pr protocol.PermissionResponse
	mustUnmarshal(t, recs[0], &pr)
	if pr.AgentID != agentA || pr.RequestID != "req-1" || pr.Decision != protocol.DecisionAllow || pr.ID == "" {
		t.Fatalf("permission_response = %s", recs[0])
	}
}

func TestPromptPermissionAnswers(t *testing.T) {
	tests := []struct {
		name, stdin, want string
	}{
		{"always", "a\n", protocol.DecisionAllowAlways},
		{"no", "n\n", protocol.DecisionDeny},
		{"retry after nonsense", "maybe\nyes\n", protocol.DecisionAllow},
		{"end of input denies", "", protocol.DecisionDeny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := permissionTurn().daemon(t)
			r := runCtl(t, nil, d.path, tt.stdin, "prompt", agentA, "go")
			if r.code != 0 {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			var pr protocol.PermissionResponse
			recs := d.records(protocol.TypePermissionResponse)
			if len(recs) != 1 {
				t.Fatalf("permission responses = %d", len(recs))
			}
			mustUnmarshal(t, recs[0], &pr)
			if pr.Decision != tt.want {
				t.Fatalf("decision = %q, want %q", pr.Decision, tt.want)
			}
		})
	}
}

func TestPromptPermissionAnsweredElsewhere(t *testing.T) {
	s := agentScript{onPrompt: func(c *daemonConn, _ protocol.Prompt) {
		c.send(turnStart("t1"))
		c.send(permissionRequest("req-9"))
		c.send(protocol.PermissionResolved{Header: ev(protocol.TypePermissionResolved, agentA), RequestID: "req-9", Decision: protocol.DecisionAllow, Source: "web"})
		c.send(textDelta(agentA, "done"))
		c.send(turnEnd("t1"))
	}}
	d := s.daemon(t)
	// The user never types: the question must be dropped, not answered.
	stdin, typing := io.Pipe()
	defer typing.Close()
	r := runCtlIn(t, nil, d.path, stdin, "prompt", agentA, "go")
	if r.code != 0 || r.stdout != "done\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "(req-9: allow by web)") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if n := len(d.records(protocol.TypePermissionResponse)); n != 0 {
		t.Fatalf("answered a resolved request: %d responses", n)
	}
}

func TestPromptUIRequests(t *testing.T) {
	ui := func(id, kind string, opts ...string) protocol.UIRequest {
		return protocol.UIRequest{Header: ev(protocol.TypeUIRequest, agentA), RequestID: id, Kind: kind, Title: "Pick " + kind, Options: opts}
	}
	s := agentScript{
		onPrompt: func(c *daemonConn, _ protocol.Prompt) {
			c.send(turnStart("t1"))
			c.send(protocol.UIRequest{Header: ev(protocol.TypeUIRequest, agentA), RequestID: "n1", Kind: protocol.UINotify, Message: "heads up"})
			c.send(ui("u1", protocol.UISelect, "red", "green", "blue"))
		},
		onUI: func(c *daemonConn, m protocol.UIResponse) {
			c.send(protocol.UIResolved{Header: ev(protocol.TypeUIResolved, agentA), RequestID: m.RequestID, Value: m.Value})
			switch m.RequestID {
			case "u1":
				c.send(ui("u2", protocol.UIConfirm))
			case "u2":
				c.send(ui("u3", protocol.UIInput))
			case "u3":
				c.send(textDelta(agentA, "ok"))
				c.send(turnEnd("t1"))
			}
		},
	}
	d := s.daemon(t)
	r := runCtl(t, nil, d.path, "2\ny\nhello there\n", "prompt", agentA, "go")
	if r.code != 0 || r.stdout != "ok\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"[info] heads up", "  1) red\n", "  2) green\n", "Choose [1-3]: ", "Pick confirm [y/n]: ", "Pick input: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	recs := d.records(protocol.TypeUIResponse)
	want := map[string]string{"u1": `"green"`, "u2": `"true"`, "u3": `"hello there"`}
	if len(recs) != len(want) {
		t.Fatalf("ui responses = %d", len(recs))
	}
	for _, rec := range recs {
		var m protocol.UIResponse
		mustUnmarshal(t, rec, &m)
		if string(m.Value) != want[m.RequestID] || m.AgentID != agentA {
			t.Errorf("ui_response %s", rec)
		}
	}
}

func TestPromptErrorEventFails(t *testing.T) {
	s := agentScript{onPrompt: func(c *daemonConn, _ protocol.Prompt) {
		c.send(turnStart("t1"))
		c.send(textDelta(agentA, "partial"))
		c.send(protocol.ErrorEvent{Header: ev(protocol.TypeError, agentA), Code: protocol.CodeProviderError, Message: "provider down"})
		c.send(protocol.Status{Header: ev(protocol.TypeStatus, agentA), Status: protocol.StatusError})
	}}
	d := s.daemon(t)
	r := runCtl(t, nil, d.path, "", "prompt", agentA, "go")
	if r.code != exitFailed {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r.stdout != "partial\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if strings.Count(r.stderr, "shardctl: PROVIDER_ERROR: provider down\n") != 1 {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestPromptAttachFails(t *testing.T) {
	d := agentScript{attachError: protocol.CodeNotFound}.daemon(t)
	r := runCtl(t, nil, d.path, "", "prompt", "agent-x", "go")
	if r.code != exitFailed || r.stderr != "shardctl: NOT_FOUND: no agent agent-x\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if n := len(d.records(protocol.TypePrompt)); n != 0 {
		t.Fatalf("prompt sent after failed attach")
	}
}

func TestPromptNoWait(t *testing.T) {
	d := agentScript{}.daemon(t)
	r := runCtl(t, nil, d.path, "", "prompt", "--no-wait", agentA, "go")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := len(d.records(protocol.TypePrompt)); n != 1 {
		t.Fatalf("prompts = %d", n)
	}
}

func TestPromptWhileBusyFollowsUp(t *testing.T) {
	s := agentScript{
		attachStatus: protocol.StatusStreaming,
		onPrompt: func(c *daemonConn, _ protocol.Prompt) {
			c.send(textDelta(agentA, "old turn"))
			c.send(turnEnd("t0"))
			c.send(turnStart("t1"))
			c.send(textDelta(agentA, "new turn"))
			c.send(turnEnd("t1"))
		},
	}
	d := s.daemon(t)
	r := runCtl(t, nil, d.path, "", "prompt", agentA, "go")
	if r.code != 0 || r.stdout != "new turn\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	var p protocol.Prompt
	mustUnmarshal(t, d.records(protocol.TypePrompt)[0], &p)
	if p.StreamingBehavior != protocol.BehaviorFollowUp {
		t.Fatalf("streaming_behavior = %q", p.StreamingBehavior)
	}
}

func TestPromptInterruptAborts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s := agentScript{onPrompt: func(c *daemonConn, _ protocol.Prompt) {
		c.send(turnStart("t1"))
		c.send(textDelta(agentA, "thinking hard"))
		cancel() // the user presses Ctrl-C mid-turn
	}}
	d := s.daemon(t)
	r := runCtl(t, ctx, d.path, "", "prompt", agentA, "go")
	if r.code != exitInterrupted {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := len(d.records(protocol.TypeAbort)); n != 1 {
		t.Fatalf("abort records = %d", n)
	}
}

func TestPromptWaitFalse(t *testing.T) {
	d := agentScript{}.daemon(t)
	r := runCtl(t, nil, d.path, "", "prompt", "--wait=false", agentA, "go")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestPromptKeepsReadingWhileCommandsWait: the prompt and the permission
// answer both have their responses queued behind more events than the
// client buffers; prompt neither stalls nor loses an event.
func TestPromptKeepsReadingWhileCommandsWait(t *testing.T) {
	d := floodingDaemon(t, nil)
	r := runCtl(t, nil, d.path, "y\n", "prompt", agentA, "go")
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s\nstdout tail:\n%s", r.code, r.stderr, tail(r.stdout))
	}
	if want := strings.Repeat("a", floodBeforeAnswer) + strings.Repeat("b", floodBeforeAnswer); !strings.Contains(r.stdout, want) {
		t.Errorf("streamed text incomplete or out of order:\n%s", tail(r.stdout))
	}
}
