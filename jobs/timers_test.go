package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// routed is what a probe registry received: the routed message, and the
// sender to answer.
type routed struct {
	agentID string
	msg     any
}

// probeRegistry plays the registry for the coordinator: it records every
// agent.Route and lets answer reply to it (on the probe's mailbox, so that
// the reply is queued for the coordinator before the test hears of it).
func probeRegistry(got chan<- routed, answer func(c actor.Context, m *agent.Route)) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*agent.Route); ok {
			if answer != nil {
				answer(c, m)
			}
			got <- routed{agentID: m.AgentID, msg: m.Msg}
		}
	})
}

func recvRouted[T any](t *testing.T, ch <-chan routed) (routed, T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	for {
		select {
		case r := <-ch:
			if m, ok := r.msg.(T); ok {
				return r, m
			}
		case <-ctx.Done():
			var zero T
			t.Fatalf("no %T routed", zero)
			return routed{}, zero
		}
	}
}

func waitPending(t *testing.T, clk *clock.Manual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	if err := clk.WaitPending(ctx, n); err != nil {
		t.Fatalf("%d timers never armed (%d are)", n, clk.Pending())
	}
}

func openTestStore(t *testing.T) *store.Store {
	t.Helper()
	st := openStoreAt(t, filepath.Join(t.TempDir(), "shard.db"), store.Options{})
	t.Cleanup(func() { st.Close() })
	return st
}

// A wait's timeout is a timer of the injected clock: the wait is answered
// timed_out when the clock passes it, not before, and the run goes on.
func TestWaitTimeoutFiresOnTheClock(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	routes := make(chan routed, 100)
	h := startCoordinatorWith(t, st, probeRegistry(routes, nil), clk, Limits{})
	h.create("c", &protocol.SubagentCreate{ParentAgentID: "agent-p", Name: "t", Task: taskMarker})
	job := createdOf(t, h.responses("c")["c"])
	recvRouted[*agent.LeaseStart](t, routes) // the run started and stays starting

	timeout := 5.0
	h.send("w", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{job.JobID}, Timeout: &timeout})
	waitPending(t, clk, 1)
	if n := clk.Advance(4 * time.Second); n != 0 {
		t.Fatalf("%d timers fired before the timeout", n)
	}
	if n := clk.Advance(time.Second); n != 1 {
		t.Fatalf("%d timers fired at the timeout, want 1", n)
	}
	r := h.responses("w")["w"]
	var d protocol.SubagentWaitData
	if !r.Success || json.Unmarshal(r.Data, &d) != nil {
		t.Fatalf("wait response = %+v", r)
	}
	if !d.TimedOut || len(d.Runs) != 1 || d.Runs[0].State != protocol.RunStarting {
		t.Fatalf("wait after its timeout = %+v, want timed out with the run still starting", d)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers pending after the wait was answered", clk.Pending())
	}
}

// A wait answered by its runs stops its timer.
func TestWaitAnsweredStopsItsTimer(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	routes := make(chan routed, 100)
	h := startCoordinatorWith(t, st, probeRegistry(routes, nil), clk, Limits{})
	h.create("c", &protocol.SubagentCreate{ParentAgentID: "agent-p", Name: "t", Task: taskMarker})
	job := createdOf(t, h.responses("c")["c"])
	_, start := recvRouted[*agent.LeaseStart](t, routes)

	timeout := 3600.0
	h.send("w", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{job.JobID}, Timeout: &timeout})
	waitPending(t, clk, 1)
	h.sys.Root.Send(start.Holder, &agent.LeaseStarted{RunID: start.RunID, AgentID: job.Runs[0].AgentID})
	h.sys.Root.Send(start.Holder, &agent.LeaseEnded{RunID: start.RunID, AgentID: job.Runs[0].AgentID, Completed: true, FinalText: "done"})
	r := h.responses("w")["w"]
	var d protocol.SubagentWaitData
	if !r.Success || json.Unmarshal(r.Data, &d) != nil || d.TimedOut || d.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("wait = %+v %+v, want answered by the completed run", r, d)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers pending after the wait was answered", clk.Pending())
	}
}

