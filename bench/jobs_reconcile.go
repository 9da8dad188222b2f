//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/jobs"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// reconcilePhase is one startup-reconciliation measurement.
type reconcilePhase struct {
	// Mix is the store's shape: "mixed" (half the jobs unfinished) or
	// "history" (1 job in 100 unfinished, the rest a finished history;
	// the open-jobs index makes its cost follow the unfinished jobs).
	Mix   string `json:"mix"`
	Runs  int    `json:"runs"`
	Jobs  int    `json:"jobs"`
	Ended int    `json:"ended"`
	// Seconds is jobs.Reconcile alone; OpenSeconds is store.Open before
	// it, LoadSeconds the coordinator's full read (Store.Jobs) after it.
	Seconds     float64 `json:"seconds"`
	OpenSeconds float64 `json:"open_seconds"`
	LoadSeconds float64 `json:"load_seconds"`
	BuildSecs   float64 `json:"build_seconds"`
	FileBytes   int64   `json:"file_bytes"`
}

const reconcileRunsPerJob = 4

// reconcilePhaseRun builds a store of n run records (jobs of 4 runs, built
// with fsync off), reopens it as the daemon would (fsync unless --no-sync)
// and times jobs.Reconcile, the function daemon.Start calls before it
// serves anything. The jobs take four shapes:
//
//	0 parallel  active, starting, completed, queued   → 2 runs end
//	1 chain     completed, active, queued, queued     → 3 runs end
//	2 parallel  completed, failed, completed, cancelled (terminal)
//	3 parallel  completed ×4 (terminal)
//
// In the "mixed" store they cycle 0,1,2,3; the "history" store has shapes
// 0 and 1 for the first two of every hundred jobs and 2 or 3 for the rest
// (see shapeOf).
func reconcilePhaseRun(o *options, mix string, n int) (reconcilePhase, error) {
	dir, err := tempDir()
	if err != nil {
		return reconcilePhase{}, err
	}
	path := filepath.Join(dir, "shard.db")
	ph := reconcilePhase{Mix: mix, Runs: n}
	t0 := time.Now()
	if ph.Jobs, err = buildJobStore(path, mix, n); err != nil {
		return ph, err
	}
	ph.BuildSecs = time.Since(t0).Seconds()

	t0 = time.Now()
	st, err := store.Open(path, store.Options{NoSync: o.noSync})
	if err != nil {
		return ph, err
	}
	defer st.Close()
	ph.OpenSeconds = time.Since(t0).Seconds()
	t0 = time.Now()
	ended, err := jobs.Reconcile(st, time.Now(), nil)
	if err != nil {
		return ph, err
	}
	ph.Seconds = time.Since(t0).Seconds()
	ph.Ended = ended
	t0 = time.Now()
	if _, err := st.Jobs(); err != nil {
		return ph, err
	}
	ph.LoadSeconds = time.Since(t0).Seconds()
	ph.FileBytes, _ = st.Size()
	if want := wantEnded(mix, ph.Jobs); ended != want {
		return ph, fmt.Errorf("reconcile ended %d runs, want %d", ended, want)
	}
	return ph, nil
}

// shapeOf is the shape (an index into buildJobStore's shapes) of job i.
func shapeOf(mix string, i int) int {
	if mix == "history" {
		if k := i % 100; k < 2 {
			return k // 0 or 1: unfinished
		}
		return 2 + i%2
	}
	return i % 4
}

// wantEnded is how many runs Reconcile must end in a store of jobs built by
// buildJobStore.
func wantEnded(mix string, jobs int) int {
	n := 0
	for i := range jobs {
		switch shapeOf(mix, i) {
		case 0:
			n += 2
		case 1:
			n += 3
		}
	}
	return n
}

// buildJobStore writes jobs of reconcileRunsPerJob runs, n runs in all
// (rounded up to whole jobs), with fsync off and from several goroutines
// so that group commit batches them.
func buildJobStore(path, mix string, n int) (int, error) {
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		return 0, err
	}
	const (
		q   = protocol.RunQueued
		s0  = protocol.RunStarting
		act = protocol.RunActive
		ok  = protocol.RunCompleted
		bad = protocol.RunFailed
		can = protocol.RunCancelled
	)
	shapes := []struct {
		strategy protocol.JobStrategy
		states   []protocol.RunState
	}{
		{protocol.StrategyParallel, []protocol.RunState{act, s0, ok, q}},
		{protocol.StrategyChain, []protocol.RunState{ok, act, q, q}},
		{protocol.StrategyParallel, []protocol.RunState{ok, bad, ok, can}},
		{protocol.StrategyParallel, []protocol.RunState{ok, ok, ok, ok}},
	}
	jobCount := (n + reconcileRunsPerJob - 1) / reconcileRunsPerJob
	task := strings.Repeat("Refactor the storage layer and report what changed. ", 4)
	final := strings.Repeat("Done: the storage layer now batches its commits. ", 6)
	const workers = 8
	var wg sync.WaitGroup
	errs := make([]error, workers)
	base := time.Now().UnixMilli() - 3_600_000
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobCount; i += workers {
				shape := shapes[shapeOf(mix, i)]
				parent := fmt.Sprintf("agent-bench-parent-%03d", i%100)
				j := store.Job{JobID: fmt.Sprintf("job-bench-%08d", i), ParentAgentID: parent, Strategy: shape.strategy, CreatedAt: base}
				terminal := true
				for k, state := range shape.states {
					r := store.Run{RunID: fmt.Sprintf("run-bench-%08d-%d", i, k), Index: k, Name: fmt.Sprintf("task-%d", k),
						AgentID: fmt.Sprintf("agent-bench-%08d-%d", i, k), Alias: fmt.Sprintf("alias-%d", k), Task: task,
						State: state, QueuedAt: base, TimeoutMs: 1_800_000}
					if state != q {
						r.StartedAt, r.Deadline = base+10, base+1_800_010
					}
					switch {
					case state == ok:
						r.EndedAt, r.FinalText = base+500, final
						r.Usage = &protocol.RunUsage{Input: 1200, Output: 300}
					case state.Terminal():
						r.EndedAt, r.Error = base+500, "sim provider failure"
					default:
						terminal = false
					}
					j.Runs = append(j.Runs, r)
				}
				if terminal {
					j.EndedAt = base + 500
				}
				if _, err := st.CreateJob(j, nil, nil); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	cerr := st.Close()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return jobCount, cerr
}
