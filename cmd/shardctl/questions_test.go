package main

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// questionsDaemon has a parent waiting for permission and a child waiting
// for a select, an idle agent, and answers responses.
func questionsDaemon(t *testing.T) *fakeDaemon {
	perm := permissionRequest("req-p")
	perm.AgentID = ""
	ui := protocol.UIRequest{Header: ev(protocol.TypeUIRequest, "agent-c"), RequestID: "req-u", Kind: protocol.UISelect, Title: "Pick", Options: []string{"red", "blue"}}
	raw := func(v any) json.RawMessage { return protocol.MustMarshal(v) }
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{
				{AgentID: "agent-p", Name: "boss", Status: protocol.StatusWaitingForPermission},
				{AgentID: "agent-c", Alias: "scout", ParentAgentID: "agent-p", Status: protocol.StatusWaitingForUI},
				{AgentID: "agent-i", Name: "idle", Status: protocol.StatusIdle},
			}})
		case protocol.TypeAgentAttach:
			if h.AgentID == "agent-i" {
				t.Errorf("attached to an idle agent")
			}
			c.respond(h, protocol.AgentAttachData{})
			pending := []json.RawMessage{raw(perm)}
			if h.AgentID == "agent-c" {
				pending = []json.RawMessage{raw(ui)}
			}
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, h.AgentID), PendingRequests: pending})
		default:
			c.respond(h, nil)
		}
	})
}

func TestQuestionsLsAndAnswer(t *testing.T) {
	d := questionsDaemon(t)
	r := runCtl(t, nil, d.path, "", "questions", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "req-p") || !strings.Contains(lines[1], "boss") ||
		!strings.Contains(lines[1], "write notes.md") || !strings.Contains(lines[1], "allow|deny|always") ||
		!strings.Contains(lines[2], "req-u") || !strings.Contains(lines[2], "scout") || !strings.Contains(lines[2], "red|blue") {
		t.Fatalf("questions ls:\n%s", r.stdout)
	}

	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-u", "2"); r.code != 0 {
		t.Fatalf("answer: exit %d stderr %q", r.code, r.stderr)
	}
	var u protocol.UIResponse
	mustUnmarshal(t, d.records(protocol.TypeUIResponse)[0], &u)
	if u.AgentID != "agent-c" || u.RequestID != "req-u" || string(u.Value) != `"blue"` {
		t.Errorf("ui_response = %+v %s", u, u.Value)
	}
	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-p", "always"); r.code != 0 {
		t.Fatalf("answer: exit %d stderr %q", r.code, r.stderr)
	}
	var p protocol.PermissionResponse
	mustUnmarshal(t, d.records(protocol.TypePermissionResponse)[0], &p)
	if p.AgentID != "agent-p" || p.Decision != protocol.DecisionAllowAlways {
		t.Errorf("permission_response = %+v", p)
	}
	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-nope", "allow"); r.code != exitFailed || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("unknown question: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "questions", "answer", "req-p", "maybe"); r.code != exitUsage {
		t.Errorf("bad answer: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestLogsTranscriptAndFollow(t *testing.T) {
	msgs := []protocol.Message{
		{Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "first"}}},
		{Role: "assistant", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "one"}}},
		{Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "second"}}},
		{Role: "assistant", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "two"}}},
	}
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: agentA, Name: "boss"}}})
		case protocol.TypeAgentAttach:
			c.respond(h, protocol.AgentAttachData{})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), LiveWindow: protocol.LiveWindow{Messages: msgs}})
			c.send(textDelta(agentA, "live"))
			c.send(protocol.PermissionResolved{Header: ev(protocol.TypePermissionResolved, agentA), RequestID: "r1", Decision: "allow", Source: "headless"})
			c.send(turnEnd("t1"))
			c.close()
		default:
			c.respond(h, nil)
		}
	})
	r := runCtl(t, nil, d.path, "", "logs", "boss", "--turns", "1")
	if r.code != 0 || r.stdout != "you: second\ntwo\n" {
		t.Fatalf("logs --turns 1: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "logs", "-f", "boss")
	want := "you: first\none\nyou: second\ntwo\nlive\n(r1: allow by headless)\n— turn ended\n"
	if r.code != exitFailed || r.stdout != want {
		t.Fatalf("logs -f: exit %d stdout %q, want %q; stderr %q", r.code, r.stdout, want, r.stderr)
	}
}

// TestAgentsLsWatch: ls --watch prints the list again after a change (a
// burst is one redraw) and exits 1 when the daemon goes away.
func TestAgentsLsWatch(t *testing.T) {
	var mu sync.Mutex
	lists := 0
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		if h.Type != protocol.TypeAgentList {
			c.respond(h, nil)
			return
		}
		mu.Lock()
		lists++
		n := lists
		mu.Unlock()
		st := protocol.StatusIdle
		if n > 1 {
			st = protocol.StatusStreaming
		}
		c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: "agent-01", Name: "boss", Status: st}}})
		if n == 1 {
			c.send(protocol.AgentActivity{Header: ev(protocol.TypeAgentActivity, "agent-01")}) // not a change
			c.send(protocol.AgentStatusChanged{Header: ev(protocol.TypeAgentStatusChanged, "agent-01"), Status: protocol.StatusStreaming})
			return
		}
		c.close()
	})
	r := runCtl(t, nil, d.path, "", "agents", "ls", "--watch", "--no-headers")
	if r.code != exitFailed {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	tables := strings.Split(strings.TrimSpace(r.stdout), "\n\n")
	if len(tables) != 2 || !strings.Contains(tables[0], "idle") || !strings.Contains(tables[1], "streaming") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
}

// A daemon's own permission requests offer choices named like the
// decisions; questions ls lists each answer once.
func TestQuestionAnswersListedOnce(t *testing.T) {
	perm := permissionRequest("req-p")
	perm.Choices = []protocol.PermissionChoice{
		{ID: protocol.DecisionAllow, Intent: "allow"},
		{ID: protocol.DecisionAllowAlways, Intent: "persist"},
		{ID: protocol.DecisionDeny, Intent: "deny"},
		{ID: "allow_session", Intent: "allow"},
	}
	q, ok := questionOf(protocol.AgentInfo{AgentID: "agent-p"}, protocol.MustMarshal(perm))
	if !ok {
		t.Fatal("not a question")
	}
	if got := strings.Join(q.Answers, "|"); got != "allow|deny|always|allow_session" {
		t.Fatalf("answers = %s", got)
	}
}
