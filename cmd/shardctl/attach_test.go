package main

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// TestAttachPlainSession drives attach through its plain-lines mode (stdin
// and stdout are not terminals): a prompt whose turn asks for permission,
// the slash commands, an escaped slash prompt, and the end of input, after
// which attach waits for its turn to end and detaches.
func TestAttachPlainSession(t *testing.T) {
	stdin, typing := io.Pipe()
	defer typing.Close()
	var typeMu sync.Mutex
	typeLine := func(s string) {
		go func() {
			typeMu.Lock()
			defer typeMu.Unlock()
			_, _ = io.WriteString(typing, s)
		}()
	}
	// typeLater types after the client has had time to show the events
	// just sent (input and events travel on different channels).
	typeLater := func(s string) {
		time.AfterFunc(200*time.Millisecond, func() { typeLine(s) })
	}
	h := func(typ string) protocol.Header { return ev(typ, agentA) }
	d := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA, Name: "builder", Model: "sim", Mode: "build"}})
			c.send(protocol.Sync{Header: h(protocol.TypeSync), Status: protocol.StatusIdle, Mode: "build"})
		case protocol.TypePrompt:
			var m protocol.Prompt
			mustUnmarshal(t, rec, &m)
			c.respond(hd, nil)
			if m.Message == "/literal" {
				c.send(turnStart("t2"))
				c.send(textDelta(agentA, "ok"))
				c.send(turnEnd("t2"))
				c.send(protocol.Status{Header: h(protocol.TypeStatus), Status: protocol.StatusIdle})
				return
			}
			c.send(protocol.Status{Header: h(protocol.TypeStatus), Status: protocol.StatusStreaming})
			c.send(turnStart("t1"))
			c.send(textDelta(agentA, "Hel"))
			c.send(textDelta(agentA, "lo"))
			c.send(permissionRequest("req-1"))
			typeLater("y\n")
		case protocol.TypePermissionResponse:
			var m protocol.PermissionResponse
			mustUnmarshal(t, rec, &m)
			c.respond(hd, nil)
			c.send(protocol.PermissionResolved{Header: h(protocol.TypePermissionResolved), RequestID: m.RequestID, Decision: m.Decision})
			c.send(protocol.ToolCall{Header: h(protocol.TypeToolCall), ToolCallID: "tc1", Name: "write", Args: map[string]any{"path": "notes.md", "content": "secret body"}})
			c.send(protocol.ToolResult{Header: h(protocol.TypeToolResult), ToolCallID: "tc1", Content: protocol.ToolResultContent{Kind: "text", Text: "SECRET OUTPUT"}})
			c.send(textDelta(agentA, " world"))
			c.send(protocol.MessageComplete{Header: h(protocol.TypeMessageComplete), MessageID: "m1"})
			c.send(protocol.TurnEnd{Header: h(protocol.TypeTurnEnd), TurnID: "t1", Usage: &protocol.Usage{Input: 5, Output: 7}})
			c.send(protocol.Status{Header: h(protocol.TypeStatus), Status: protocol.StatusIdle})
			typeLater("/mode plan\n")
		case protocol.TypeSetMode:
			c.respond(hd, nil)
			c.send(protocol.ModeChanged{Header: h(protocol.TypeModeChanged), PreviousMode: "build", Mode: "plan"})
			typeLine("/steer faster\n")
		case protocol.TypeSteer:
			c.respond(hd, nil) // an idle agent takes a steer as a new turn
			c.send(turnStart("t3"))
			c.send(turnEnd("t3"))
			typeLine("/abort\n")
		case protocol.TypeAbort:
			c.respond(hd, nil)
			go func() {
				typeMu.Lock()
				defer typeMu.Unlock()
				_, _ = io.WriteString(typing, "/bogus\n//literal\n")
				typing.Close()
			}()
		default:
			c.respond(hd, nil)
		}
	})
	typeLine("go\n")
	r := runCtlIn(t, nil, d.path, stdin, "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"Attached to agent-01 (builder) — idle, model sim, mode build\n",
		"› go\nHello\n",
		"Allow write notes.md? [y]es/[n]o/[a]lways:\n",
		"› y\n",
		"⚙ write notes.md\n↳ ok\n world\n— turn ended (in 5, out 7 tokens)\n",
		"mode: build → plan\n",
		"unknown command /bogus",
		"› //literal\nok\n— turn ended\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "SECRET") || strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("tool output or colors in the transcript:\n%s", r.stdout)
	}
	check := func(typ string, v any, want func() bool) {
		t.Helper()
		recs := d.records(typ)
		if len(recs) == 0 {
			t.Errorf("no %s sent", typ)
			return
		}
		mustUnmarshal(t, recs[0], v)
		if !want() {
			t.Errorf("%s sent %s", typ, recs[0])
		}
	}
	var pr protocol.PermissionResponse
	check(protocol.TypePermissionResponse, &pr, func() bool { return pr.Decision == protocol.DecisionAllow && pr.RequestID == "req-1" })
	var sm protocol.SetMode
	check(protocol.TypeSetMode, &sm, func() bool { return sm.Mode == "plan" && sm.AgentID == agentA })
	var st protocol.Steer
	check(protocol.TypeSteer, &st, func() bool { return st.Message == "faster" })
	var ab protocol.Abort
	check(protocol.TypeAbort, &ab, func() bool { return ab.AgentID == agentA })
	var at protocol.AgentAttach
	check(protocol.TypeAgentAttach, &at, func() bool { return at.Role == protocol.RoleInteractive })
	prompts := d.records(protocol.TypePrompt)
	if len(prompts) != 2 || !strings.Contains(string(prompts[1]), `"message":"/literal"`) {
		t.Errorf("prompts: %q", prompts)
	}
	if len(d.records(protocol.TypeAgentDetach)) != 1 {
		t.Errorf("no detach at the end")
	}
}

