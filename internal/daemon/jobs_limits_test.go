package daemon_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

func runState(t *testing.T, c *client.Conn, parent, run string) protocol.RunSnapshot {
	t.Helper()
	return waitRuns(t, c, parent, []string{run}, "", secs(0)).Runs[0]
}

func TestPerParentCapKeepsExcessRunsQueued(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Jobs.MaxActivePerParent = 1 })
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyParallel,
		Tasks: []protocol.TaskSpec{{Name: "a", Task: "sim: sleep 600\nsim: say a"}, {Name: "b", Task: "sim: say b"}}})
	first, second := job.Runs[0], job.Runs[1]
	waitRunState(t, c, first.RunID, protocol.RunActive)
	if s := runState(t, c, parent, second.RunID); s.State != protocol.RunQueued {
		t.Fatalf("second run under a per-parent cap of 1 = %s, want queued", s.State)
	}
	res := waitRuns(t, c, parent, []string{job.JobID}, "all", nil)
	if res.Runs[0].State != protocol.RunCompleted || res.Runs[1].State != protocol.RunCompleted {
		t.Fatalf("runs = %+v", res.Runs)
	}
	if res.Runs[1].StartedAt < res.Runs[0].EndedAt {
		t.Errorf("second run started (%d) before the first ended (%d)", res.Runs[1].StartedAt, res.Runs[0].EndedAt)
	}
}

func TestRunDeadlineEndsTimedOut(t *testing.T) {
	h := start(t, func(c *config.Config) {
		c.Jobs.RunTimeout = 300 * time.Millisecond
		c.Kill.AbortGrace = 300 * time.Millisecond
		c.Kill.TermGrace = 300 * time.Millisecond
	})
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "slow", Task: "sim: sleep 30000"})
	res := waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "", nil)
	r := res.Runs[0]
	if r.State != protocol.RunTimedOut || r.Deadline == 0 || r.Error == "" {
		t.Fatalf("run past its deadline = %+v", r)
	}
}

// TestStopEscalationMatrix: a child that honours abort ends cancelled at
// the abort stage and keeps its runtime; one that ignores abort and SIGTERM
// (sim: hang) is killed, and its process group is gone.
func TestStopEscalationMatrix(t *testing.T) {
	h := start(t, func(c *config.Config) {
		c.Kill.AbortGrace = 300 * time.Millisecond
		c.Kill.TermGrace = 300 * time.Millisecond
	})
	c := h.dial()
	parent := h.create(c, nil)
	for _, tc := range []struct {
		name, task     string
		wantStage      string
		runtimeSurvive bool
	}{
		{"honours abort", "sim: sleep 30000", "abort", true},
		{"ignores abort, honours SIGTERM", "sim: say hanging\nsim: hang abort", "term", false},
		{"ignores abort and SIGTERM", "sim: say hanging\nsim: hang", "kill", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "x", Task: tc.task})
			run := job.Runs[0]
			waitRunState(t, c, run.RunID, protocol.RunActive)
			if !tc.runtimeSurvive {
				// The child must have reached `hang` for the abort to be
				// really ignored. A hung runtime answers nothing, so there is
				// no event to wait for: the line it logs on entering the hang
				// (in its own log) is the signal.
				agentLog := filepath.Join(h.cfg.LogDir(), "agents", run.AgentID+".log")
				eventually(t, "the child reached sim: hang", func() bool {
					b, _ := os.ReadFile(agentLog)
					return bytes.Contains(b, []byte("sim: hang"))
				})
			}
			if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: run.RunID}, nil); err != nil {
				t.Fatal(err)
			}
			// Waits for the end, not for a time: the escalation takes
			// abort grace + term grace on a quiet machine, longer on a
			// loaded one; the stage reached is what the test asserts.
			res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
			if res.TimedOut || res.Runs[0].State != protocol.RunCancelled {
				t.Fatalf("stopped run = %+v", res)
			}
			if got := len(runtimePIDs(t, run.AgentID)); (got == 1) != tc.runtimeSurvive {
				t.Fatalf("runtime processes after stop: %d", got)
			}
			if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent, Targets: []string{run.RunID}}, nil); err != nil {
				t.Fatal(err)
			}
			if !logContains(h, "stage="+tc.wantStage) {
				t.Errorf("escalation never reached %s", tc.wantStage)
			}
		})
	}
}

func TestWaiterDisconnectCancelsOnlyTheWaiter(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "w", Task: "sim: sleep 500\nsim: say done"})
	w := h.dial()
	go func() {
		_, _ = w.Request(ctx(t), &protocol.SubagentWait{Header: hdr(protocol.TypeSubagentWait), ParentAgentID: parent, Handles: []string{job.JobID}})
	}()
	time.Sleep(50 * time.Millisecond) // let the wait register (the assertion below does not depend on it)
	w.Close()
	res := waitRuns(t, c, parent, []string{job.JobID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run after its waiter left = %+v", res.Runs[0])
	}
}

