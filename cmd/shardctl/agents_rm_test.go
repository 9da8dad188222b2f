package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// pruneAgents: one top-level agent and four subagents, of which only
// agent-old is finished long enough ago.
var pruneAgents = []protocol.AgentInfo{
	{AgentID: "agent-top", Name: "top", RuntimeState: protocol.RuntimeStopped},
	{AgentID: "agent-old", ParentAgentID: "agent-top", Alias: "scout", RuntimeState: protocol.RuntimeStopped},
	{AgentID: "agent-new", ParentAgentID: "agent-top", Alias: "fresh", RuntimeState: protocol.RuntimeStopped},
	{AgentID: "agent-live", ParentAgentID: "agent-top", Alias: "idle", RuntimeState: protocol.RuntimeRunning},
	{AgentID: "agent-again", ParentAgentID: "agent-top", Alias: "again", RuntimeState: protocol.RuntimeStopped},
}

func pruneJobs() protocol.JobsListData {
	day := int64(24 * 3600 * 1000)
	now := testNow.UnixMilli()
	run := func(agent string, st protocol.RunState, queued, ended int64) protocol.OpRun {
		return protocol.OpRun{RunSnapshot: protocol.RunSnapshot{AgentID: agent, State: st, EndedAt: ended}, QueuedAt: queued}
	}
	return protocol.JobsListData{Jobs: []protocol.OpJob{
		{JobID: "job-1", ParentAgentID: "agent-top", Runs: []protocol.OpRun{
			run("agent-old", protocol.RunCompleted, now-3*day, now-2*day),
			run("agent-new", protocol.RunCompleted, now-3*day, now-3600_000),
			run("agent-live", protocol.RunCompleted, now-3*day, now-2*day),
			run("agent-again", protocol.RunFailed, now-3*day, now-2*day),
		}},
		// agent-again was relaunched: its last run is still queued.
		{JobID: "job-2", ParentAgentID: "agent-top", Runs: []protocol.OpRun{run("agent-again", protocol.RunQueued, now-day, 0)}},
	}}
}

func removeDaemon(t *testing.T) *fakeDaemon {
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		switch h.Type {
		case protocol.TypeAgentList:
			c.respond(h, protocol.AgentListData{Agents: pruneAgents})
		case protocol.TypeJobsList:
			c.respond(h, pruneJobs())
		case protocol.TypeAgentRemove:
			var m protocol.AgentRemove
			_ = json.Unmarshal(rec, &m)
			var data protocol.AgentRemoveData
			for _, id := range m.AgentIDs {
				r := protocol.AgentRemoveResult{AgentID: id, Removed: true}
				if !strings.HasPrefix(id, "agent-") {
					r = protocol.AgentRemoveResult{AgentID: id, Error: protocol.CodeNotFound, Reason: "no agent " + id}
				}
				if id == "agent-top" {
					r = protocol.AgentRemoveResult{AgentID: id, Error: protocol.CodeConflict, Kind: protocol.RemoveJobOpen, Reason: "parent of job job-2, which has not ended\x1b[31m"}
				}
				data.Results = append(data.Results, r)
			}
			c.respond(h, data)
		}
	})
}

func removedIDs(t *testing.T, d *fakeDaemon) [][]string {
	t.Helper()
	var out [][]string
	for _, rec := range d.records(protocol.TypeAgentRemove) {
		var m protocol.AgentRemove
		if err := json.Unmarshal(rec, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.AgentIDs)
	}
	return out
}

func TestAgentsRmResolvesNamesAndReportsRefusals(t *testing.T) {
	d := removeDaemon(t)
	r := runCtl(t, nil, d.path, "", "agents", "rm", "scout")
	if r.code != 0 || !strings.Contains(r.stdout, "agent-old") || !strings.Contains(r.stdout, "removed") {
		t.Fatalf("rm scout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "agents", "rm", "scout", "top")
	if r.code != exitFailed {
		t.Fatalf("rm with a refusal: exit %d, want %d\n%s", r.code, exitFailed, r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "AGENT_ID RESULT REASON" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "agent-top job_open parent of job job-2") {
		t.Fatalf("table:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "\x1b") {
		t.Fatalf("control character in the table: %q", r.stdout)
	}
	got := removedIDs(t, d)
	if len(got) != 2 || strings.Join(got[1], ",") != "agent-old,agent-top" {
		t.Fatalf("agent.remove ids = %v", got)
	}
	r = runCtl(t, nil, d.path, "", "agents", "rm", "top", "-o", "json")
	var data protocol.AgentRemoveData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || r.code != exitFailed || len(data.Results) != 1 || data.Results[0].Kind != protocol.RemoveJobOpen {
		t.Fatalf("rm -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	// An unknown name goes to the daemon as it is, which does not find it.
	if r := runCtl(t, nil, d.path, "", "agents", "rm", "nobody"); r.code != exitFailed || !strings.Contains(r.stdout, "NOT_FOUND") {
		t.Fatalf("rm of an unknown name: exit %d, %d removes sent", r.code, len(removedIDs(t, d)))
	}
	if r := runCtl(t, nil, d.path, "", "agents", "rm"); r.code != exitUsage {
		t.Fatalf("rm without args: exit %d", r.code)
	}
}

func TestAgentsPruneFinishedOlderThan(t *testing.T) {
	d := removeDaemon(t)
	if r := runCtl(t, nil, d.path, "", "agents", "prune"); r.code != exitUsage {
		t.Fatalf("prune without --finished: exit %d", r.code)
	}
	r := runCtl(t, nil, d.path, "", "agents", "prune", "--finished", "--dry-run", "-o", "json")
	var dry struct {
		Agents []struct {
			AgentID        string `json:"agent_id"`
			LastRunEndedAt int64  `json:"last_run_ended_at"`
		} `json:"agents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil || r.code != 0 || len(dry.Agents) != 1 || dry.Agents[0].AgentID != "agent-old" || dry.Agents[0].LastRunEndedAt == 0 {
		t.Fatalf("dry run: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if n := len(removedIDs(t, d)); n != 0 {
		t.Fatalf("--dry-run sent %d agent.remove", n)
	}
	r = runCtl(t, nil, d.path, "", "agents", "prune", "--finished", "--older-than", "24h")
	if r.code != 0 || !strings.Contains(r.stdout, "agent-old") {
		t.Fatalf("prune: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := removedIDs(t, d); len(got) != 1 || strings.Join(got[0], ",") != "agent-old" {
		t.Fatalf("pruned = %v, want [agent-old]", got)
	}
	// A shorter age takes the recently finished one too.
	runCtl(t, nil, d.path, "", "agents", "prune", "--finished", "--older-than", "30m")
	if got := removedIDs(t, d); len(got) != 2 || strings.Join(got[1], ",") != "agent-old,agent-new" {
		t.Fatalf("pruned = %v", got)
	}
}
