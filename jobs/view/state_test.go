package view

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// allRunStates lists every RunState of docs/protocol.md §11.2.
var allRunStates = []protocol.RunState{
	protocol.RunQueued, protocol.RunStarting, protocol.RunActive,
	protocol.RunCompleted, protocol.RunFailed, protocol.RunTimedOut,
	protocol.RunCancelled, protocol.RunInterrupted,
}

// taskMarker stands for private task text: it must never reach a
// projection, a report or its text.
const taskMarker = "PRIVATE-TASK-7f3a9c: rm -rf the secret plans"

func TestCanTransitionTable(t *testing.T) {
	// The run lifecycle (docs/protocol.md §10.3, §11.2, package doc):
	// everything not listed is refused, including self-transitions and any
	// move out of a terminal state.
	allowed := map[protocol.RunState][]protocol.RunState{
		protocol.RunQueued: {protocol.RunStarting, protocol.RunCancelled, protocol.RunInterrupted},
		protocol.RunStarting: {protocol.RunActive, protocol.RunFailed, protocol.RunCancelled,
			protocol.RunTimedOut, protocol.RunInterrupted},
		protocol.RunActive: {protocol.RunCompleted, protocol.RunFailed, protocol.RunTimedOut,
			protocol.RunCancelled, protocol.RunInterrupted},
	}
	count := 0
	for _, from := range allRunStates {
		for _, to := range allRunStates {
			want := false
			for _, ok := range allowed[from] {
				want = want || ok == to
			}
			if want {
				count++
			}
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %t, want %t", from, to, got, want)
			}
		}
	}
	if count != 13 {
		t.Fatalf("table lists %d allowed transitions, want 13", count)
	}
}

func TestCanTransitionTerminalAndUnknown(t *testing.T) {
	for _, s := range allRunStates {
		if CanTransition(s, s) {
			t.Errorf("self-transition %s allowed", s)
		}
		if s.Terminal() {
			for _, to := range allRunStates {
				if CanTransition(s, to) {
					t.Errorf("terminal %s may move to %s", s, to)
				}
			}
		}
		if CanTransition("", s) || CanTransition(s, "") || CanTransition("paused", s) || CanTransition(s, "paused") {
			t.Errorf("a transition between %s and an unknown state is allowed", s)
		}
	}
}

func runsIn(states ...protocol.RunState) []store.Run {
	runs := make([]store.Run, len(states))
	for i, s := range states {
		runs[i] = store.Run{RunID: "run-" + string(rune('a'+i)), Index: i, State: s}
	}
	return runs
}

func TestDeriveState(t *testing.T) {
	const (
		q   = protocol.RunQueued
		st  = protocol.RunStarting
		act = protocol.RunActive
		ok  = protocol.RunCompleted
		bad = protocol.RunFailed
		to  = protocol.RunTimedOut
		can = protocol.RunCancelled
		irq = protocol.RunInterrupted
	)
	tests := []struct {
		name string
		runs []protocol.RunState
		want protocol.JobState
	}{
		// No job has zero runs (store.CreateJob refuses it). Vacuously every
		// run is terminal, so it derives completed, consistent with Terminal.
		{"empty", nil, protocol.JobCompleted},
		{"one queued", []protocol.RunState{q}, protocol.JobQueued},
		{"all queued", []protocol.RunState{q, q, q}, protocol.JobQueued},
		{"starting", []protocol.RunState{st}, protocol.JobRunning},
		{"active", []protocol.RunState{act}, protocol.JobRunning},
		{"active and queued", []protocol.RunState{act, q}, protocol.JobRunning},
		{"starting among terminal", []protocol.RunState{ok, st, bad}, protocol.JobRunning},
		{"completed then queued (chain between steps)", []protocol.RunState{ok, q, q}, protocol.JobRunning},
		{"failed and queued", []protocol.RunState{bad, q}, protocol.JobRunning},
		{"cancelled and queued", []protocol.RunState{can, q}, protocol.JobRunning},
		{"one completed", []protocol.RunState{ok}, protocol.JobCompleted},
		{"all completed", []protocol.RunState{ok, ok, ok}, protocol.JobCompleted},
		{"one failed", []protocol.RunState{ok, bad, ok}, protocol.JobFailed},
		{"timed out counts as failed", []protocol.RunState{ok, to}, protocol.JobFailed},
		{"interrupted counts as failed", []protocol.RunState{irq, ok}, protocol.JobFailed},
		{"failure wins over cancel", []protocol.RunState{can, bad, can}, protocol.JobFailed},
		{"timed out wins over cancel", []protocol.RunState{can, to}, protocol.JobFailed},
		{"interrupted chain", []protocol.RunState{ok, irq, can}, protocol.JobFailed},
		{"one cancelled", []protocol.RunState{can}, protocol.JobCancelled},
		{"cancelled without failures", []protocol.RunState{ok, can, ok}, protocol.JobCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := runsIn(tt.runs...)
			if got := DeriveState(runs); got != tt.want {
				t.Errorf("DeriveState(%v) = %s, want %s", tt.runs, got, tt.want)
			}
			j := &store.Job{Runs: runs}
			final := tt.want == protocol.JobCompleted || tt.want == protocol.JobFailed || tt.want == protocol.JobCancelled
			if Terminal(j) != final {
				t.Errorf("Terminal(%v) = %t, but DeriveState is %s", tt.runs, Terminal(j), tt.want)
			}
		})
	}
}