func TestConcurrentRelaunchesYieldExactlyOne(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "r", Task: "sim: say first"})
	waitRuns(t, c, parent, []string{job.JobID}, "", nil)

	var wg sync.WaitGroup
	results := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := h.dial()
			_, results[i] = cl.Request(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch),
				ParentAgentID: parent, Target: job.Runs[0].Alias, Task: "sim: sleep 300\nsim: say again"})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case protocol.CodeOf(err) != protocol.CodeConflict:
			t.Errorf("relaunch error %v, want CONFLICT", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent relaunches succeeded, want exactly 1", ok)
	}
}

func TestSubagentSteerIsStrict(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "s", Task: "sim: sleep 400\nsim: say base"})
	run := job.Runs[0]
	waitRunState(t, c, run.RunID, protocol.RunActive)
	var st protocol.SubagentSteerData
	if err := c.Call(ctx(t), &protocol.SubagentSteer{Header: hdr(protocol.TypeSubagentSteer), ParentAgentID: parent,
		Target: run.Alias, Message: "sim: say steered"}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "injected" || st.RunID != run.RunID || st.TurnID == "" || st.CorrelationID == "" {
		t.Fatalf("steer = %+v", st)
	}
	res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
	if !strings.Contains(res.Runs[0].FinalText, "steered") {
		t.Fatalf("steer did not reach the turn: final text %q", res.Runs[0].FinalText)
	}
	// Terminal now: strict steer refuses, and nothing becomes a new turn.
	if _, err := c.Request(ctx(t), &protocol.SubagentSteer{Header: hdr(protocol.TypeSubagentSteer), ParentAgentID: parent,
		Target: run.RunID, Message: "too late"}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("steer of a terminal run: %v, want CONFLICT", err)
	}
	// A human's steer of a leased child takes the strict path too.
	job2 := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "s2", Task: "sim: sleep 400\nsim: say base"})
	waitFor(t, c, func(e client.Event) bool {
		ev, ok := e.Msg.(*protocol.SubagentRunChanged)
		return ok && ev.RunID == job2.Runs[0].RunID && ev.State == protocol.RunActive
	})
	attach(t, c, job2.Runs[0].AgentID, "")
	if _, err := c.Request(ctx(t), &protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, AgentID: job2.Runs[0].AgentID}, Message: "sim: say human"}); err != nil {
		t.Fatalf("human steer of a leased child: %v", err)
	}
	res = waitRuns(t, c, parent, []string{job2.Runs[0].RunID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted || !strings.Contains(res.Runs[0].FinalText, "human") {
		t.Fatalf("run after human steer = %+v", res.Runs[0])
	}
}

func TestOperatorJobViews(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	p1, p2 := h.create(c, nil), h.create(c, nil)
	j1 := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: p1, Strategy: protocol.StrategyChain,
		Tasks: []protocol.TaskSpec{{Name: "a", Task: "sim: say a"}, {Name: "b", Task: "sim: fail no"}, {Name: "c", Task: "sim: say c"}}})
	j2 := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: p2, Name: "x", Task: "sim: say x"})
	waitRuns(t, c, p1, []string{j1.JobID}, "", nil)
	waitRuns(t, c, p2, []string{j2.JobID}, "", nil)

	var list protocol.JobsListData
	if err := c.Call(ctx(t), &protocol.JobsList{Header: hdr(protocol.TypeJobsList)}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 2 || list.Jobs[0].JobID != j2.JobID {
		t.Fatalf("jobs.list = %+v", list.Jobs)
	}
	if err := c.Call(ctx(t), &protocol.JobsList{Header: hdr(protocol.TypeJobsList), ParentAgentID: p1, State: protocol.JobFailed}, &list); err != nil || len(list.Jobs) != 1 {
		t.Fatalf("filtered list = %+v, %v", list.Jobs, err)
	}
	var show protocol.OpJob
	if err := c.Call(ctx(t), &protocol.JobsShow{Header: hdr(protocol.TypeJobsShow), Handle: j1.Runs[1].RunID}, &show); err != nil {
		t.Fatal(err)
	}
	if show.JobID != j1.JobID || show.HaltedBy != j1.Runs[1].RunID || show.ChainStep == nil || *show.ChainStep != 1 {
		t.Fatalf("jobs.show = %+v", show)
	}
	if show.Runs[2].State != protocol.RunCancelled || show.Runs[0].QueuedAt == 0 || show.Runs[0].FinalText != "" {
		t.Fatalf("operator runs = %+v", show.Runs)
	}
	if _, err := c.Request(ctx(t), &protocol.JobsShow{Header: hdr(protocol.TypeJobsShow), Handle: "job-nope"}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("unknown job: %v", err)
	}
}
