package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestAttachPipedPromptsRunInOrder: every piped line is a prompt of its
// own, sent after the previous turn ended, and attach detaches only after
// the last one's turn (it used to send B while A ran and detach before B
// showed).
func TestAttachPipedPromptsRunInOrder(t *testing.T) {
	var mu sync.Mutex
	busy, turns := false, 0
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA}})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), Status: protocol.StatusIdle}) // as the daemon does (docs/protocol.md §6.1)
		case protocol.TypePrompt:
			var m protocol.Prompt
			mustUnmarshal(t, rec, &m)
			mu.Lock()
			overlap := busy
			busy = true
			turns++
			id := fmt.Sprintf("t%d", turns)
			mu.Unlock()
			if overlap {
				t.Errorf("prompt %q sent while a turn ran", m.Message)
			}
			c.respond(hd, nil)
			c.send(turnStart(id))
			c.send(textDelta(agentA, "said "+strings.TrimPrefix(m.Message, "sim: say ")))
			c.send(protocol.MessageComplete{Header: ev(protocol.TypeMessageComplete, agentA), MessageID: "m-" + id})
			// The turn takes a while: a client that reads ahead sends the
			// next prompt meanwhile. (Only the old client fails here, and
			// a slow machine only makes it less likely to.)
			time.AfterFunc(100*time.Millisecond, func() {
				mu.Lock()
				busy = false
				mu.Unlock()
				c.send(turnEnd(id))
			})
		default:
			c.respond(hd, nil)
		}
	})
	r := runCtl(t, nil, d.path, "sim: say A\nsim: say B\nsim: say C\n", "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	a, b, c := strings.Index(r.stdout, "said A"), strings.Index(r.stdout, "said B"), strings.Index(r.stdout, "said C")
	if a < 0 || b < a || c < b {
		t.Fatalf("want the three turns in order:\n%s", r.stdout)
	}
}

// TestAttachAnswersADelegatedChildQuestion: a subagent's permission request,
// delegated to the parent's attachment with the child's agent_id
// (docs/protocol.md §6.3), is asked naming the child and answered with the
// child's agent_id (attach used to drop it, and the child waited for the
// headless timeout). (The child's name is looked up in the background, so it
// may come too late for a plain line; the id is always there.)
func TestAttachAnswersADelegatedChildQuestion(t *testing.T) {
	const child = "agent-child"
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA, Name: "boss"}})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), Status: protocol.StatusIdle})
		case protocol.TypeAgentList:
			c.respond(hd, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: agentA, Name: "boss"}, {AgentID: child, Alias: "scout", ParentAgentID: agentA}}})
		case protocol.TypePrompt:
			c.respond(hd, nil)
			c.send(turnStart("t1"))
			req := permissionRequest("req-child")
			req.AgentID = child
			req.ToolName = "bash"
			req.Input = map[string]any{"command": "make test"}
			c.send(req)
		case protocol.TypePermissionResponse:
			var m protocol.PermissionResponse
			mustUnmarshal(t, rec, &m)
			c.respond(hd, nil)
			if m.AgentID != child || m.RequestID != "req-child" || m.Decision != protocol.DecisionAllow {
				t.Errorf("answer = %+v, want allow of req-child for %s", m, child)
			}
			c.send(protocol.PermissionResolved{Header: ev(protocol.TypePermissionResolved, child), RequestID: m.RequestID, Decision: m.Decision})
			c.send(textDelta(agentA, "child done"))
			c.send(turnEnd("t1"))
		default:
			c.respond(hd, nil)
		}
	})
	r := runCtl(t, nil, d.path, "go\ny\n", "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "agent-child] Allow bash make test?") || !strings.Contains(r.stdout, "child done") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if len(d.records(protocol.TypePermissionResponse)) != 1 {
		t.Fatalf("%d answers", len(d.records(protocol.TypePermissionResponse)))
	}
}

// TestAlwaysNoteSaysWhatItCovers: the permission prompt says what
// [a]lways covers, and only when it is offered.
func TestAlwaysNoteSaysWhatItCovers(t *testing.T) {
	p := permissionRequest("r")
	if n := alwaysNote(&p); !strings.Contains(n, "exact write call (same arguments)") || !strings.Contains(n, "any other call still asks") {
		t.Errorf("note = %q", n)
	}
	p.Options = []string{protocol.DecisionAllow, protocol.DecisionDeny}
	if n := alwaysNote(&p); n != "" {
		t.Errorf("note without allow_always = %q", n)
	}
}

// TestAttachShowsRecentTurns: on attach the last turns of the live window
// are shown (prompts, text, tool calls and results), escaped, and a turn in
// flight is said to go on.
func TestAttachShowsRecentTurns(t *testing.T) {
	msgs := []protocol.Message{
		{Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "old prompt"}}},
		{Role: "assistant", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "old answer"}}},
		{Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "write it"}}},
		{Role: "assistant", Content: []protocol.ContentBlock{{Type: protocol.BlockToolCall, Name: "write", Args: map[string]any{"path": "a.md"}}}},
		{Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockToolResult, Content: &protocol.ToolResultContent{Kind: "text", Text: "x"}}}},
		{Role: "assistant", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "line one\nline two\x1b[2J"}}},
	}
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusStreaming, Info: protocol.AgentInfo{AgentID: agentA}})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), Status: protocol.StatusStreaming, LiveWindow: protocol.LiveWindow{Messages: msgs}})
			c.send(textDelta(agentA, "more"))
			c.send(turnEnd("t9"))
			c.send(protocol.Status{Header: ev(protocol.TypeStatus, agentA), Status: protocol.StatusIdle})
		default:
			c.respond(hd, nil)
		}
	})
	r := runCtl(t, nil, d.path, "", "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"you: old prompt", "old answer", "you: write it", "⚙ write a.md", "↳ ok", "line one\nline two\\x1b[2J", "a turn is in flight", "more"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("attach output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestAttachReconnects: when the daemon drops the connection attach says
// so, reconnects, attaches again and goes on; when the daemon stays away
// past --reconnect it exits 1.
func TestAttachReconnects(t *testing.T) {
	var mu sync.Mutex
	attaches := 0
	var d *fakeDaemon
	d = newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			mu.Lock()
			attaches++
			n := attaches
			mu.Unlock()
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA}})
			c.send(textDelta(agentA, fmt.Sprintf("hello %d", n)))
			c.send(protocol.MessageComplete{Header: ev(protocol.TypeMessageComplete, agentA), MessageID: "m"})
			if n == 2 {
				d.ln.Close()
			}
			c.close()
		default:
			c.respond(hd, nil)
		}
	})
	stdin, typing := io.Pipe() // input stays open: only the connection ends
	defer typing.Close()
	r := runCtlIn(t, nil, d.path, stdin, "attach", "--reconnect", "300ms", agentA)
	if r.code != exitFailed {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"hello 1", "reconnecting for up to 300ms", "(reconnected)", "hello 2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("attach output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "no reconnect within 300ms") {
		t.Errorf("stderr %q", r.stderr)
	}
}
