package jobs

import (
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Reconcile runs once at startup, before anything is served: every run the
// previous daemon left starting or active becomes interrupted (cancelled if
// a stop had been requested), chain steps after it are cancelled and never
// prompted, and each of those runs gets a completion report for its parent.
// Steps still queued behind a chain step that had already ended without
// completing are cancelled the same way.
// Queued runs of other jobs stay queued and run later. It reads only the
// jobs that have not ended (the store's open-jobs index). It is one
// transaction, so a crash midway leaves the previous state and running it
// again gives the same result. It returns how many runs it ended.
//
// A run the restart ends gets the end time lastSign gives it: the last sign
// of life of its agent before the previous daemon went away (a crash is
// not noticed until the next start, and the downtime is not the run's
// time). lastSign returns 0 when it knows nothing; the end time is then
// the latest time the run itself recorded (its start or stop request), and
// never later than now. A nil lastSign ends them now. The job ends with its
// last run.
func Reconcile(st *store.Store, now time.Time, lastSign func(*store.Run) int64) (int, error) {
	ended := 0
	ms := now.UnixMilli()
	endOf := func(r *store.Run) int64 {
		if lastSign == nil {
			return ms
		}
		end := max(r.StartedAt, r.StopRequestedAt, r.QueuedAt, lastSign(r))
		if end <= 0 || end > ms {
			return ms
		}
		return end
	}
	err := st.UpdateOpenJobs(func(j *store.Job) (bool, []store.Report, error) {
		var reports []store.Report
		halted := ""
		for i := range j.Runs {
			r := &j.Runs[i]
			switch {
			case r.Anywhere:
				// It runs wherever the cluster placed it, not in this
				// daemon: its record says what became of it, and the job
				// actor follows it (anywhere.go).
			case r.State == protocol.RunStarting || r.State == protocol.RunActive:
				if r.StopRequestedAt != 0 {
					r.State, r.Error = protocol.RunCancelled, "cancelled; the daemon restarted before the stop finished"
				} else {
					r.State, r.Error = protocol.RunInterrupted, "interrupted by a daemon restart"
				}
				r.EndedAt = endOf(r)
				reports = append(reports, reportOf(j, r, ms))
				if j.Strategy == protocol.StrategyChain && halted == "" {
					halted = r.RunID
				}
			case r.State == protocol.RunQueued && j.Strategy == protocol.StrategyChain && halted != "":
				r.State, r.EndedAt, r.Error = protocol.RunCancelled, ms, "chain halted by "+halted
				reports = append(reports, reportOf(j, r, ms))
			case r.State.Terminal() && r.State != protocol.RunCompleted &&
				j.Strategy == protocol.StrategyChain && halted == "":
				// The step ended without completing, but the previous daemon
				// died before it cancelled the rest of the chain (that is a
				// second transaction): halt the chain here, or the queued
				// steps would wait forever behind a terminal step.
				halted = r.RunID
			}
		}
		if len(reports) == 0 {
			return false, nil, nil
		}
		if halted != "" && j.HaltedBy == "" {
			j.HaltedBy = halted
		}
		last := int64(0)
		for _, r := range j.Runs {
			last = max(last, r.EndedAt)
		}
		endIfTerminal(j, last)
		ended += len(reports)
		return true, reports, nil
	})
	return ended, err
}
