//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// killFlags bound the work of TestKillDaemonUnderLoad: a few runs at a
// time, the rest queued; a graceful stop does not wait for the long turns.
var killFlags = []string{
	"--jobs.max-active", "6", "--jobs.max-active-per-parent", "4", "--jobs.max-tasks", "8",
	"--shutdown.timeout", "2s", "--kill.abort-grace", "500ms", "--kill.term-grace", "500ms",
}

// TestKillDaemonUnderLoad SIGKILLs shardd at a random moment while clients
// create subagent jobs (single, parallel, chain; tasks that finish, sleep,
// or sit in a bash tool whose command outlives its shell) and prompt their
// parents, then restarts it, -rounds times. After every kill:
//
//   - bbolt's consistency check passes on the file the dead daemon left;
//   - every subagent.create that was acknowledged is there, with the runs
//     and child agents its response named (offline, and as the restarted
//     daemon reports them);
//   - reconciliation ended every run left starting or active (interrupted,
//     or cancelled if a stop was pending), cancelled the chain steps behind
//     it without ever starting them, and changed no terminal run;
//   - no process of the old generation survives: not the runtimes, nothing
//     in their process groups, not the tool subprocesses in sessions of
//     their own; everything of the home descends from the new daemon.
//
// At the end a graceful stop exits 0 and `shardctl doctor` finds the store
// consistent and no orphan.
func TestKillDaemonUnderLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 1))
	home := newHome(t)
	d := startDaemon(t, home, daemonOpts{flags: killFlags})
	var parents []string
	{
		c := d.dial()
		record(c)
		for range 2 {
			id, _ := createAgent(t, c)
			parents = append(parents, id)
		}
		c.Close()
	}
	acked := map[string]protocol.SubagentCreateData{} // job id → the create's response
	for round := 1; round <= *roundsFlag; round++ {
		load := startLoad(t, d, parents, rng.Uint64())
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		before := slices.DeleteFunc(procsWithEnv(d.homeEnv()), func(p procInfo) bool { return p.pid == d.pid() })
		var groups []int // the runtimes' process groups
		for _, p := range before {
			if st, err := procstat.Read(p.pid); err == nil && st.PPID == d.pid() {
				groups = append(groups, st.PGRP)
			}
		}
		d.sigkill()
		got := load.stop(t)
		for id, job := range got {
			acked[id] = job
		}
		t.Logf("round %d: killed shardd with %d processes of its home alive; %d creates acknowledged so far", round, len(before), len(acked))

		// The file the dead daemon left.
		onDisk := map[string]store.Job{}
		for _, j := range offlineJobs(t, home) {
			onDisk[j.JobID] = j
		}
		for id, job := range acked {
			checkAcked(t, round, job, onDisk[id])
		}

		d = startDaemon(t, home, daemonOpts{flags: killFlags})
		waitGone(t, fmt.Sprintf("round %d: processes of the killed daemon's generation", round), before)
		for _, g := range groups {
			if m := groupMembers(g); len(m) > 0 {
				t.Fatalf("round %d: process group %d of an old runtime still has members:%s", round, g, describe(m))
			}
		}
		if s := d.strays(); len(s) > 0 {
			t.Fatalf("round %d: processes of the home outside the new daemon:%s", round, describe(s))
		}
		checkReconciled(t, round, d, onDisk)
		c := d.dial()
		record(c)
		var chk protocol.DaemonCheckData
		call(t, c, &protocol.DaemonCheck{Header: hdr(protocol.TypeDaemonCheck, "")}, &chk)
		if !chk.StoreOK {
			t.Fatalf("round %d: daemon.check: %s", round, chk.StoreError)
		}
		c.Close()
	}
	d.stop()
	st := doctor(t, home)
	if st["store"] != "ok" || st["orphans"] != "ok" {
		t.Fatalf("shardctl doctor after the last round: store %s, orphans %s", st["store"], st["orphans"])
	}
}

// checkAcked: an acknowledged create is on disk as its response said.
func checkAcked(t *testing.T, round int, ack protocol.SubagentCreateData, j store.Job) {
	t.Helper()
	if j.JobID == "" {
		t.Fatalf("round %d: acknowledged job %s is not in the store", round, ack.JobID)
	}
	if j.Strategy != ack.Strategy || len(j.Runs) != len(ack.Runs) {
		t.Fatalf("round %d: job %s on disk: %s with %d runs; acknowledged: %s with %d", round, ack.JobID, j.Strategy, len(j.Runs), ack.Strategy, len(ack.Runs))
	}
	for i, r := range ack.Runs {
		if j.Runs[i].RunID != r.RunID || j.Runs[i].AgentID != r.AgentID {
			t.Fatalf("round %d: job %s run %d on disk is %s on %s; acknowledged %s on %s", round, ack.JobID, i, j.Runs[i].RunID, j.Runs[i].AgentID, r.RunID, r.AgentID)
		}
	}
}

