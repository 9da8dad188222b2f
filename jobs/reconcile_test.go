package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// openStore opens a real bbolt store in t.TempDir and, at cleanup, checks
// the file's consistency and closes it.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "shard.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("Check at cleanup: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// seedRun is one seeded run: its id and state, plus a stop request time.
type seedRun struct {
	id     string
	state  protocol.RunState
	stopAt int64
}

// seedJob stores a job of the given strategy; run i gets Index i, a task
// with the private marker, and start/end times fitting its state.
func seedJob(t *testing.T, st *store.Store, id string, strategy protocol.JobStrategy, runs ...seedRun) store.Job {
	t.Helper()
	j := store.Job{JobID: id, ParentAgentID: "agent-parent", Strategy: strategy, CreatedAt: 100}
	for i, r := range runs {
		sr := store.Run{
			RunID: r.id, Index: i, Name: "step-" + r.id, AgentID: "agent-" + r.id, Alias: "alias-" + r.id,
			Task: taskMarker, State: r.state, QueuedAt: 100, StopRequestedAt: r.stopAt,
		}
		if r.state != protocol.RunQueued {
			sr.StartedAt = 200
		}
		if r.state.Terminal() {
			sr.EndedAt = 300
			if r.state == protocol.RunCompleted {
				sr.FinalText = "done " + r.id
			} else {
				sr.Error = "earlier error of " + r.id
			}
		}
		j.Runs = append(j.Runs, sr)
	}
	if view.Terminal(&j) {
		j.EndedAt = 300
	}
	if _, err := st.CreateJob(j, nil, nil); err != nil {
		t.Fatal(err)
	}
	return j
}

func jobsByID(t *testing.T, st *store.Store) map[string]store.Job {
	t.Helper()
	all, err := st.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Job{}
	for _, j := range all {
		out[j.JobID] = j
	}
	return out
}

func reportsByRun(t *testing.T, st *store.Store) map[string]store.Report {
	t.Helper()
	all, err := st.Reports()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Report{}
	for _, r := range all {
		if _, dup := out[r.RunID]; dup {
			t.Errorf("two reports for run %s", r.RunID)
		}
		out[r.RunID] = r
	}
	return out
}