// sampleJob is a job whose every field is set, with the task marker in
// every run's private task.
func sampleJob(strategy protocol.JobStrategy, states ...protocol.RunState) store.Job {
	j := store.Job{
		JobID: "job-01", ParentAgentID: "agent-parent", Strategy: strategy, RequestID: "req-1",
		StoppedAt: 1500, CreatedAt: 1000, EndedAt: 0,
	}
	for i, s := range states {
		id := string(rune('a' + i))
		j.Runs = append(j.Runs, store.Run{
			RunID: "run-" + id, Index: i, Name: "step " + id, AgentID: "agent-" + id, Alias: "alias-" + id,
			Task: taskMarker + " #" + id, State: s, TimeoutMs: 60000, Deadline: 61000 + int64(i),
			QueuedAt: 1000, StartedAt: 1001 + int64(i), EndedAt: 2000 + int64(i),
			FinalText: "final answer " + id, Usage: &protocol.RunUsage{Input: 10, Output: int64(20 + i)},
			Error: "error " + id, StopRequestedAt: 1500, StopStage: "abort", ExitStatus: "exit 0",
		})
	}
	return j
}

func TestRunSnapshot(t *testing.T) {
	j := sampleJob(protocol.StrategySingle, protocol.RunCompleted)
	r := &j.Runs[0]
	want := protocol.RunSnapshot{
		JobID: "job-01", RunID: "run-a", Index: 0, Name: "step a", AgentID: "agent-a", Alias: "alias-a",
		DefinitionName: "step a", DisplayName: "step a · alias-a",
		State: protocol.RunCompleted, Deadline: 61000, FinalText: "final answer a",
		Usage: &protocol.RunUsage{Input: 10, Output: 20}, Error: "error a", StartedAt: 1001, EndedAt: 2000,
	}
	if got := RunSnapshot(&j, r, true); !reflect.DeepEqual(got, want) {
		t.Errorf("owner snapshot =\n%+v\nwant\n%+v", got, want)
	}
	want.FinalText = ""
	if got := RunSnapshot(&j, r, false); !reflect.DeepEqual(got, want) {
		t.Errorf("non-owner snapshot =\n%+v\nwant\n%+v", got, want)
	}
}

func TestSnapshotsNeverCarryTaskText(t *testing.T) {
	for _, strategy := range []protocol.JobStrategy{protocol.StrategySingle, protocol.StrategyParallel, protocol.StrategyChain} {
		j := sampleJob(strategy, protocol.RunCompleted, protocol.RunActive, protocol.RunQueued)
		for _, owner := range []bool{true, false} {
			js := JobSnapshot(&j, owner)
			var blobs [][]byte
			for i := range j.Runs {
				b, err := json.Marshal(RunSnapshot(&j, &j.Runs[i], owner))
				if err != nil {
					t.Fatal(err)
				}
				blobs = append(blobs, b)
			}
			b, err := json.Marshal(js)
			if err != nil {
				t.Fatal(err)
			}
			blobs = append(blobs, b)
			for _, b := range blobs {
				s := string(b)
				if strings.Contains(s, "PRIVATE-TASK") || strings.Contains(s, `"task`) {
					t.Errorf("%s owner=%t: snapshot carries task text: %s", strategy, owner, s)
				}
				if strings.Contains(s, "final answer") != owner {
					t.Errorf("%s owner=%t: final_text presence wrong: %s", strategy, owner, s)
				}
			}
		}
	}
}