// A run's deadline is a timer of the injected clock: when it fires the
// child is stopped and the run ends timed_out; a run that ends first stops
// its deadline.
func TestRunDeadlineOnTheClock(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	routes := make(chan routed, 100)
	h := startCoordinatorWith(t, st, probeRegistry(routes, nil), clk, Limits{RunTimeout: time.Minute})
	h.create("c", &protocol.SubagentCreate{ParentAgentID: "agent-p", Strategy: protocol.StrategyParallel,
		Tasks: []protocol.TaskSpec{{Name: "slow", Task: taskMarker}, {Name: "quick", Task: taskMarker}}})
	job := createdOf(t, h.responses("c")["c"])
	starts := map[string]*agent.LeaseStart{}
	for range 2 {
		_, s := recvRouted[*agent.LeaseStart](t, routes)
		starts[s.RunID] = s
	}
	waitPending(t, clk, 2)
	slow, quick := job.Runs[0], job.Runs[1]
	h.send("w", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{quick.RunID}})
	for _, r := range job.Runs {
		h.sys.Root.Send(starts[r.RunID].Holder, &agent.LeaseStarted{RunID: r.RunID, AgentID: r.AgentID})
	}
	h.sys.Root.Send(starts[quick.RunID].Holder, &agent.LeaseEnded{RunID: quick.RunID, AgentID: quick.AgentID, Completed: true})
	if r := h.responses("w")["w"]; !r.Success {
		t.Fatalf("wait for the quick run = %+v", r)
	}
	if clk.Pending() != 1 {
		t.Fatalf("%d timers pending after the quick run ended, want 1 (the slow run's deadline)", clk.Pending())
	}
	if n := clk.Advance(time.Minute); n != 1 {
		t.Fatalf("%d timers fired at the deadline, want 1", n)
	}
	r, stop := recvRouted[*agent.LeaseStop](t, routes)
	if stop.RunID != slow.RunID || r.agentID != slow.AgentID {
		t.Fatalf("deadline stopped %s of %s, want %s of %s", stop.RunID, r.agentID, slow.RunID, slow.AgentID)
	}
	h.send("w2", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{slow.RunID}})
	h.sys.Root.Send(starts[slow.RunID].Holder, &agent.LeaseEnded{RunID: slow.RunID, AgentID: slow.AgentID, Cancelled: true, StopStage: "abort"})
	var d protocol.SubagentWaitData
	if r := h.responses("w2")["w2"]; !r.Success || json.Unmarshal(r.Data, &d) != nil || d.Runs[0].State != protocol.RunTimedOut {
		t.Fatalf("slow run after its deadline = %+v %+v, want timed_out", r, d)
	}
}