func TestReconcile(t *testing.T) {
	const (
		q   = protocol.RunQueued
		st0 = protocol.RunStarting
		act = protocol.RunActive
		ok  = protocol.RunCompleted
		bad = protocol.RunFailed
		can = protocol.RunCancelled
		irq = protocol.RunInterrupted
	)
	s := openStore(t)
	seeded := map[string]store.Job{}
	for _, j := range []store.Job{
		// Parallel: live runs end, the queued one stays queued to run later.
		seedJob(t, s, "job-1-parallel", protocol.StrategyParallel,
			seedRun{id: "run-p0", state: act}, seedRun{id: "run-p1", state: st0},
			seedRun{id: "run-p2", state: q}, seedRun{id: "run-p3", state: ok},
			seedRun{id: "run-p4", state: act, stopAt: 150}),
		// Chain at its second step: step 0 stays completed, step 1 is
		// interrupted, steps 2 and 3 are cancelled and never prompted.
		seedJob(t, s, "job-2-chain", protocol.StrategyChain,
			seedRun{id: "run-c0", state: ok}, seedRun{id: "run-c1", state: act},
			seedRun{id: "run-c2", state: q}, seedRun{id: "run-c3", state: q}),
		// Chain whose starting first step had a stop requested: cancelled.
		seedJob(t, s, "job-3-chain-stopped", protocol.StrategyChain,
			seedRun{id: "run-s0", state: st0, stopAt: 150}, seedRun{id: "run-s1", state: q}),
		// Chain whose step had failed, but the daemon died before the rest
		// was cancelled (that is a second transaction).
		seedJob(t, s, "job-4-chain-half-halted", protocol.StrategyChain,
			seedRun{id: "run-h0", state: ok}, seedRun{id: "run-h1", state: bad}, seedRun{id: "run-h2", state: q}),
		// Untouched: a chain between two steps (the next step is still to
		// run), an all-queued parallel job and terminal jobs.
		seedJob(t, s, "job-5-chain-between", protocol.StrategyChain,
			seedRun{id: "run-b0", state: ok}, seedRun{id: "run-b1", state: q}),
		seedJob(t, s, "job-6-queued", protocol.StrategyParallel,
			seedRun{id: "run-q0", state: q}, seedRun{id: "run-q1", state: q}),
		seedJob(t, s, "job-7-done", protocol.StrategySingle, seedRun{id: "run-d0", state: ok}),
		seedJob(t, s, "job-8-done-chain", protocol.StrategyChain,
			seedRun{id: "run-e0", state: irq}, seedRun{id: "run-e1", state: can}),
	} {
		seeded[j.JobID] = j
	}

	now := time.UnixMilli(1_000_000)
	ms := now.UnixMilli()
	n, err := Reconcile(s, now, nil)
	if err != nil {
		t.Fatal(err)
	}

	// want: run id → state after reconciliation, with the expected error
	// substring; runs not listed must be exactly as seeded.
	type end struct {
		state protocol.RunState
		err   string
	}
	ended := map[string]end{
		"run-p0": {irq, "daemon restart"},
		"run-p1": {irq, "daemon restart"},
		"run-p4": {can, "restarted before the stop finished"},
		"run-c1": {irq, "daemon restart"},
		"run-c2": {can, "chain halted by run-c1"},
		"run-c3": {can, "chain halted by run-c1"},
		"run-s0": {can, "restarted before the stop finished"},
		"run-s1": {can, "chain halted by run-s0"},
		"run-h2": {can, "chain halted by run-h1"},
	}
	if n != len(ended) {
		t.Errorf("Reconcile ended %d runs, want %d", n, len(ended))
	}
	wantHalted := map[string]string{
		"job-2-chain": "run-c1", "job-3-chain-stopped": "run-s0", "job-4-chain-half-halted": "run-h1",
	}
	wantJobEnded := map[string]bool{"job-2-chain": true, "job-3-chain-stopped": true, "job-4-chain-half-halted": true}
	wantState := map[string]protocol.JobState{
		"job-1-parallel": protocol.JobRunning, "job-2-chain": protocol.JobFailed,
		"job-3-chain-stopped": protocol.JobCancelled, "job-4-chain-half-halted": protocol.JobFailed,
		"job-5-chain-between": protocol.JobRunning, "job-6-queued": protocol.JobQueued,
		"job-7-done": protocol.JobCompleted, "job-8-done-chain": protocol.JobFailed,
	}

	after := jobsByID(t, s)
	if len(after) != len(seeded) {
		t.Fatalf("%d jobs after reconciliation, want %d", len(after), len(seeded))
	}
	for id, before := range seeded {
		got := after[id]
		if g := view.DeriveState(got.Runs); g != wantState[id] {
			t.Errorf("%s derives %s, want %s", id, g, wantState[id])
		}
		if got.HaltedBy != wantHalted[id] {
			t.Errorf("%s halted_by = %q, want %q", id, got.HaltedBy, wantHalted[id])
		}
		switch {
		case wantJobEnded[id] && got.EndedAt != ms:
			t.Errorf("%s ended_at = %d, want %d", id, got.EndedAt, ms)
		case !wantJobEnded[id] && got.EndedAt != before.EndedAt:
			t.Errorf("%s ended_at changed %d → %d", id, before.EndedAt, got.EndedAt)
		}
		if len(got.Runs) != len(before.Runs) {
			t.Fatalf("%s has %d runs, want %d", id, len(got.Runs), len(before.Runs))
		}
		for i, r := range got.Runs {
			want := before.Runs[i]
			if e, ok := ended[r.RunID]; ok {
				want.State, want.EndedAt = e.state, ms
				if !strings.Contains(r.Error, e.err) {
					t.Errorf("%s error = %q, want it to contain %q", r.RunID, r.Error, e.err)
				}
				want.Error = r.Error
			}
			if !reflect.DeepEqual(r, want) {
				t.Errorf("run %s =\n%+v\nwant\n%+v", r.RunID, r, want)
			}
		}
		if _, touched := wantHalted[id]; !touched && id != "job-1-parallel" && !reflect.DeepEqual(got, before) {
			t.Errorf("%s changed:\n%+v\nwas\n%+v", id, got, before)
		}
	}

	reports := reportsByRun(t, s)
	var gotIDs, wantIDs []string
	for id := range reports {
		gotIDs = append(gotIDs, id)
	}
	for id := range ended {
		wantIDs = append(wantIDs, id)
	}
	sort.Strings(gotIDs)
	sort.Strings(wantIDs)
	if !reflect.DeepEqual(gotIDs, wantIDs) {
		t.Fatalf("reports for %v, want one per ended run %v", gotIDs, wantIDs)
	}
	for id, rep := range reports {
		var job store.Job
		for _, j := range after {
			if j.Run(id) != nil {
				job = j
			}
		}
		r := job.Run(id)
		want := store.Report{
			RunID: id, JobID: job.JobID, ParentAgentID: "agent-parent", AgentID: r.AgentID, Alias: r.Alias,
			Name: r.Name, State: r.State, Error: r.Error, CreatedAt: ms,
		}
		if !reflect.DeepEqual(rep, want) {
			t.Errorf("report %s =\n%+v\nwant\n%+v", id, rep, want)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if text := ReportText(rep); strings.Contains(text, "PRIVATE-TASK") || strings.Contains(string(b), "PRIVATE-TASK") {
			t.Errorf("report %s carries the task: %s", id, b)
		}
	}

	// Again, later (the daemon died after reconciling, or reconciled twice):
	// nothing changes and no report is written twice.
	n, err = Reconcile(s, now.Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("second Reconcile ended %d runs, want 0", n)
	}
	if again := jobsByID(t, s); !reflect.DeepEqual(again, after) {
		t.Errorf("second Reconcile changed records:\n%+v\nwas\n%+v", again, after)
	}
	if again := reportsByRun(t, s); !reflect.DeepEqual(again, reports) {
		t.Errorf("second Reconcile changed reports:\n%+v\nwas\n%+v", again, reports)
	}

	// A delivered report is deleted; reconciling again does not resurrect it.
	if err := s.DeleteReport("run-p0"); err != nil {
		t.Fatal(err)
	}
	if _, err := Reconcile(s, now.Add(2*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if _, back := reportsByRun(t, s)["run-p0"]; back {
		t.Error("a delivered report came back after reconciliation")
	}
}

func TestReconcileEmptyStore(t *testing.T) {
	s := openStore(t)
	n, err := Reconcile(s, time.UnixMilli(5), nil)
	if err != nil || n != 0 {
		t.Fatalf("Reconcile on an empty store = %d, %v; want 0, nil", n, err)
	}
	if reps, err := s.Reports(); err != nil || len(reps) != 0 {
		t.Fatalf("reports = %v, %v", reps, err)
	}
}

// casRun is a compare-and-set transition through store.UpdateJob, as the
// job actor does it: the from-state is checked in the same transaction, and
// a terminal transition writes its report there too.
func casRun(s *store.Store, jobID, runID string, from, to protocol.RunState, now int64) error {
	_, err := s.UpdateJob(jobID, func(j *store.Job) ([]store.Report, error) {
		r := j.Run(runID)
		if r == nil {
			return nil, fmt.Errorf("%w: no run %s", store.ErrNotFound, runID)
		}
		if r.State != from || !view.CanTransition(from, to) {
			return nil, fmt.Errorf("%w: run %s is %s, not %s", store.ErrConflict, runID, r.State, from)
		}
		r.State = to
		if !to.Terminal() {
			return nil, nil
		}
		r.EndedAt = now
		endIfTerminal(j, now)
		return []store.Report{reportOf(j, r, now)}, nil
	})
	return err
}

func TestUpdateJobConflictWritesNothing(t *testing.T) {
	s := openStore(t)
	before := seedJob(t, s, "job-1", protocol.StrategySingle, seedRun{id: "run-1", state: protocol.RunActive})

	// fn mutates the record and returns a report, then reports a conflict:
	// neither the mutation nor the report may be stored.
	_, err := s.UpdateJob("job-1", func(j *store.Job) ([]store.Report, error) {
		r := j.Run("run-1")
		r.State, r.EndedAt, r.FinalText = protocol.RunCompleted, 999, "should not persist"
		j.EndedAt = 999
		rep := reportOf(j, r, 999)
		return []store.Report{rep}, fmt.Errorf("%w: moved on", store.ErrConflict)
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("UpdateJob error = %v, want ErrConflict", err)
	}
	if got, err := s.GetJob("job-1"); err != nil || !reflect.DeepEqual(got, before) {
		t.Errorf("job after a conflict = %+v, %v; want unchanged %+v", got, err, before)
	}
	if reps, err := s.Reports(); err != nil || len(reps) != 0 {
		t.Errorf("reports after a conflict = %+v, %v; want none", reps, err)
	}

	// A CAS from the wrong state is refused the same way.
	if err := casRun(s, "job-1", "run-1", protocol.RunQueued, protocol.RunStarting, 5); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CAS from a stale state = %v, want ErrConflict", err)
	}
	if got, _ := s.GetJob("job-1"); !reflect.DeepEqual(got, before) {
		t.Errorf("job after a refused CAS = %+v", got)
	}

	// The matching CAS commits the transition and its report together.
	if err := casRun(s, "job-1", "run-1", protocol.RunActive, protocol.RunCompleted, 7); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetJob("job-1")
	if err != nil || got.Runs[0].State != protocol.RunCompleted || got.Runs[0].EndedAt != 7 || got.EndedAt != 7 {
		t.Errorf("job after CAS = %+v, %v", got, err)
	}
	if reps, _ := s.Reports(); len(reps) != 1 || reps[0].RunID != "run-1" || reps[0].State != protocol.RunCompleted {
		t.Errorf("reports after CAS = %+v", reps)
	}
	// Terminal now: a late stop loses.
	if err := casRun(s, "job-1", "run-1", protocol.RunActive, protocol.RunCancelled, 9); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CAS on a terminal run = %v, want ErrConflict", err)
	}
}

// TestCASRaceOneWinner races completion, failure, timeout and stop of one
// active run: exactly one terminal transition commits, with one report.
func TestCASRaceOneWinner(t *testing.T) {
	s := openStore(t)
	seedJob(t, s, "job-1", protocol.StrategySingle, seedRun{id: "run-1", state: protocol.RunActive})
	targets := []protocol.RunState{
		protocol.RunCompleted, protocol.RunFailed, protocol.RunTimedOut, protocol.RunCancelled, protocol.RunInterrupted,
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []protocol.RunState
	)
	for round := 0; round < 4; round++ {
		for _, to := range targets {
			wg.Go(func() {
				err := casRun(s, "job-1", "run-1", protocol.RunActive, to, 1)
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, to)
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("CAS to %s: %v", to, err)
				}
			})
		}
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d transitions won (%v), want exactly 1", len(wins), wins)
	}
	j, err := s.GetJob("job-1")
	if err != nil || j.Runs[0].State != wins[0] {
		t.Errorf("stored state = %s (%v), want the winner %s", j.Runs[0].State, err, wins[0])
	}
	if reps, _ := s.Reports(); len(reps) != 1 || reps[0].State != wins[0] {
		t.Errorf("reports = %+v, want one for %s", reps, wins[0])
	}
}

