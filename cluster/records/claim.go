package records

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shard-dev/shard/protocol"
)

// Placement is pull-based: a run any node may take is written with
// Anywhere and no Node, and a pointer to it goes on the claim queue
// (bucket shard_claims). Each node claims what it has room for; the
// compare-and-set on the run record decides who wins, so the queue needs
// no leader and a pointer seen by two nodes is still taken once.

// CreateRun writes a new run record (Create: ErrExists if the key is
// taken) and, when it is claimable, publishes it on the claim queue. The
// record is written first: a node that fails between the two leaves a
// queued run that Requeue puts back on the queue, where the other order
// could leave a pointer a claimer would meet before its run exists. When
// only the pointer failed, the record's revision comes with the error.
func (r *Records) CreateRun(ctx context.Context, run RunRecord) (uint64, error) {
	key := RunKey(run.JobID, run.RunID)
	rev, err := r.Runs.Create(ctx, key, run)
	if err != nil {
		return 0, err
	}
	if claimable(&run) {
		if _, err := r.publish(ctx, &run); err != nil {
			return rev, err
		}
	}
	return rev, nil
}

// Queue puts a claimable run's pointer on the claim queue (a run written
// by Runs.Create alone is claimed by no one until then); a pointer already
// there, or a run no longer claimable, is fine. A parent's node writes its
// runs' records first and queues them only once its own create committed:
// a records write whose acknowledgement was lost may still commit later
// (docs/cluster.md, "No quorum"), and a run of a create that was answered
// with an error must never be taken.
func (r *Records) Queue(ctx context.Context, run RunRecord) error {
	if !claimable(&run) {
		return nil
	}
	_, err := r.publish(ctx, &run)
	return err
}

// publish puts a run's pointer on the claim queue and reports whether it
// did; one already there is fine.
func (r *Records) publish(ctx context.Context, run *RunRecord) (bool, error) {
	_, err := r.Claims.Create(ctx, RunKey(run.JobID, run.RunID), ClaimEntry{JobID: run.JobID, RunID: run.RunID, QueuedAt: run.QueuedAt})
	if errors.Is(err, ErrExists) {
		return false, nil
	}
	return err == nil, err
}

// Requeue puts every claimable run that has no pointer on the claim queue
// back on it (after a node failed between CreateRun's two writes), and
// returns how many it put back. Any node may run it; two at once put each
// run back once (the pointer is a Create). A run claimed while Requeue
// looked may get a pointer again: a stale one, which the next claimer
// drops, since the run record decides.
func (r *Records) Requeue(ctx context.Context) (int, error) {
	runs, err := r.Runs.List(ctx, "")
	if err != nil {
		return 0, err
	}
	keys, err := r.Claims.Keys(ctx, "")
	if err != nil {
		return 0, err
	}
	queued := make(map[string]bool, len(keys))
	for _, k := range keys {
		queued[k] = true
	}
	n := 0
	for _, e := range runs {
		if !claimable(&e.Value) || queued[e.Key] {
			continue
		}
		put, err := r.publish(ctx, &e.Value)
		if err != nil {
			return n, err
		}
		if put {
			n++
		}
	}
	return n, nil
}

// Claim takes at most capacity claimable runs for node (in its
// incarnation), oldest first, and returns them with the revisions it
// wrote. Each is a compare-and-set of the run from unclaimed to claimed
// by node, with a lease until now+Options.Lease: among nodes claiming at
// once, exactly one wins each run, and a loser moves on to the next. The
// pointers of claimed runs, and stale ones (a run claimed, ended or gone),
// are dropped from the queue.
//
// On an error, the runs already claimed are returned with it: they are
// node's now, and the caller must run them (or interrupt them).
func (r *Records) Claim(ctx context.Context, node, incarnation string, capacity int) ([]Entry[RunRecord], error) {
	if node == "" || incarnation == "" {
		return nil, fail(ErrInvalid, nil, "claim: a node and its incarnation are required")
	}
	got := []Entry[RunRecord]{}
	if capacity <= 0 {
		return got, nil
	}
	queue, err := r.Claims.List(ctx, "")
	if err != nil {
		return got, err
	}
	slices.SortFunc(queue, func(a, b Entry[ClaimEntry]) int {
		return cmp.Or(cmp.Compare(a.Value.QueuedAt, b.Value.QueuedAt), cmp.Compare(a.Key, b.Key))
	})
	for _, c := range queue {
		if len(got) == capacity {
			break
		}
		e, err := r.Runs.Get(ctx, c.Key)
		if errors.Is(err, ErrNotFound) {
			r.drop(ctx, c)
			continue
		}
		if err != nil {
			return got, err
		}
		run := e.Value
		if !claimable(&run) {
			r.drop(ctx, c)
			continue
		}
		if run.Host != "" && (run.Host != node || run.Incarnation != incarnation) {
			// Pinned to the node hosting its child (a relaunch): that
			// node's, and its pointer stays for it.
			continue
		}
		now := r.opts.Now()
		run.Node, run.Incarnation = node, incarnation
		run.ClaimedAt, run.LeaseUntil = now.UnixMilli(), now.Add(r.opts.Lease).UnixMilli()
		rev, err := r.Runs.Update(ctx, c.Key, run, e.Revision)
		if errors.Is(err, ErrConflict) {
			continue // another node claimed it (or it changed): theirs
		}
		if err != nil {
			return got, err
		}
		got = append(got, Entry[RunRecord]{Key: c.Key, Value: run, Revision: rev})
		r.drop(ctx, c)
	}
	return got, nil
}