// An undelivered completion report is retried on the clock's timer (one
// retry pending however many failed), and forgotten once delivered.
func TestReportRetryOnTheClock(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-parent")
	seedJob(t, st, "job-1", protocol.StrategyParallel,
		seedRun{id: "run-1", state: protocol.RunActive}, seedRun{id: "run-2", state: protocol.RunActive})
	if n, err := Reconcile(st, time.UnixMilli(5000), nil); err != nil || n != 2 {
		t.Fatalf("Reconcile = %d, %v", n, err)
	}
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	routes := make(chan routed, 100)
	var failing atomic.Bool
	failing.Store(true)
	reg := probeRegistry(routes, func(c actor.Context, m *agent.Route) {
		if in, ok := m.Msg.(*agent.Inject); ok {
			var err error
			if failing.Load() {
				err = errors.New("parent runtime is not ready")
			}
			c.Respond(&agent.Injected{Key: in.Key, Err: err})
		}
	})
	h := startCoordinatorWith(t, st, reg, clk, Limits{ReportRetry: 5 * time.Second})
	injected := func() map[string]bool {
		keys := map[string]bool{}
		for range 2 {
			r, in := recvRouted[*agent.Inject](t, routes)
			if r.agentID != "agent-parent" || !strings.HasPrefix(in.Text, "[subagent report] run "+in.Key+" ") {
				t.Fatalf("inject %+v to %s", in, r.agentID)
			}
			keys[in.Key] = true
		}
		return keys
	}
	// settle waits until the coordinator handled what the probe answered
	// (queued before the test heard of it) and the goroutines it started.
	settle := func(id string) {
		h.send(id, protocol.TypeJobsList, &protocol.JobsList{})
		h.responses(id)
		h.group.Wait()
	}
	if keys := injected(); !keys["run-1"] || !keys["run-2"] {
		t.Fatalf("delivered at load: %v", keys)
	}
	settle("l1")
	if n := clk.Pending(); n != 1 {
		t.Fatalf("%d retry timers pending after two failed deliveries, want 1", n)
	}
	if reps, err := st.Reports(); err != nil || len(reps) != 2 {
		t.Fatalf("reports after failed deliveries = %v, %v; want both kept", reps, err)
	}
	failing.Store(false)
	if n := clk.Advance(4 * time.Second); n != 0 {
		t.Fatalf("%d timers fired before the retry interval", n)
	}
	if n := clk.Advance(time.Second); n != 1 {
		t.Fatalf("%d timers fired at the retry interval, want 1", n)
	}
	if keys := injected(); !keys["run-1"] || !keys["run-2"] {
		t.Fatalf("retried: %v", keys)
	}
	settle("l2")
	if reps, err := st.Reports(); err != nil || len(reps) != 0 {
		t.Fatalf("reports after delivery = %v, %v; want none", reps, err)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after every report was delivered", n)
	}
}

// Once the daemon closed the goroutine group, a create is refused (nothing
// is written) and answered CONFLICT, not left unanswered; its aliases are
// free again.
func TestCreateRefusedOnceTheGroupIsClosed(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	h := startCoordinator(t, st)
	h.group.Close()
	h.create("c", &protocol.SubagentCreate{ParentAgentID: "agent-p", RequestID: "req", Name: "t", Task: taskMarker})
	h.create("c2", &protocol.SubagentCreate{ParentAgentID: "agent-p", RequestID: "req", Name: "t", Task: taskMarker})
	got := h.responses("c", "c2")
	for _, id := range []string{"c", "c2"} {
		if r := got[id]; r.Success || r.Error == nil || r.Error.Code != protocol.CodeConflict {
			t.Fatalf("create %s after the group closed = %+v, want CONFLICT", id, r)
		}
	}
	if all, err := st.Jobs(); err != nil || len(all) != 0 {
		t.Fatalf("stored %d jobs, %v", len(all), err)
	}
}

// A stop that reaches a job in the moment it ends is still answered
// (every command gets exactly one response): here the chain's active step
// ends and a second subagent.stop follows at once, before the job actor
// has gone.
func TestStopRacingTheJobsEndIsAnswered(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			st := openTestStore(t)
			putParent(t, st, "agent-p")
			routes := make(chan routed, 100)
			h := startCoordinatorWith(t, st, probeRegistry(routes, nil), nil, Limits{})
			h.create("c", &protocol.SubagentCreate{ParentAgentID: "agent-p", Strategy: protocol.StrategyChain,
				Tasks: []protocol.TaskSpec{{Name: "one", Task: taskMarker}, {Name: "two", Task: taskMarker}}})
			job := createdOf(t, h.responses("c")["c"])
			_, start := recvRouted[*agent.LeaseStart](t, routes)
			first := job.Runs[0]
			h.sys.Root.Send(start.Holder, &agent.LeaseStarted{RunID: first.RunID, AgentID: first.AgentID})
			h.send("s1", protocol.TypeSubagentStop, &protocol.SubagentStop{ParentAgentID: "agent-p", Handle: job.JobID})
			if r := h.responses("s1")["s1"]; !r.Success {
				t.Fatalf("first stop = %+v", r)
			}
			recvRouted[*agent.LeaseStop](t, routes)
			// The step ends (the job becomes terminal) and a second stop
			// is on its way at the same moment.
			h.sys.Root.Send(start.Holder, &agent.LeaseEnded{RunID: first.RunID, AgentID: first.AgentID, Cancelled: true, StopStage: "abort"})
			h.send("s2", protocol.TypeSubagentStop, &protocol.SubagentStop{ParentAgentID: "agent-p", Handle: job.JobID})
			if r := h.responses("s2")["s2"]; !r.Success {
				t.Fatalf("second stop = %+v", r)
			}
		})
	}
}

