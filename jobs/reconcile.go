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
func Reconcile(st *store.Store, now time.Time) (int, error) {
	ended := 0
	ms := now.UnixMilli()
	err := st.UpdateOpenJobs(func(j *store.Job) (bool, []store.Report, error) {
		var reports []store.Report
		halted := ""
		for i := range j.Runs {
			r := &j.Runs[i]
			switch {
			case r.State == protocol.RunStarting || r.State == protocol.RunActive:
				if r.StopRequestedAt != 0 {
					r.State, r.Error = protocol.RunCancelled, "cancelled; the daemon restarted before the stop finished"
				} else {
					r.State, r.Error = protocol.RunInterrupted, "interrupted by a daemon restart"
				}
				r.EndedAt = ms
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
		endIfTerminal(j, ms)
		ended += len(reports)
		return true, reports, nil
	})
	return ended, err
}