// drop removes a claim pointer if it is still the one read. Failing to is
// harmless: the pointer is stale, and the next claimer that meets it
// drops it.
func (r *Records) drop(ctx context.Context, c Entry[ClaimEntry]) {
	_ = r.Claims.Delete(ctx, c.Key, c.Revision)
}

// claimable reports whether a run waits for a node to claim it.
func claimable(run *RunRecord) bool {
	return run.Anywhere && run.Node == "" && run.State == protocol.RunQueued
}

// RenewLease extends the lease of a run node holds (in incarnation) to
// now+Options.Lease, as a compare-and-set on rev. A run no longer held by
// that node and incarnation is ErrConflict.
func (r *Records) RenewLease(ctx context.Context, e Entry[RunRecord], node, incarnation string) (Entry[RunRecord], error) {
	run := e.Value
	if run.Node != node || run.Incarnation != incarnation || run.State.Terminal() {
		return e, fail(ErrConflict, nil, "renew lease of %s: not held by %s", e.Key, node)
	}
	run.LeaseUntil = r.opts.Now().Add(r.opts.Lease).UnixMilli()
	rev, err := r.Runs.Update(ctx, e.Key, run, e.Revision)
	if err != nil {
		return e, err
	}
	return Entry[RunRecord]{Key: e.Key, Value: run, Revision: rev}, nil
}

// InterruptNodeRuns marks interrupted every unfinished run that node held
// in incarnation (the incarnation a survivor declared dead, or the
// previous life of a node that restarted), and returns the runs it
// changed, each with the revision it wrote.
//
// Exactly once: each transition is a compare-and-set from an unfinished
// state, so when two survivors call it at once every run is changed by
// one of them and returned by that one only, and a later call finds
// nothing to change and returns nothing. The caller reports each run it
// got back to the run's parent — so each run is reported once across
// the cluster, the rule a restarted single node keeps for its own runs.
// On an error, the runs already changed are returned with it (they are
// the caller's to report).
func (r *Records) InterruptNodeRuns(ctx context.Context, node, incarnation string) ([]Entry[RunRecord], error) {
	if node == "" || incarnation == "" {
		return nil, fail(ErrInvalid, nil, "interrupt: a node and its incarnation are required")
	}
	held := func(run *RunRecord) bool {
		if run.Node == "" && run.Host == node {
			// A relaunch pinned to that incarnation, not claimed yet: no
			// other node may take it, so it ends with its host.
			return run.Incarnation == incarnation && run.State == protocol.RunQueued
		}
		return run.Node == node && run.Incarnation == incarnation && !run.State.Terminal()
	}
	runs, err := r.Runs.List(ctx, "")
	if err != nil {
		return nil, err
	}
	changed := []Entry[RunRecord]{}
	for _, e := range runs {
		for held(&e.Value) {
			run := e.Value
			run.State = protocol.RunInterrupted
			run.EndedAt = r.opts.Now().UnixMilli()
			run.LeaseUntil = 0
			run.Error = fmt.Sprintf("node %s was lost", node)
			rev, err := r.Runs.Update(ctx, e.Key, run, e.Revision)
			if err == nil {
				changed = append(changed, Entry[RunRecord]{Key: e.Key, Value: run, Revision: rev})
				break
			}
			if !errors.Is(err, ErrConflict) {
				return changed, err
			}
			// Written meanwhile (by the run's node before it died, or by
			// another survivor): decide again on what is there now.
			if e, err = r.Runs.Get(ctx, e.Key); errors.Is(err, ErrNotFound) {
				break
			} else if err != nil {
				return changed, err
			}
		}
	}
	return changed, nil
}
