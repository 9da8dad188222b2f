package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// watchDaemon answers attaches for agent-01 and agent-02; after the second
// it streams a few events and closes the connection.
func watchDaemon(t *testing.T) *fakeDaemon {
	var mu sync.Mutex
	attached := 0
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		if h.Type != protocol.TypeAgentAttach {
			c.respond(h, nil)
			return
		}
		if h.AgentID != "agent-01" && h.AgentID != "agent-02" {
			c.respondError(h, protocol.CodeNotFound, "no agent "+h.AgentID)
			return
		}
		info := protocol.AgentInfo{AgentID: h.AgentID}
		if h.AgentID == "agent-01" {
			info.Name = "builder"
		}
		c.respond(h, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: info})
		c.send(protocol.Sync{Header: ev(protocol.TypeSync, h.AgentID), Status: protocol.StatusIdle, Mode: "build"})
		mu.Lock()
		attached++
		n := attached
		mu.Unlock()
		if n < 2 {
			return
		}
		ro := false
		c.send(protocol.Status{Header: ev(protocol.TypeStatus, "agent-01"), Status: protocol.StatusStreaming})
		c.send(protocol.MessageDelta{Header: ev(protocol.TypeMessageDelta, "agent-01"), Kind: protocol.DeltaText, TextDelta: "Hi\nthere"})
		c.send(protocol.ToolCall{Header: ev(protocol.TypeToolCall, "agent-02"), Name: "bash", Args: map[string]any{"command": "cat secret.txt"}, ReadOnly: &ro})
		c.send(protocol.ToolResult{Header: ev(protocol.TypeToolResult, "agent-02"), Content: protocol.ToolResultContent{Kind: "text", Text: "SECRET OUTPUT"}})
		c.send(protocol.AgentActivity{Header: ev(protocol.TypeAgentActivity, "agent-99"), Phase: protocol.PhaseTool})
		c.send(protocol.AgentStatusChanged{Header: ev(protocol.TypeAgentStatusChanged, "agent-01"), Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeRunning})
		c.close()
	})
}

func TestWatchPrintsLines(t *testing.T) {
	d := watchDaemon(t)
	r := runCtl(t, nil, d.path, "", "watch", "--reconnect", "0", "agent-01", "agent-02")
	if r.code != exitFailed || r.stderr != "shardctl: the daemon closed the connection\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	want := []string{
		"22:15:00 agent-01(builder) sync status=idle mode=build messages=0 pending=0",
		"22:15:00 agent-02 sync status=idle mode=build messages=0 pending=0",
		"22:15:00 agent-01(builder) status streaming",
		`22:15:00 agent-01(builder) message_delta text "Hi\nthere"`,
		"22:15:00 agent-02 tool_call bash",
		"22:15:00 agent-02 tool_result ok",
		"22:15:00 agent-01(builder) agent_status_changed idle runtime=running",
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}
	for _, rec := range d.records(protocol.TypeAgentAttach) {
		var a protocol.AgentAttach
		mustUnmarshal(t, rec, &a)
		if a.Role != protocol.RoleObserver {
			t.Errorf("attach role = %q", a.Role)
		}
	}
}

func TestWatchJSON(t *testing.T) {
	d := watchDaemon(t)
	r := runCtl(t, nil, d.path, "", "watch", "--reconnect=0", "-o", "json", "agent-01", "agent-02")
	if r.code != exitFailed {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("lines = %d:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line is not JSON: %q", l)
		}
	}
	if !strings.Contains(lines[5], `"SECRET OUTPUT"`) {
		t.Errorf("raw json should carry the full event: %s", lines[5])
	}
}