func TestJobSnapshot(t *testing.T) {
	j := sampleJob(protocol.StrategyParallel, protocol.RunCompleted, protocol.RunFailed)
	j.EndedAt = 3000
	got := JobSnapshot(&j, true)
	if got.JobID != j.JobID || got.ParentAgentID != j.ParentAgentID || got.Strategy != j.Strategy ||
		got.StoppedAt != 1500 || got.CreatedAt != 1000 || got.EndedAt != 3000 {
		t.Errorf("job fields not copied: %+v", got)
	}
	if got.State != protocol.JobFailed {
		t.Errorf("state = %s, want derived %s", got.State, protocol.JobFailed)
	}
	if got.ChainStep != nil {
		t.Errorf("parallel job has chain_step %d", *got.ChainStep)
	}
	if len(got.Runs) != 2 {
		t.Fatalf("runs = %+v", got.Runs)
	}
	for i := range j.Runs {
		if want := RunSnapshot(&j, &j.Runs[i], true); !reflect.DeepEqual(got.Runs[i], want) {
			t.Errorf("run %d = %+v, want %+v", i, got.Runs[i], want)
		}
		if got.Runs[i].FinalText == "" {
			t.Errorf("owner lost final_text of run %d", i)
		}
	}
	for i, r := range JobSnapshot(&j, false).Runs {
		if r.FinalText != "" {
			t.Errorf("non-owner sees final_text of run %d: %q", i, r.FinalText)
		}
	}
	// A job whose runs are nil still marshals "runs": [] on the wire.
	empty := JobSnapshot(&store.Job{JobID: "job-x", Strategy: protocol.StrategySingle}, true)
	if empty.Runs == nil {
		t.Error("runs is nil, want an empty slice")
	}
}

func TestJobSnapshotChainStep(t *testing.T) {
	const (
		q   = protocol.RunQueued
		act = protocol.RunActive
		ok  = protocol.RunCompleted
		bad = protocol.RunFailed
		can = protocol.RunCancelled
		irq = protocol.RunInterrupted
	)
	tests := []struct {
		name     string
		strategy protocol.JobStrategy
		runs     []protocol.RunState
		haltedBy string // a run id of the job, "" for none
		want     int    // -1: no chain_step
	}{
		{"not started", protocol.StrategyChain, []protocol.RunState{q, q, q}, "", 0},
		{"first step active", protocol.StrategyChain, []protocol.RunState{act, q, q}, "", 0},
		{"second step active", protocol.StrategyChain, []protocol.RunState{ok, act, q}, "", 1},
		{"between steps", protocol.StrategyChain, []protocol.RunState{ok, ok, q}, "", 2},
		{"halted by failure", protocol.StrategyChain, []protocol.RunState{ok, bad, can}, "run-b", 1},
		{"halted by first step", protocol.StrategyChain, []protocol.RunState{bad, can, can}, "run-a", 0},
		{"halted by restart", protocol.StrategyChain, []protocol.RunState{ok, irq, can}, "run-b", 1},
		{"all completed", protocol.StrategyChain, []protocol.RunState{ok, ok, ok}, "", -1},
		{"parallel never has one", protocol.StrategyParallel, []protocol.RunState{ok, act, q}, "", -1},
		{"single never has one", protocol.StrategySingle, []protocol.RunState{act}, "", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := sampleJob(tt.strategy, tt.runs...)
			j.HaltedBy = tt.haltedBy
			got := JobSnapshot(&j, false).ChainStep
			switch {
			case tt.want < 0 && got != nil:
				t.Errorf("chain_step = %d, want none", *got)
			case tt.want >= 0 && got == nil:
				t.Errorf("chain_step missing, want %d", tt.want)
			case tt.want >= 0 && *got != tt.want:
				t.Errorf("chain_step = %d, want %d", *got, tt.want)
			}
		})
	}
}
