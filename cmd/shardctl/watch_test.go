package main

import (
	"encoding/json"
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
		c.respond(h, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: h.AgentID}})
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
	r := runCtl(t, nil, d.path, "", "watch", "agent-01", "agent-02")
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	want := []string{
		"agent-01 sync status=idle mode=build messages=0 pending=0",
		"agent-02 sync status=idle mode=build messages=0 pending=0",
		"agent-01 status streaming",
		`agent-01 message_delta text "Hi\nthere"`,
		"agent-02 tool_call bash",
		"agent-02 tool_result ok",
		"agent-01 agent_status_changed idle runtime=running",
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
	r := runCtl(t, nil, d.path, "", "watch", "-o", "json", "agent-01", "agent-02")
	if r.code != 0 {
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