// A stop the child's escalation carries out is visible while it runs: each
// stage the agent reports (LeaseStopping) is recorded on the live run, with
// a request time even for a stop the job did not ask for (a deadline), so
// jobs.list --stuck finds a run whose stop takes too long; the stage the
// run ended with is the one that ended the process (kill), not the first.
func TestStopStageDuringTheEscalation(t *testing.T) {
	st := openTestStore(t)
	putParent(t, st, "agent-p")
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	routes := make(chan routed, 100)
	h := startCoordinatorWith(t, st, probeRegistry(routes, nil), clk, Limits{})
	h.create("c", &protocol.SubagentCreate{ParentAgentID: "agent-p", Name: "hung", Task: taskMarker})
	job := createdOf(t, h.responses("c")["c"])
	_, start := recvRouted[*agent.LeaseStart](t, routes)
	run := job.Runs[0]
	h.sys.Root.Send(start.Holder, &agent.LeaseStarted{RunID: run.RunID, AgentID: run.AgentID})
	h.sys.Root.Send(start.Holder, &agent.LeaseStopping{RunID: run.RunID, AgentID: run.AgentID, Stage: "abort"})
	h.sys.Root.Send(start.Holder, &agent.LeaseStopping{RunID: run.RunID, AgentID: run.AgentID, Stage: "term"})
	// A barrier: the job actor answers this (idempotent) stop after it
	// handled the stages sent before, so the coordinator has heard of them.
	h.send("s", protocol.TypeSubagentStop, &protocol.SubagentStop{ParentAgentID: "agent-p", Handle: job.JobID})
	h.responses("s")
	clk.Advance(time.Minute)

	h.send("l", protocol.TypeJobsList, &protocol.JobsList{Stuck: true})
	var list protocol.JobsListData
	if r := h.responses("l")["l"]; !r.Success || json.Unmarshal(r.Data, &list) != nil {
		t.Fatalf("jobs.list = %+v", r)
	}
	if len(list.Jobs) != 1 || len(list.Jobs[0].Runs) != 1 {
		t.Fatalf("jobs.list --stuck = %+v, want the stopping run's job", list)
	}
	if r := list.Jobs[0].Runs[0]; r.State != protocol.RunActive || r.StopStage != "term" || r.StopRequestedAt == 0 || !r.Stuck {
		t.Fatalf("stopping run = %+v, want active, stage term, stuck", r)
	}

	h.send("w", protocol.TypeSubagentWait, &protocol.SubagentWait{ParentAgentID: "agent-p", Handles: []string{run.RunID}})
	h.sys.Root.Send(start.Holder, &agent.LeaseEnded{RunID: run.RunID, AgentID: run.AgentID, Cancelled: true, StopStage: "kill", Error: "runtime exited (signal: killed)"})
	if r := h.responses("w")["w"]; !r.Success {
		t.Fatalf("wait = %+v", r)
	}
	got, err := st.GetJob(job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Runs[0]; r.State != protocol.RunCancelled || r.StopStage != "kill" {
		t.Fatalf("ended run = %+v, want cancelled at stage kill", r)
	}
}
