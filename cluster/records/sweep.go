package records

import (
	"context"
	"errors"

	"github.com/shard-dev/shard/protocol"
)

// SweepResult is what SweepJobs removed.
type SweepResult struct {
	// Jobs are the jobs whose records are gone now: each run record and
	// then the job's own.
	Jobs []string
	// Runs is how many run records it deleted.
	Runs int
}

// SweepJobs deletes the records of the jobs node wrote as their parent's
// node (JobRecord.ParentNode) before the time before (CreatedAt, epoch
// ms, by node's own clock) that holds says node does not hold: a create
// refused after its records were written (a write whose acknowledgement
// was lost may commit later; docs/cluster.md "No quorum"), or a job its
// retention removed. Of such a job it deletes each run record that waits
// unclaimed (held: no node ever took it, and none will, since only a held
// job's follow queues it) or has ended, with its claim pointer if one is
// left, and then the job record once no run record is left. A run a node
// claimed and has not ended is left to end (its node writes the end; the
// next sweep takes it). Every delete is a compare-and-set on the revision
// read, so a record written meanwhile is kept.
//
// holds answers whether node holds a job (a committed job in its store);
// an error leaves that job alone. The age bound keeps a create in flight
// (its records written, its local commit not yet) from being swept.
func (r *Records) SweepJobs(ctx context.Context, node string, before int64, holds func(jobID string) (bool, error)) (SweepResult, error) {
	res := SweepResult{}
	if node == "" {
		return res, fail(ErrInvalid, nil, "sweep: a node is required")
	}
	jobs, err := r.Jobs.List(ctx, "")
	if err != nil {
		return res, err
	}
	for _, j := range jobs {
		if j.Value.ParentNode != node || j.Value.CreatedAt >= before {
			continue
		}
		held, err := holds(j.Value.JobID)
		if err != nil || held {
			continue
		}
		left, n, err := r.sweepRuns(ctx, j.Value.JobID)
		res.Runs += n
		if err != nil {
			return res, err
		}
		if left > 0 {
			continue
		}
		err = r.Jobs.Delete(ctx, j.Key, j.Revision)
		if errors.Is(err, ErrConflict) {
			continue // written meanwhile: the next sweep decides again
		}
		if err != nil {
			return res, err
		}
		res.Jobs = append(res.Jobs, j.Value.JobID)
	}
	return res, nil
}

// sweepRuns deletes the held or ended run records of job jobID and
// returns how many run records are left and how many it deleted.
func (r *Records) sweepRuns(ctx context.Context, jobID string) (left, deleted int, err error) {
	runs, err := r.Runs.List(ctx, jobID)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range runs {
		run := e.Value
		held := run.Node == "" && run.State == protocol.RunQueued
		if !held && !run.State.Terminal() {
			left++
			continue
		}
		// The pointer first: a claimer meeting it after the run is gone
		// drops it anyway, but none is left behind this way.
		if c, err := r.Claims.Get(ctx, e.Key); err == nil {
			r.drop(ctx, c)
		}
		err := r.Runs.Delete(ctx, e.Key, e.Revision)
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, ErrConflict):
			left++ // claimed or written meanwhile
		default:
			return left + 1, deleted, err
		}
	}
	return left, deleted, nil
}
