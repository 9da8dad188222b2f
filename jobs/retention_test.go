package jobs

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// retentionRegistry plays the registry for retention: every agent is
// stopped, and RemoveAgents deletes through the store (agent.remove's
// store checks).
func retentionRegistry(st *store.Store) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *registry.AgentStates:
			res := &registry.AgentStatesResult{}
			for _, id := range m.AgentIDs {
				res.Infos = append(res.Infos, protocol.AgentInfo{AgentID: id, RuntimeState: protocol.RuntimeStopped})
			}
			c.Respond(res)
		case *registry.RemoveAgents:
			res := &registry.RemoveAgentsResult{}
			for _, id := range m.AgentIDs {
				_, err := st.DeleteAgent(id)
				res.Data.Results = append(res.Data.Results, protocol.AgentRemoveResult{AgentID: id, Removed: err == nil})
			}
			c.Respond(res)
		}
	})
}

// putFinishedJob stores a completed single-run job under parent that
// ended at ended, with its child's manifest.
func putFinishedJob(t *testing.T, st *store.Store, id, parent string, ended time.Time) store.Job {
	t.Helper()
	j := store.Job{JobID: id, ParentAgentID: parent, Strategy: protocol.StrategySingle, CreatedAt: ended.UnixMilli() - 1000, EndedAt: ended.UnixMilli(),
		Runs: []store.Run{{RunID: "run-" + id, Name: "t", AgentID: "agent-" + id, State: protocol.RunCompleted, EndedAt: ended.UnixMilli()}}}
	child := store.Agent{AgentID: "agent-" + id, SessionID: "sess-" + id, Cwd: "/w", ParentAgentID: parent, Depth: 1}
	if _, err := st.CreateJob(j, []store.Agent{child}, nil); err != nil {
		t.Fatal(err)
	}
	return j
}

// The jobs.retention sweep runs at start and then on the coordinator's
// clock: each pass removes the finished jobs older than the retention,
// with their children, and nothing younger.
func TestRetentionSweepOnTheClock(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	putFinishedJob(t, st, "job-old", "agent-p", clk.Now().Add(-2*time.Hour))
	putFinishedJob(t, st, "job-young", "agent-p", clk.Now().Add(-10*time.Minute))
	// Old enough but not finished: a report not delivered (the probe never
	// accepts it), and a run not terminal.
	pending := putFinishedJob(t, st, "job-pending", "agent-p", clk.Now().Add(-2*time.Hour))
	if _, err := st.UpdateJob(pending.JobID, func(j *store.Job) ([]store.Report, error) {
		return []store.Report{{RunID: j.Runs[0].RunID, JobID: j.JobID, ParentAgentID: "agent-p", AgentID: j.Runs[0].AgentID, State: protocol.RunCompleted}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	open := store.Job{JobID: "job-open", ParentAgentID: "agent-p", Strategy: protocol.StrategySingle, CreatedAt: clk.Now().Add(-3 * time.Hour).UnixMilli(),
		Runs: []store.Run{{RunID: "run-open", Name: "t", AgentID: "agent-open", State: protocol.RunQueued}}}
	if _, err := st.CreateJob(open, []store.Agent{{AgentID: "agent-open", SessionID: "sess-open", Cwd: "/w", ParentAgentID: "agent-p", Depth: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	startCoordinatorDeps(t, st, retentionRegistry(st), clk, Limits{}, func(d *Deps) { d.Retention = time.Hour })

	waitPending(t, clk, 1) // the first sweep ended and armed the next
	gone := func(id string) bool {
		_, err := st.GetJob(id)
		return errors.Is(err, store.ErrNotFound)
	}
	if !gone("job-old") {
		t.Fatal("the sweep at start kept a job that ended 2h ago (retention 1h)")
	}
	if _, err := st.GetAgent("agent-job-old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old job's child: %v; want it removed", err)
	}
	if gone("job-young") {
		t.Fatal("the sweep at start removed a job that ended 10 min ago")
	}
	if n := clk.Advance(time.Hour); n != 1 {
		t.Fatalf("%d timers fired after an hour, want the sweep's", n)
	}
	waitPending(t, clk, 1)
	if !gone("job-young") {
		t.Fatal("the hourly sweep kept a job that ended 70 min ago")
	}
	for _, id := range []string{"job-pending", "job-open"} {
		if gone(id) {
			t.Fatalf("the sweep removed %s, which is not finished", id)
		}
	}
	for _, id := range []string{"agent-p", "agent-job-pending", "agent-open"} {
		if _, err := st.GetAgent(id); err != nil {
			t.Fatalf("agent %s: %v; want it kept", id, err)
		}
	}
}

// With jobs.retention 0 (the default) no sweep runs and no timer is armed.
func TestRetentionOffByDefault(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	putFinishedJob(t, st, "job-old", "agent-p", clk.Now().Add(-1000*time.Hour))
	h := startCoordinatorWith(t, st, retentionRegistry(st), clk, Limits{})
	// A command answered after Started: the load (and any sweep) is done.
	h.send("l", protocol.TypeJobsList, &protocol.JobsList{})
	h.responses("l")
	if clk.Pending() != 0 {
		t.Fatalf("%d timers armed with retention off", clk.Pending())
	}
	if _, err := st.GetJob("job-old"); err != nil {
		t.Fatalf("job with retention off: %v; want it kept", err)
	}
}

// A jobs.prune while another is under way is CONFLICT, and the first one
// goes on to its answer. The registry holds the first prune at its live
// check until the second was answered.
func TestSecondPruneWhileOneRunsIsConflict(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	putFinishedJob(t, st, "job-old", "agent-p", clk.Now().Add(-2*time.Hour))
	asked := make(chan struct{})
	release := make(chan struct{})
	reg := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *registry.AgentStates:
			close(asked)
			<-release // holds the first prune at its live check
			res := &registry.AgentStatesResult{}
			for _, id := range m.AgentIDs {
				res.Infos = append(res.Infos, protocol.AgentInfo{AgentID: id, RuntimeState: protocol.RuntimeStopped})
			}
			c.Respond(res)
		case *registry.RemoveAgents:
			res := &registry.RemoveAgentsResult{}
			for _, id := range m.AgentIDs {
				_, err := st.DeleteAgent(id)
				res.Data.Results = append(res.Data.Results, protocol.AgentRemoveResult{AgentID: id, Removed: err == nil})
			}
			c.Respond(res)
		}
	})
	h := startCoordinatorWith(t, st, reg, clk, Limits{})
	h.send("first", protocol.TypeJobsPrune, &protocol.JobsPrune{OlderThanMs: time.Hour.Milliseconds()})
	<-asked
	h.send("second", protocol.TypeJobsPrune, &protocol.JobsPrune{OlderThanMs: time.Hour.Milliseconds(), DryRun: true})
	second := h.responses("second")["second"]
	if second.Error == nil || second.Error.Code != protocol.CodeConflict {
		t.Fatalf("second prune = %+v; want CONFLICT", second)
	}
	close(release)
	first := h.responses("first")["first"]
	var data protocol.JobsPruneData
	if first.Error != nil || json.Unmarshal(first.Data, &data) != nil {
		t.Fatalf("first prune = %+v", first)
	}
	if len(data.JobIDs) != 1 || data.JobIDs[0] != "job-old" || len(data.AgentIDs) != 1 || data.AgentIDs[0] != "agent-job-old" {
		t.Fatalf("first prune = %+v; want job-old and its child", data)
	}
}
