package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

var sampleStatus = protocol.DaemonStatusData{
	Version:              "0.1.0-test",
	ProtocolVersion:      protocol.Version,
	PID:                  4242,
	StartedAt:            1_700_000_000_000,
	UptimeMs:             3723_000,
	Home:                 "/home/u/.shard",
	WebURL:               "http://127.0.0.1:7420",
	Connections:          3,
	AgentsByRuntimeState: map[protocol.RuntimeState]int{protocol.RuntimeRunning: 2, protocol.RuntimeStopped: 3},
	AgentsByStatus:       map[protocol.AgentStatus]int{protocol.StatusIdle: 4, protocol.StatusStreaming: 1},
	StoreBytes:           1536,
}

// sampleJobs is what the status daemon holds: a running job with a
// completed and a queued run, created now; a running job with an active
// run stuck stopping, created two days ago (live, so counted however old);
// and a job that completed two days ago (history: not counted).
var sampleJobs = protocol.JobsListData{Jobs: []protocol.OpJob{
	{JobID: "job-03", ParentAgentID: "agent-01", Strategy: protocol.StrategyParallel, State: protocol.JobRunning, CreatedAt: statusNow, Runs: []protocol.OpRun{
		{RunSnapshot: protocol.RunSnapshot{RunID: "run-03", State: protocol.RunCompleted}},
		{RunSnapshot: protocol.RunSnapshot{RunID: "run-04", State: protocol.RunQueued}},
	}},
	{JobID: "job-02", ParentAgentID: "agent-01", Strategy: protocol.StrategySingle, State: protocol.JobRunning, CreatedAt: statusNow - 2*statusDay, Runs: []protocol.OpRun{
		{RunSnapshot: protocol.RunSnapshot{RunID: "run-01", State: protocol.RunActive}, Stuck: true},
	}},
	{JobID: "job-01", ParentAgentID: "agent-01", Strategy: protocol.StrategySingle, State: protocol.JobCompleted, CreatedAt: statusNow - 2*statusDay, Runs: []protocol.OpRun{
		{RunSnapshot: protocol.RunSnapshot{RunID: "run-00", State: protocol.RunCompleted}},
	}},
}}

// statusNow is the test clock's now (testNow) in epoch ms; statusDay a
// day in ms.
var statusNow = testNow.UnixMilli()

const statusDay = int64(24 * 60 * 60 * 1000)

// answerJobs answers a jobs.list from sampleJobs by its state and since_ms
// filters, as the daemon would, one page of everything.
func answerJobs(raw []byte) protocol.JobsListData {
	var q protocol.JobsList
	_ = json.Unmarshal(raw, &q)
	out := protocol.JobsListData{Jobs: []protocol.OpJob{}}
	for _, j := range sampleJobs.Jobs {
		if (q.State == "" || j.State == q.State) && j.CreatedAt >= q.SinceMs {
			out.Jobs = append(out.Jobs, j)
		}
	}
	return out
}

// statusWorkspaces is what the status daemon's workspace.list answers.
var statusWorkspaces = protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{
	{WorkspaceID: "workspace-01", State: protocol.WorkspaceStateActive},
	{WorkspaceID: "workspace-02", State: protocol.WorkspaceStateActive},
	{WorkspaceID: "workspace-03", State: protocol.WorkspaceStateMissing},
	{WorkspaceID: "workspace-04", State: protocol.WorkspaceStateRetired},
}}

func statusDaemon(t *testing.T) *fakeDaemon {
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, raw []byte) {
		switch h.Type {
		case protocol.TypeDaemonStatus:
			c.respond(h, sampleStatus)
		case protocol.TypeJobsList:
			c.respond(h, answerJobs(raw))
		case protocol.TypeWorkspaceList:
			c.respond(h, statusWorkspaces)
		case protocol.TypeClusterStatus:
			c.respond(h, protocol.ClusterStatusData{})
		}
	})
}

// TestStatusCountsItsOwnNode: a cluster node's lists hold every node's
// jobs and workspaces; status counts only its own.
func TestStatusCountsItsOwnNode(t *testing.T) {
	run := func(id string) []protocol.OpRun {
		return []protocol.OpRun{{RunSnapshot: protocol.RunSnapshot{RunID: id, State: protocol.RunActive}}}
	}
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, raw []byte) {
		switch h.Type {
		case protocol.TypeDaemonStatus:
			c.respond(h, sampleStatus)
		case protocol.TypeClusterStatus:
			c.respond(h, protocol.ClusterStatusData{Enabled: true, Node: "n2"})
		case protocol.TypeJobsList:
			c.respond(h, protocol.JobsListData{Jobs: []protocol.OpJob{
				{JobID: "job-2", Node: "n2", State: protocol.JobRunning, CreatedAt: statusNow, Runs: run("run-2")},
				{JobID: "job-1", Node: "n1", State: protocol.JobRunning, CreatedAt: statusNow, Runs: run("run-1")},
			}})
		case protocol.TypeWorkspaceList:
			c.respond(h, protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{
				{WorkspaceID: "workspace-2", Node: "n2", State: protocol.WorkspaceStateActive},
				{WorkspaceID: "workspace-1", Node: "n1", State: protocol.WorkspaceStateActive},
				{WorkspaceID: "workspace-3", Node: "n1", State: protocol.WorkspaceStateMissing},
			}})
		}
	})
	r := runCtl(t, nil, d.path, "", "status")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"1 live or from the last 24h", "Runs:", "1 total: active 1", "Workspaces:", "1 live: active 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestStatusTable(t *testing.T) {
	d := statusDaemon(t)
	r := runCtl(t, nil, d.path, "", "status")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"Version:", "0.1.0-test",
		"Protocol:", protocol.Version,
		"PID:", "4242",
		"Uptime:", "1h2m3s",
		"Home:", "/home/u/.shard",
		"Web:", "http://127.0.0.1:7420",
		"Connections:", "3",
		"Agents:", "5 total: running 2, stopped 3",
		"Agent status:", "idle 4, streaming 1",
		"Store:", "1.5 KiB",
		"Jobs:", "2 live or from the last 24h",
		"Runs:", "3 total: active 1, completed 1, queued 1",
		"Queue depth:", "1",
		"Stuck runs:", "1 (shardctl jobs ls --stuck)",
		"Workspaces:", "3 live: active 2, missing 1; 1 retired (shardctl doctor)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("color written to a non-terminal:\n%q", r.stdout)
	}
}

func TestStatusJSON(t *testing.T) {
	d := statusDaemon(t)
	r := runCtl(t, nil, d.path, "", "status", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got protocol.DaemonStatusData
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if got.PID != 4242 || got.AgentsByStatus[protocol.StatusIdle] != 4 || got.StoreBytes != 1536 {
		t.Fatalf("got %+v", got)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(r.stdout), &raw)
	for _, k := range []string{"version", "protocol_version", "pid", "uptime_ms", "home", "web_url", "connections", "agents_by_runtime_state", "agents_by_status", "store_bytes",
		"jobs", "runs_by_state", "queue_depth", "stuck_runs", "workspaces_by_state"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("json lacks %q", k)
		}
	}
	if ws, _ := raw["workspaces_by_state"].(map[string]any); ws["active"] != float64(2) || ws["missing"] != float64(1) || ws["retired"] != float64(1) {
		t.Errorf("workspaces_by_state = %v", raw["workspaces_by_state"])
	}
	if raw["queue_depth"] != float64(1) || raw["stuck_runs"] != float64(1) || raw["jobs"] != float64(2) {
		t.Errorf("job counts = %v %v %v", raw["jobs"], raw["queue_depth"], raw["stuck_runs"])
	}
}
