package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

var sampleAgents = []protocol.AgentInfo{
	{
		AgentID: "agent-01", Name: "builder", Cwd: "/src/app", Model: "sim",
		Status: protocol.StatusStreaming, RuntimeState: protocol.RuntimeRunning,
		CreatedAt: 1_700_000_000_000, Usage: &protocol.Usage{Input: 10, Output: 20},
	},
	{
		AgentID: "agent-02", Cwd: "/src/lib", Status: protocol.StatusIdle,
		RuntimeState: protocol.RuntimeStopped, CreatedAt: 1_700_000_100_000,
		ParentAgentID: "agent-01", Alias: "scout",
	},
}

func agentsDaemon(t *testing.T) *fakeDaemon {
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			// An orchestrator event interleaves with the response.
			c.send(protocol.AgentActivity{Header: ev(protocol.TypeAgentActivity, "agent-01"), Phase: protocol.PhaseStreaming, Status: protocol.StatusStreaming})
			c.respond(h, protocol.AgentListData{Agents: sampleAgents})
		case protocol.TypeAgentCreate:
			var m protocol.AgentCreate
			_ = json.Unmarshal(rec, &m)
			if m.Name == "taken" {
				c.respondError(h, protocol.CodeConflict, "name taken")
				return
			}
			c.respond(h, protocol.AgentCreateData{AgentID: "agent-new"})
		}
	})
}

func TestAgentsLsTable(t *testing.T) {
	d := agentsDaemon(t)
	r := runCtl(t, nil, d.path, "", "agents", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header + 2 rows:\n%s", r.stdout)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "AGENT_ID NAME STATUS RUNTIME MODEL CWD CREATED" {
		t.Fatalf("header = %q", lines[0])
	}
	row1 := strings.Fields(lines[1])
	want1 := []string{"agent-01", "builder", "streaming", "running", "sim", "/src/app"}
	if strings.Join(row1[:6], " ") != strings.Join(want1, " ") {
		t.Fatalf("row 1 = %q", lines[1])
	}
	if !strings.Contains(lines[1], formatCreated(1_700_000_000_000)) {
		t.Fatalf("row 1 lacks CREATED: %q", lines[1])
	}
	row2 := strings.Fields(lines[2])
	if row2[0] != "agent-02" || row2[1] != "scout" || row2[4] != "-" {
		t.Fatalf("row 2 = %q", lines[2])
	}
}

func TestAgentsLsJSON(t *testing.T) {
	d := agentsDaemon(t)
	r := runCtl(t, nil, d.path, "", "agents", "ls", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got struct {
		Agents []map[string]any `json:"agents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(got.Agents) != 2 {
		t.Fatalf("agents = %d", len(got.Agents))
	}
	a := got.Agents[0]
	for k, want := range map[string]any{
		"agent_id": "agent-01", "name": "builder", "cwd": "/src/app", "model": "sim",
		"status": "streaming", "runtime_state": "running", "created_at": float64(1_700_000_000_000),
	} {
		if a[k] != want {
			t.Errorf("agents[0].%s = %v, want %v", k, a[k], want)
		}
	}
	if u, ok := a["usage"].(map[string]any); !ok || u["output"] != float64(20) {
		t.Errorf("agents[0].usage = %v", a["usage"])
	}
	if got.Agents[1]["parent_agent_id"] != "agent-01" || got.Agents[1]["alias"] != "scout" {
		t.Errorf("agents[1] = %v", got.Agents[1])
	}
}

func TestAgentsLsEmptyJSON(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) { c.respond(h, protocol.AgentListData{}) })
	r := runCtl(t, nil, d.path, "", "agents", "ls", "-o", "json")
	if r.code != 0 || strings.Join(strings.Fields(r.stdout), "") != `{"agents":[]}` {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "agents", "ls")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No agents") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestAgentsCreate(t *testing.T) {
	d := agentsDaemon(t)
	dir := t.TempDir()
	r := runCtl(t, nil, d.path, "", "agents", "create", "--cwd", dir, "--name", "n1", "--model", "sim", "--mode", "build", "--headless-policy", "queue")
	if r.code != 0 || r.stdout != "agent-new\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	recs := d.records(protocol.TypeAgentCreate)
	if len(recs) != 1 {
		t.Fatalf("agent.create records = %d", len(recs))
	}
	var m protocol.AgentCreate
	if err := json.Unmarshal(recs[0], &m); err != nil {
		t.Fatal(err)
	}
	if m.Cwd != dir || m.Name != "n1" || m.Model != "sim" || m.Mode != "build" || m.HeadlessPolicy != "queue" || m.ID == "" {
		t.Fatalf("sent %s", recs[0])
	}

	r = runCtl(t, nil, d.path, "", "agents", "create", "--cwd", dir, "-o", "json")
	if r.code != 0 || strings.Join(strings.Fields(r.stdout), "") != `{"agent_id":"agent-new"}` {
		t.Fatalf("json: exit %d stdout %q", r.code, r.stdout)
	}
}

func TestAgentsCreateDefaultsCwdToAbsoluteWorkingDir(t *testing.T) {
	d := agentsDaemon(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if r := runCtl(t, nil, d.path, "", "agents", "create"); r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "agents", "create", "--cwd", "sub"); r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	recs := d.records(protocol.TypeAgentCreate)
	wd, _ := os.Getwd()
	for i, want := range []string{wd, filepath.Join(wd, "sub")} {
		var m protocol.AgentCreate
		_ = json.Unmarshal(recs[i], &m)
		if m.Cwd != want {
			t.Errorf("create %d cwd = %q, want %q", i, m.Cwd, want)
		}
	}
}

func TestAgentsCreateErrors(t *testing.T) {
	d := agentsDaemon(t)
	r := runCtl(t, nil, d.path, "", "agents", "create", "--cwd", "/x", "--name", "taken")
	if r.code != exitFailed || r.stderr != "shardctl: CONFLICT: name taken\n" || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "agents", "create", "--cwd", "/x", "--headless-policy", "maybe")
	if r.code != exitUsage || !strings.Contains(r.stderr, "headless_policy") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if n := len(d.records(protocol.TypeAgentCreate)); n != 1 {
		t.Fatalf("invalid create reached the daemon: %d records", n)
	}
}