// TestAttachEndOfInputDeniesOpenQuestion: with input at its end, a
// permission question gets the default answer (deny) and attach detaches
// once the turn ends.
func TestAttachEndOfInputDeniesOpenQuestion(t *testing.T) {
	s := permissionTurn()
	d := s.daemon(t)
	r := runCtl(t, nil, d.path, "go\n", "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	recs := d.records(protocol.TypePermissionResponse)
	if len(recs) != 1 {
		t.Fatalf("permission responses = %d\n%s", len(recs), r.stdout)
	}
	var pr protocol.PermissionResponse
	mustUnmarshal(t, recs[0], &pr)
	if pr.Decision != protocol.DecisionDeny || !strings.Contains(r.stdout, "(no input: deny)") {
		t.Errorf("decision %q\n%s", pr.Decision, r.stdout)
	}
	if !strings.Contains(r.stdout, "↳ error: permission denied") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
}

func TestAttachUnknownAgent(t *testing.T) {
	d := agentScript{attachError: protocol.CodeNotFound}.daemon(t)
	r := runCtl(t, nil, d.path, "", "attach", "agent-x")
	if r.code != exitFailed || r.stderr != "shardctl: NOT_FOUND: no agent agent-x\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// floodBeforeAnswer is more events than the client buffers, sent ahead of a
// command's response: a session that blocked in the request without
// draining events would never see the response.
const floodBeforeAnswer = client.EventBuffer + 1000

// floodingDaemon answers a prompt (and a permission response) only after
// streaming floodBeforeAnswer deltas; the prompt's turn first asks for
// permission, and ends after the answer.
func floodingDaemon(t *testing.T, asked func()) *fakeDaemon {
	h := func(typ string) protocol.Header { return ev(typ, agentA) }
	flood := func(c *daemonConn, text string) {
		for range floodBeforeAnswer {
			c.send(textDelta(agentA, text))
		}
	}
	return newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA}})
			c.send(protocol.Sync{Header: h(protocol.TypeSync), Status: protocol.StatusIdle})
		case protocol.TypePrompt:
			c.send(protocol.Status{Header: h(protocol.TypeStatus), Status: protocol.StatusStreaming})
			c.send(turnStart("t1"))
			flood(c, "a")
			c.respond(hd, nil)
			c.send(permissionRequest("req-1"))
			if asked != nil {
				asked()
			}
		case protocol.TypePermissionResponse:
			var m protocol.PermissionResponse
			mustUnmarshal(t, rec, &m)
			flood(c, "b")
			c.respond(hd, nil)
			c.send(protocol.PermissionResolved{Header: h(protocol.TypePermissionResolved), RequestID: m.RequestID, Decision: m.Decision})
			c.send(protocol.MessageComplete{Header: h(protocol.TypeMessageComplete), MessageID: "m1"})
			c.send(turnEnd("t1"))
			c.send(protocol.Status{Header: h(protocol.TypeStatus), Status: protocol.StatusIdle})
		default:
			c.respond(hd, nil)
		}
	})
}

// TestAttachKeepsReadingWhileCommandsWait: commands whose responses queue
// behind a flood of events neither stall attach nor lose any event.
func TestAttachKeepsReadingWhileCommandsWait(t *testing.T) {
	stdin, typing := io.Pipe()
	// The answer is typed once the question has had time to show: typed
	// earlier, it would be a prompt of its own.
	d := floodingDaemon(t, func() {
		time.AfterFunc(200*time.Millisecond, func() {
			_, _ = io.WriteString(typing, "y\n")
			typing.Close()
		})
	})
	go func() { _, _ = io.WriteString(typing, "go\n") }()
	r := runCtlIn(t, nil, d.path, stdin, "attach", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s\nstdout tail:\n%s", r.code, r.stderr, tail(r.stdout))
	}
	// The question and its answer come between the two floods.
	a, b := strings.Repeat("a", floodBeforeAnswer), strings.Repeat("b", floodBeforeAnswer)
	if i, j := strings.Index(r.stdout, a), strings.Index(r.stdout, b); i < 0 || j < i {
		t.Errorf("streamed text incomplete or out of order:\n%s", tail(r.stdout))
	}
	if len(d.records(protocol.TypePermissionResponse)) != 1 || len(d.records(protocol.TypeAgentDetach)) != 1 {
		t.Errorf("permission responses %d, detaches %d", len(d.records(protocol.TypePermissionResponse)), len(d.records(protocol.TypeAgentDetach)))
	}
}

// tail is the end of a long transcript, for failure messages.
func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}