// checkReconciled compares every job the dead daemon left with what the
// restarted one reports (docs/protocol.md §10.3 restart rules, jobs.Reconcile).
func checkReconciled(t *testing.T, round int, d *daemon, onDisk map[string]store.Job) {
	t.Helper()
	c := d.dial()
	record(c)
	defer c.Close()
	for _, j := range onDisk {
		zero := 0.0
		var w protocol.SubagentWaitData
		call(t, c, &protocol.SubagentWait{Header: hdr(protocol.TypeSubagentWait, ""), ParentAgentID: j.ParentAgentID, Handles: []string{j.JobID}, Timeout: &zero}, &w)
		if len(w.Runs) != len(j.Runs) {
			t.Fatalf("round %d: job %s has %d runs after the restart, %d before", round, j.JobID, len(w.Runs), len(j.Runs))
		}
		halted := false
		for i, was := range j.Runs {
			now := w.Runs[i]
			if now.RunID != was.RunID {
				t.Fatalf("round %d: job %s run %d is %s after the restart, %s before", round, j.JobID, i, now.RunID, was.RunID)
			}
			bad := func(want string) {
				t.Errorf("round %d: job %s (%s) run %d: %s before the kill, %s (started_at %d, ended_at %d) after; want %s",
					round, j.JobID, j.Strategy, i, was.State, now.State, now.StartedAt, now.EndedAt, want)
			}
			switch {
			case was.State == protocol.RunStarting || was.State == protocol.RunActive:
				want := protocol.RunInterrupted
				if was.StopRequestedAt != 0 {
					want = protocol.RunCancelled
				}
				if now.State != want || now.EndedAt == 0 {
					bad(string(want) + " with ended_at")
				}
				halted = halted || j.Strategy == protocol.StrategyChain
			case was.State.Terminal():
				if now.State != was.State {
					bad("unchanged")
				}
				halted = halted || (j.Strategy == protocol.StrategyChain && was.State != protocol.RunCompleted)
			case halted: // queued behind a chain step that did not complete
				if now.State != protocol.RunCancelled || now.StartedAt != 0 {
					bad("cancelled, never started")
				}
			default: // queued: it may run now, but it was not running then
				if now.State == protocol.RunInterrupted {
					bad("not interrupted")
				}
			}
		}
	}
}

// load is the work in flight when the daemon is killed: creators of
// subagent jobs and a client that prompts the parents (and, as an
// interactive user of theirs, allows the tools their children ask for).
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[string]protocol.SubagentCreateData
	errs   []string
}

// Tasks of the subagent runs under load.
var loadTasks = []string{
	"sim: say done",
	"sim: sleep 300\nsim: say done",
	"sim: sleep 2000\nsim: say done",
	longTurn,
	toolTurn,
}

func startLoad(t *testing.T, d *daemon, parents []string, seed uint64) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, acked: map[string]protocol.SubagentCreateData{}}
	// The parents' interactive client.
	user := d.dial()
	recordWith(user, allowAll(user))
	for _, p := range parents {
		attach(t, user, p)
	}
	l.wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 0))
		for ctx.Err() == nil {
			p := parents[rng.IntN(len(parents))]
			err := tryCall(user, &protocol.Prompt{Header: hdr(protocol.TypePrompt, p), Message: "sim: sleep 200\nsim: say hello", StreamingBehavior: protocol.BehaviorFollowUp}, nil)
			if pe := protoErr(err); pe != nil && pe.Code != protocol.CodeConflict {
				l.fail("prompt %s: %v", p, err)
			} else if err != nil && pe == nil {
				return // the daemon is gone
			}
			sleepCtx(ctx, time.Duration(100+rng.IntN(400))*time.Millisecond)
		}
	})
	for w := range 3 {
		c := d.dial()
		record(c)
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w+1)))
			for ctx.Err() == nil {
				req := randomCreate(rng, parents[rng.IntN(len(parents))])
				var data protocol.SubagentCreateData
				err := tryCall(c, req, &data)
				switch pe := protoErr(err); {
				case err == nil:
					l.mu.Lock()
					l.acked[data.JobID] = data
					l.mu.Unlock()
				case pe != nil:
					l.fail("subagent.create: %v", err)
				default:
					return // the daemon is gone
				}
				sleepCtx(ctx, time.Duration(20+rng.IntN(150))*time.Millisecond)
			}
		})
	}
	return l
}

func (l *load) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// stop ends the load (the daemon is dead by now) and returns the jobs whose
// create was acknowledged. A protocol error while the daemon lived fails t.
func (l *load) stop(t *testing.T) map[string]protocol.SubagentCreateData {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	if len(l.errs) > 0 {
		t.Fatalf("errors under load (the daemon was alive):\n%s", strings.Join(l.errs, "\n"))
	}
	return l.acked
}

// randomCreate is a subagent.create of one of the three strategies.
func randomCreate(rng *rand.Rand, parent string) *protocol.SubagentCreate {
	req := &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate, ""), ParentAgentID: parent}
	task := func() string { return loadTasks[rng.IntN(len(loadTasks))] }
	switch rng.IntN(3) {
	case 0:
		req.Name, req.Task = "solo", task()
	case 1:
		req.Strategy = protocol.StrategyParallel
	default:
		req.Strategy = protocol.StrategyChain
	}
	if req.Task == "" {
		for i := range 1 + rng.IntN(3) {
			req.Tasks = append(req.Tasks, protocol.TaskSpec{Name: fmt.Sprintf("t%d", i), Task: task()})
		}
	}
	return req
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
