package jobs

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// A coordinator started over finished jobs holds none of them (load reads
// the open ones only), yet answers every command about them from the
// store: jobs.show by job, run, agent and alias, jobs.list pages and its
// parent filter, subagent.wait, status and stop of a finished job.
func TestFinishedJobsAreReadOnDemand(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	putParent(t, st, "agent-q")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	for i, id := range []string{"job-1", "job-2", "job-3"} {
		parent := "agent-p"
		if id == "job-2" {
			parent = "agent-q"
		}
		putFinishedJob(t, st, id, parent, clk.Now().Add(time.Duration(i-10)*time.Minute))
	}
	// job-4's child has an alias, as a create binds one.
	alias := store.Job{JobID: "job-4", ParentAgentID: "agent-p", Strategy: protocol.StrategySingle, CreatedAt: clk.Now().UnixMilli() - 1000,
		EndedAt: clk.Now().UnixMilli(), Runs: []store.Run{{RunID: "run-job-4", Name: "t", AgentID: "agent-job-4", Alias: "Ada", State: protocol.RunCompleted}}}
	if _, err := st.CreateJob(alias, []store.Agent{{AgentID: "agent-job-4", SessionID: "sess-4", Cwd: "/w", ParentAgentID: "agent-p", Depth: 1}},
		map[string]string{"ada": "agent-job-4"}); err != nil {
		t.Fatal(err)
	}
	h := startCoordinatorWith(t, st, retentionRegistry(st), clk, Limits{})

	data := func(id string, v any) {
		t.Helper()
		r := h.responses(id)[id]
		if r.Error != nil {
			t.Fatalf("%s: %+v", id, r.Error)
		}
		if err := json.Unmarshal(r.Data, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, handle := range []string{"job-4", "run-job-4", "agent-job-4", "ada"} {
		h.send("show "+handle, protocol.TypeJobsShow, &protocol.JobsShow{Handle: handle})
		var job protocol.OpJob
		data("show "+handle, &job)
		if job.JobID != "job-4" {
			t.Fatalf("jobs.show %s = %s; want job-4", handle, job.JobID)
		}
	}

	var pages [][]string
	cursor := ""
	for i := 0; i < 5; i++ {
		id := "list-" + string(rune('a'+i))
		h.send(id, protocol.TypeJobsList, &protocol.JobsList{Limit: 3, Cursor: cursor})
		var page protocol.JobsListData
		data(id, &page)
		var ids []string
		for _, j := range page.Jobs {
			ids = append(ids, j.JobID)
		}
		pages = append(pages, ids)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(pages) != 2 || !slices.Equal(pages[0], []string{"job-4", "job-3", "job-2"}) || !slices.Equal(pages[1], []string{"job-1"}) {
		t.Fatalf("jobs.list pages = %v; want [job-4 job-3 job-2] [job-1]", pages)
	}
	h.send("mine", protocol.TypeJobsList, &protocol.JobsList{ParentAgentID: "agent-q"})
	var mine protocol.JobsListData
	data("mine", &mine)
	if len(mine.Jobs) != 1 || mine.Jobs[0].JobID != "job-2" || mine.NextCursor != "" {
		t.Fatalf("jobs.list of agent-q = %+v; want job-2 alone", mine)
	}

	h.send("wait", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{"job-1", "ada"}})
	var wait protocol.SubagentWaitData
	data("wait", &wait)
	if wait.TimedOut || wait.AggregateState != string(protocol.JobCompleted) || len(wait.Runs) != 2 {
		t.Fatalf("wait on finished runs = %+v; want answered at once, completed", wait)
	}
	h.send("status", protocol.TypeSubagentStatus, &protocol.SubagentStatus{ParentAgentID: "agent-p"})
	var status protocol.SubagentStatusData
	data("status", &status)
	if len(status.Jobs) != 3 || status.Jobs[0].JobID != "job-4" || len(status.Agents) != 3 {
		t.Fatalf("status of agent-p = %+v; want its 3 jobs newest first, 3 agents", status)
	}
	h.send("stop", protocol.TypeSubagentStop, &protocol.SubagentStop{ParentAgentID: "agent-p", Handle: "job-3"})
	var stop protocol.SubagentStopData
	data("stop", &stop)
	if stop.JobID != "job-3" || len(stop.Cancelled) != 0 {
		t.Fatalf("stop of a finished job = %+v; want idempotent, nothing cancelled", stop)
	}
	// Another parent's finished job stays NOT_FOUND.
	h.send("theirs", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{"run-job-2"}})
	if r := h.responses("theirs")["theirs"]; r.Error == nil || r.Error.Code != protocol.CodeNotFound {
		t.Fatalf("wait on another parent's run = %+v; want NOT_FOUND", r)
	}
}
