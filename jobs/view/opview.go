package view

import (
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// stuckStopAfter and stuckStartAfter say when an operator should look at a
// run: a stop that has not finished, or a start that has not either.
const (
	stuckStopAfter  = 30 * time.Second
	stuckStartAfter = 60 * time.Second
)

// OpView projects a job for operators (no task text, no final text).
func OpView(j *store.Job, now time.Time) protocol.OpJob {
	snap := JobSnapshot(j, false)
	out := protocol.OpJob{
		JobID: j.JobID, ParentAgentID: j.ParentAgentID, Strategy: j.Strategy, State: snap.State,
		CreatedAt: j.CreatedAt, EndedAt: j.EndedAt, StoppedAt: j.StoppedAt, ChainStep: snap.ChainStep,
		HaltedBy: j.HaltedBy, Runs: make([]protocol.OpRun, 0, len(j.Runs)),
	}
	ms := now.UnixMilli()
	for i, r := range j.Runs {
		op := protocol.OpRun{RunSnapshot: snap.Runs[i], QueuedAt: r.QueuedAt, StopRequestedAt: r.StopRequestedAt,
			StopStage: r.StopStage, ExitStatus: r.ExitStatus}
		if r.StartedAt != 0 && r.QueuedAt != 0 {
			op.QueueWaitMs = r.StartedAt - r.QueuedAt
		}
		if !r.State.Terminal() {
			op.Stuck = (r.StopRequestedAt != 0 && ms-r.StopRequestedAt > stuckStopAfter.Milliseconds()) ||
				(r.State == protocol.RunStarting && r.StartedAt != 0 && ms-r.StartedAt > stuckStartAfter.Milliseconds())
		}
		out.Runs = append(out.Runs, op)
	}
	return out
}

// AnyStuck reports whether a job has a stuck run.
func AnyStuck(v protocol.OpJob) bool {
	for _, r := range v.Runs {
		if r.Stuck {
			return true
		}
	}
	return false
}
