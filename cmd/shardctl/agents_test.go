package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "AGENT_ID NAME PARENT STATUS RUNTIME MODEL CWD CREATED" {
		t.Fatalf("header = %q", lines[0])
	}
	row1 := strings.Fields(lines[1])
	want1 := []string{"agent-01", "builder", "-", "streaming", "running", "sim", "/src/app"}
	if strings.Join(row1[:7], " ") != strings.Join(want1, " ") {
		t.Fatalf("row 1 = %q", lines[1])
	}
	if !strings.HasSuffix(lines[1], "1m ago") {
		t.Fatalf("row 1 lacks CREATED as an age: %q", lines[1])
	}
	wide := runCtl(t, nil, d.path, "", "--no-headers", "agents", "ls", "-o", "wide")
	if wl := strings.Split(wide.stdout, "\n"); wide.code != 0 || !strings.Contains(wl[0], "2023-11-14 22:13:20") || strings.HasPrefix(wl[0], "AGENT_ID") {
		t.Fatalf("-o wide --no-headers:\n%s", wide.stdout)
	}
	row2 := strings.Fields(lines[2])
	if row2[0] != "agent-02" || row2[1] != "scout" || row2[2] != "agent-01" || row2[5] != "-" {
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
	r := runCtl(t, nil, d.path, "", "agents", "create", "--cwd", dir, "--name", "n1", "--model", "sim", "--mode", "build", "--headless-policy", "queue",
		"--tools", "read,ls", "--tools", "grep", "--skills", "deploy", "--node", "n3")
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
	if m.Cwd != dir || m.Name != "n1" || m.Model != "sim" || m.Mode != "build" || m.HeadlessPolicy != "queue" || m.ID == "" || m.Node != "n3" ||
		!slices.Equal(m.Tools, []string{"read", "ls", "grep"}) || !slices.Equal(m.Skills, []string{"deploy"}) {
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

func TestAgentsLsFilters(t *testing.T) {
	d := agentsDaemon(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--parent", "agent-01"}, "agent-02"},
		{[]string{"--state", "running"}, "agent-01"},
		{[]string{"--state", "idle"}, "agent-02"},
		{[]string{"--state", "stopped", "--parent", "agent-01"}, "agent-02"},
		{[]string{"--state", "error"}, ""},
	} {
		r := runCtl(t, nil, d.path, "", append([]string{"agents", "ls", "-o", "json"}, tt.args...)...)
		var got protocol.AgentListData
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("%v: exit %d stdout %q", tt.args, r.code, r.stdout)
		}
		var ids []string
		for _, a := range got.Agents {
			ids = append(ids, a.AgentID)
		}
		if strings.Join(ids, " ") != tt.want {
			t.Errorf("%v: %v, want %q", tt.args, ids, tt.want)
		}
	}
}

// agentOpsDaemon answers agent.status, agent.list, jobs.show, jobs.list,
// agent.kill and agent.terminate about sampleAgents.
func agentOpsDaemon(t *testing.T) *fakeDaemon {
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentStatus:
			for _, a := range sampleAgents {
				if a.AgentID == h.AgentID {
					if a.AgentID == "agent-02" {
						a.Node = "n3" // a cluster node's agent, to show
					}
					c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{a}})
					return
				}
			}
			c.respondError(h, protocol.CodeNotFound, "no agent "+h.AgentID)
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: sampleAgents})
		case protocol.TypeJobsShow:
			var m protocol.JobsShow
			mustUnmarshal(t, rec, &m)
			if m.Handle == "agent-02" {
				c.respond(h, protocol.OpJob{JobID: "job-9", ParentAgentID: "agent-01", Strategy: protocol.StrategySingle, State: protocol.JobCompleted,
					Runs: []protocol.OpRun{{RunSnapshot: protocol.RunSnapshot{JobID: "job-9", RunID: "run-9", AgentID: "agent-02", State: protocol.RunCompleted}}}})
				return
			}
			c.respondError(h, protocol.CodeNotFound, "no job")
		case protocol.TypeJobsList:
			var m protocol.JobsList
			mustUnmarshal(t, rec, &m)
			if m.ParentAgentID == "agent-01" {
				c.respond(h, protocol.JobsListData{Jobs: []protocol.OpJob{{JobID: "job-9", ParentAgentID: "agent-01", Strategy: protocol.StrategySingle, State: protocol.JobCompleted, Runs: []protocol.OpRun{}}}})
				return
			}
			c.respond(h, protocol.JobsListData{Jobs: []protocol.OpJob{}})
		case protocol.TypeAgentKill:
			c.respond(h, nil)
		case protocol.TypeAgentTerminate:
			c.respond(h, protocol.AgentTerminateData{Deferred: h.AgentID == "agent-01"})
		default:
			c.respondError(h, protocol.CodeInvalidRequest, "unexpected "+h.Type)
		}
	})
}

func TestAgentsShow(t *testing.T) {
	d := agentOpsDaemon(t)
	r := runCtl(t, nil, d.path, "", "agents", "show", "agent-01", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v["agent"].(map[string]any)["agent_id"] != "agent-01" || len(v["children"].([]any)) != 1 || len(v["jobs"].([]any)) != 1 {
		t.Errorf("parent view: %s", r.stdout)
	}
	if _, ok := v["job"]; ok {
		t.Errorf("a top-level agent has no job: %s", r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "agents", "show", "agent-02")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"Agent:", "agent-02", "Parent:", "agent-01", "Alias:", "scout", "Job:", "job-9: completed (run run-9)", "Children:", "Node:", "n3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCtl(t, nil, d.path, "", "agents", "show", "agent-zz")
	if r.code != exitFailed || r.stderr != "shardctl: NOT_FOUND: no agent agent-zz\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestAgentsKillAndTerminate(t *testing.T) {
	d := agentOpsDaemon(t)
	if r := runCtl(t, nil, d.path, "", "agents", "kill", "agent-01"); r.code != 0 || r.stdout != "Killed the runtime of agent-01\n" {
		t.Fatalf("kill: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCtl(t, nil, d.path, "", "agents", "kill", "--force", "agent-02"); r.code != 0 {
		t.Fatalf("kill --force: exit %d stderr %q", r.code, r.stderr)
	}
	recs := d.records(protocol.TypeAgentKill)
	var k1, k2 protocol.AgentKill
	mustUnmarshal(t, recs[0], &k1)
	mustUnmarshal(t, recs[1], &k2)
	if k1.AgentID != "agent-01" || k1.Force || k2.AgentID != "agent-02" || !k2.Force {
		t.Errorf("kills sent %s %s", recs[0], recs[1])
	}
	if r := runCtl(t, nil, d.path, "", "agents", "terminate", "agent-01"); r.code != 0 || !strings.Contains(r.stdout, "when its current turn ends") {
		t.Fatalf("terminate: exit %d stdout %q", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "agents", "terminate", "agent-02", "-o", "json"); r.code != 0 || strings.Join(strings.Fields(r.stdout), "") != `{"deferred":false}` {
		t.Fatalf("terminate json: exit %d stdout %q", r.code, r.stdout)
	}
}