func TestWatchUnknownAgent(t *testing.T) {
	d := watchDaemon(t)
	r := runCtl(t, nil, d.path, "", "watch", "agent-zz")
	if r.code != exitFailed || !strings.Contains(r.stderr, "NOT_FOUND: no agent agent-zz") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// TestWatchAllSubscribesToEveryParent: watch without agents prints the
// daemon-wide events and asks subagent.status of every parent it learns
// of, so that run changes reach it.
func TestWatchAllSubscribesToEveryParent(t *testing.T) {
	var mu sync.Mutex
	subscribed := map[string]bool{}
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{
				{AgentID: "agent-01"}, {AgentID: "agent-02", ParentAgentID: "agent-01"},
			}})
		case protocol.TypeJobsList:
			c.respond(h, protocol.JobsListData{Jobs: []protocol.OpJob{{JobID: "job-1", ParentAgentID: "agent-03"}}})
		case protocol.TypeSubagentStatus:
			var m protocol.SubagentStatus
			mustUnmarshal(t, rec, &m)
			c.respond(h, protocol.SubagentStatusData{Agents: []protocol.SubagentAgentStatus{}})
			mu.Lock()
			subscribed[m.ParentAgentID] = true
			n := len(subscribed)
			mu.Unlock()
			switch {
			case n == 2 && m.ParentAgentID == "agent-03":
				c.send(protocol.AgentActivity{Header: ev(protocol.TypeAgentActivity, "agent-02"), Phase: protocol.PhaseTool, Status: protocol.StatusStreaming, ToolName: "bash"})
				c.send(protocol.SubagentRunChanged{Header: ev(protocol.TypeSubagentRunChanged, "agent-02"), ParentAgentID: "agent-01", JobID: "job-1", RunID: "run-1",
					PreviousState: protocol.RunQueued, State: protocol.RunActive})
				c.send(protocol.AgentSpawned{Header: ev(protocol.TypeAgentSpawned, "agent-05"), Info: protocol.AgentInfo{AgentID: "agent-05", Name: "child5", ParentAgentID: "agent-04"}})
			case m.ParentAgentID == "agent-04":
				c.send(protocol.AgentStatusChanged{Header: ev(protocol.TypeAgentStatusChanged, "agent-05"), Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeRunning})
				c.close()
			}
		default:
			c.respondError(h, protocol.CodeInvalidRequest, "unexpected "+h.Type)
		}
	})
	r := runCtl(t, nil, d.path, "", "watch", "--reconnect=0")
	if r.code != exitFailed {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	want := strings.Join([]string{
		"22:15:00 agent-02 agent_activity tool streaming bash",
		"22:15:00 agent-02 subagent_run_changed run-1 queued→active",
		"22:15:00 agent-05(child5) agent_spawned child5 parent=agent-04",
		"22:15:00 agent-05(child5) agent_status_changed idle runtime=running",
	}, "\n") + "\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if len(d.records(protocol.TypeAgentAttach)) != 0 {
		t.Errorf("watch without agents attached to one")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range []string{"agent-01", "agent-03", "agent-04"} {
		if !subscribed[p] {
			t.Errorf("not subscribed to %s's runs", p)
		}
	}
}

func TestWatchYAML(t *testing.T) {
	d := watchDaemon(t)
	r := runCtl(t, nil, d.path, "", "watch", "--reconnect=0", "-o", "yaml", "agent-01", "agent-02")
	if r.code != exitFailed {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, "---\n"); n != 7 {
		t.Fatalf("documents = %d:\n%s", n, r.stdout)
	}
	if !strings.Contains(r.stdout, "type: tool_call\n") || !strings.Contains(r.stdout, "agent_id: agent-02\n") {
		t.Errorf("yaml:\n%s", r.stdout)
	}
}

// TestWatchReconnects: when the daemon drops the connection watch says so,
// reconnects, attaches again and goes on printing; when the daemon stays
// away past --reconnect it exits 1 (it used to exit 0 silently). Names and
// ids forged with control characters are printed escaped.
func TestWatchReconnects(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	var d *fakeDaemon
	d = newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		if h.Type != protocol.TypeAgentAttach {
			c.respond(h, nil)
			return
		}
		mu.Lock()
		conns++
		n := conns
		mu.Unlock()
		c.respond(h, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: h.AgentID, Name: "evil\n22:15:00 agent-01 forged\x1b[2J"}})
		c.send(protocol.Status{Header: ev(protocol.TypeStatus, "agent-01"), Status: protocol.AgentStatus(fmt.Sprintf("s%d", n))})
		if n == 1 {
			c.close()
			return
		}
		d.ln.Close() // the daemon goes away for good
		c.close()
	})
	r := runCtl(t, nil, d.path, "", "watch", "--reconnect", "300ms", "agent-01")
	if r.code != exitFailed {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	name := `agent-01(evil\n22:15:00 agent-01 forged\x1b[2J)`
	want := "22:15:00 " + name + " status s1\n22:15:00 " + name + " status s2\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "reconnecting") || !strings.Contains(r.stderr, "shardctl: reconnected\n") ||
		!strings.Contains(r.stderr, "no reconnect within 300ms") {
		t.Fatalf("stderr %q", r.stderr)
	}
}