// TestReconcileEndsAtTheLastSignOfLife: a run a crash left active ends at
// its agent's last sign of life, not at the restart, so the downtime is not
// counted as its time; with no sign it ends at the latest time it recorded;
// a sign from the future is clamped to now. The job ends with its last run.
func TestReconcileEndsAtTheLastSignOfLife(t *testing.T) {
	s := openStore(t)
	seedJob(t, s, "job-1", protocol.StrategyParallel,
		seedRun{id: "a", state: protocol.RunActive}, seedRun{id: "b", state: protocol.RunActive, stopAt: 250},
		seedRun{id: "c", state: protocol.RunStarting})
	signs := map[string]int64{"agent-a": 4_000, "agent-c": 99_999_999}
	now := time.UnixMilli(1_000_000)
	if _, err := Reconcile(s, now, func(r *store.Run) int64 { return signs[r.AgentID] }); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetJob("job-1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a": 4_000, "b": 250, "c": 1_000_000}
	for _, r := range got.Runs {
		if r.EndedAt != want[r.RunID] {
			t.Errorf("run %s ended_at = %d, want %d", r.RunID, r.EndedAt, want[r.RunID])
		}
	}
	if got.EndedAt != 1_000_000 {
		t.Errorf("job ended_at = %d, want its last run's", got.EndedAt)
	}
}

