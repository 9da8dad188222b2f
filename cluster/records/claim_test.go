package records_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/protocol"
)

// TestClaimRace queues 50 runs and lets three nodes, each on its own
// server, claim concurrently up to capacities that sum to less: every
// node fills its capacity exactly, no run is claimed twice, each claimed
// record names its claimer, and the rest stay claimable on the queue.
func TestClaimRace(t *testing.T) {
	b := setup(t, 3, records.Options{})
	const runs = 50
	for i := range runs {
		r := run("job-q", runID(i))
		r.QueuedAt = int64(i)
		if _, err := b.rec[i%3].CreateRun(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	capacity := []int{20, 15, 10}
	got := make([][]records.Entry[records.RunRecord], 3)
	var wg sync.WaitGroup
	for n := range 3 {
		wg.Go(func() {
			node := fmt.Sprintf("n%d", n+1)
			for len(got[n]) < capacity[n] {
				claimed, err := b.rec[n].Claim(ctx(t), node, "inc-1", capacity[n]-len(got[n]))
				got[n] = append(got[n], claimed...)
				if err != nil {
					t.Errorf("%s: claim: %v", node, err)
					return
				}
				if len(claimed) == 0 {
					return // nothing claimable left for it
				}
			}
		})
	}
	wg.Wait()
	owner := map[string]string{}
	for n, entries := range got {
		node := fmt.Sprintf("n%d", n+1)
		if len(entries) != capacity[n] {
			t.Errorf("%s claimed %d runs, capacity %d (50 queued)", node, len(entries), capacity[n])
		}
		for _, e := range entries {
			if prev, dup := owner[e.Key]; dup {
				t.Fatalf("run %s claimed by %s and %s", e.Key, prev, node)
			}
			owner[e.Key] = node
		}
	}
	all, err := b.rec[0].Runs.List(ctx(t), "job-q")
	if err != nil {
		t.Fatal(err)
	}
	unclaimed := 0
	for _, e := range all {
		if e.Value.Node != owner[e.Key] {
			t.Errorf("run %s records node %q, claimed by %q", e.Key, e.Value.Node, owner[e.Key])
		}
		if e.Value.Node == "" {
			unclaimed++
		} else if e.Value.Incarnation != "inc-1" || e.Value.LeaseUntil <= e.Value.ClaimedAt {
			t.Errorf("run %s: incarnation %q lease %d claimed %d", e.Key, e.Value.Incarnation, e.Value.LeaseUntil, e.Value.ClaimedAt)
		}
	}
	if unclaimed != runs-45 {
		t.Errorf("%d runs unclaimed, want %d", unclaimed, runs-45)
	}
	queue, err := b.rec[2].Claims.Keys(ctx(t), "")
	if err != nil || len(queue) != runs-45 {
		t.Fatalf("claim queue holds %d (%v), want %d", len(queue), err, runs-45)
	}
	for _, k := range queue {
		if owner[k] != "" {
			t.Errorf("claimed run %s still queued", k)
		}
	}
	// A node with room takes the rest; then nothing is left.
	rest, err := b.rec[1].Claim(ctx(t), "n2", "inc-1", 100)
	if err != nil || len(rest) != runs-45 {
		t.Fatalf("claim the rest: %d %v", len(rest), err)
	}
	if none, err := b.rec[0].Claim(ctx(t), "n1", "inc-1", 100); err != nil || len(none) != 0 {
		t.Fatalf("claim from an empty queue: %d %v", len(none), err)
	}
}

// TestClaimSkipsPlacedAndRequeues: a run placed on a node at its create is
// not queued, a claimable run whose pointer was lost is put back by
// Requeue, and a pointer whose run is gone is dropped.
func TestClaimSkipsPlacedAndRequeues(t *testing.T) {
	b := setup(t, 3, records.Options{})
	placed := run("job-p", "run-local")
	placed.Anywhere, placed.Node, placed.Incarnation = false, "n1", "inc-1"
	if _, err := b.rec[0].CreateRun(ctx(t), placed); err != nil {
		t.Fatal(err)
	}
	// A claimable run written without its pointer (a node died between).
	if _, err := b.rec[0].Runs.Create(ctx(t), records.RunKey("job-p", "run-lost"), run("job-p", "run-lost")); err != nil {
		t.Fatal(err)
	}
	// A pointer without its run.
	if _, err := b.rec[0].Claims.Create(ctx(t), records.RunKey("job-p", "run-gone"), records.ClaimEntry{JobID: "job-p", RunID: "run-gone"}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.rec[1].Claim(ctx(t), "n2", "inc-1", 5); err != nil || len(got) != 0 {
		t.Fatalf("claim: %v %v, want nothing", got, err)
	}
	if keys, err := b.rec[1].Claims.Keys(ctx(t), ""); err != nil || len(keys) != 0 {
		t.Fatalf("stale pointer kept: %v %v", keys, err)
	}
	if n, err := b.rec[2].Requeue(ctx(t)); err != nil || n != 1 {
		t.Fatalf("requeue: %d %v, want 1", n, err)
	}
	got, err := b.rec[1].Claim(ctx(t), "n2", "inc-1", 5)
	if err != nil || len(got) != 1 || got[0].Value.RunID != "run-lost" {
		t.Fatalf("claim after requeue: %+v %v", got, err)
	}
	renewed, err := b.rec[1].RenewLease(ctx(t), got[0], "n2", "inc-1")
	if err != nil || renewed.Revision <= got[0].Revision {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	if _, err := b.rec[0].RenewLease(ctx(t), renewed, "n1", "inc-1"); !errors.Is(err, records.ErrConflict) {
		t.Fatalf("renew by another node: %v", err)
	}
}

// TestInterruptNodeRunsExactlyOnce declares node n3 (incarnation inc-2)
// lost from two survivors at once, on two servers: each unfinished run n3
// held in inc-2 is interrupted by exactly one of them and returned by that
// one only; finished runs, runs of n3's previous incarnation and runs of
// other nodes are untouched; a third call changes nothing.
func TestInterruptNodeRunsExactlyOnce(t *testing.T) {
	b := setup(t, 3, records.Options{})
	want := []string{}
	add := func(id, node, inc string, state protocol.RunState) {
		t.Helper()
		r := run("job-i", id)
		r.Node, r.Incarnation, r.State = node, inc, state
		if _, err := b.rec[0].CreateRun(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		if node == "n3" && inc == "inc-2" && !state.Terminal() {
			want = append(want, records.RunKey("job-i", id))
		}
	}
	for i := range 12 {
		add(runID(i), "n3", "inc-2", []protocol.RunState{protocol.RunQueued, protocol.RunStarting, protocol.RunActive}[i%3])
	}
	add("run-done", "n3", "inc-2", protocol.RunCompleted)
	add("run-old", "n3", "inc-1", protocol.RunActive)
	add("run-n1", "n1", "inc-2", protocol.RunActive)

	got := make([][]records.Entry[records.RunRecord], 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for s := range 2 {
		wg.Go(func() {
			<-start
			var err error
			got[s], err = b.rec[s].InterruptNodeRuns(ctx(t), "n3", "inc-2")
			if err != nil {
				t.Errorf("survivor %d: %v", s, err)
			}
		})
	}
	close(start)
	wg.Wait()
	var keys []string
	for _, entries := range got {
		for _, e := range entries {
			if e.Value.State != protocol.RunInterrupted {
				t.Errorf("%s returned in state %s", e.Key, e.Value.State)
			}
			keys = append(keys, e.Key)
		}
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("interrupted %v (survivors got %d and %d), want each of %v once", keys, len(got[0]), len(got[1]), want)
	}
	if again, err := b.rec[2].InterruptNodeRuns(ctx(t), "n3", "inc-2"); err != nil || len(again) != 0 {
		t.Fatalf("second declaration changed %d runs (%v), want none", len(again), err)
	}
	all, err := b.rec[2].Runs.List(ctx(t), "job-i")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		interrupted := e.Value.State == protocol.RunInterrupted
		if interrupted != slices.Contains(want, e.Key) {
			t.Errorf("%s (node %s %s) is %s", e.Key, e.Value.Node, e.Value.Incarnation, e.Value.State)
		}
	}
}

// TestClaimPinnedToItsHost: a run pinned to the node hosting its child (a
// relaunch, docs/protocol.md §13 "Runs on other nodes") is claimed by no
// other node, nor by its host in another incarnation, and its pointer
// stays on the queue until its host claims it; declaring its host's
// incarnation dead interrupts it while it waits, once.
func TestClaimPinnedToItsHost(t *testing.T) {
	b := setup(t, 3, records.Options{})
	pinned := func(id string) records.RunRecord {
		r := run("job-h", id)
		r.Host, r.Incarnation, r.Worktree = "n2", "inc-1", "run-first"
		return r
	}
	bad := pinned("run-bad")
	bad.Worktree = ""
	if _, err := b.rec[0].CreateRun(ctx(t), bad); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("a pinned run without its worktree: %v, want ErrInvalid", err)
	}
	for _, id := range []string{"run-a", "run-b"} {
		if _, err := b.rec[0].CreateRun(ctx(t), pinned(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, who := range [][2]string{{"n1", "inc-1"}, {"n3", "inc-1"}, {"n2", "inc-2"}} {
		if got, err := b.rec[1].Claim(ctx(t), who[0], who[1], 5); err != nil || len(got) != 0 {
			t.Fatalf("%s (%s) claimed %+v, %v: want nothing", who[0], who[1], got, err)
		}
	}
	if keys, err := b.rec[0].Claims.Keys(ctx(t), ""); err != nil || len(keys) != 2 {
		t.Fatalf("pointers after the others' claims: %v %v, want both kept", keys, err)
	}
	got, err := b.rec[1].Claim(ctx(t), "n2", "inc-1", 1)
	if err != nil || len(got) != 1 || got[0].Value.Node != "n2" || got[0].Value.Host != "n2" {
		t.Fatalf("the host's claim: %+v %v", got, err)
	}
	// n2's incarnation is declared dead: the run it claimed and the one
	// still waiting for it are interrupted, each once.
	lost, err := b.rec[2].InterruptNodeRuns(ctx(t), "n2", "inc-1")
	if err != nil || len(lost) != 2 {
		t.Fatalf("interrupt n2: %+v %v, want both runs", lost, err)
	}
	if again, err := b.rec[0].InterruptNodeRuns(ctx(t), "n2", "inc-1"); err != nil || len(again) != 0 {
		t.Fatalf("second declaration: %+v %v", again, err)
	}
	if got, err := b.rec[1].Claim(ctx(t), "n2", "inc-1", 5); err != nil || len(got) != 0 {
		t.Fatalf("claim after the interruption: %+v %v", got, err)
	}
}