// TestReconcileLeavesAnywhereRuns: a run any node of a cluster may take
// did not run in this daemon; a restart leaves it as its record says
// (queued, starting or active), writes no report for it, and the job
// stays open for its follow (anywhere.go). A local run of another job is
// interrupted as before.
func TestReconcileLeavesAnywhereRuns(t *testing.T) {
	st := openStore(t)
	j := store.Job{JobID: "job-any", ParentAgentID: "agent-parent", Strategy: protocol.StrategyParallel, CreatedAt: 100}
	for i, s := range []protocol.RunState{protocol.RunQueued, protocol.RunStarting, protocol.RunActive} {
		id := fmt.Sprintf("run-any%d", i)
		j.Runs = append(j.Runs, store.Run{RunID: id, Index: i, Name: id, AgentID: "agent-" + id, Task: taskMarker,
			State: s, QueuedAt: 100, StartedAt: 200, Anywhere: true, Node: "n2"})
	}
	if _, err := st.CreateJobWorkspaces(j, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	seedJob(t, st, "job-local", protocol.StrategyParallel, seedRun{id: "run-local", state: protocol.RunActive})
	n, err := Reconcile(st, time.UnixMilli(1000), nil)
	if err != nil || n != 1 {
		t.Fatalf("Reconcile = %d, %v; want only the local run", n, err)
	}
	got, err := st.GetJob("job-any")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Runs {
		if r.State != j.Runs[i].State || r.EndedAt != 0 || r.Node != "n2" || !r.Anywhere {
			t.Fatalf("anywhere run after the restart: %+v", r)
		}
	}
	if got.EndedAt != 0 {
		t.Fatalf("the job of anywhere runs ended: %+v", got)
	}
	reports, err := st.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].RunID != "run-local" {
		t.Fatalf("reports = %+v, want the local run's only", reports)
	}
}
