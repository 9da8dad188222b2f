package jobs

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// waiter is a subagent.wait not answered yet.
type waiter struct {
	id     int
	cmd    *registry.Command
	parent string
	runIDs []string
	any    bool
	timer  clock.Timer // nil: waits forever
}

// waitSet is the coordinator's pending waiters.
type waitSet struct {
	byID map[int]*waiter
	next int
}

// remove forgets w and stops its timer.
func (ws *waitSet) remove(w *waiter) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	delete(ws.byID, w.id)
}

// dropClient forgets the waiters of a connection that ended (their runs go
// on; nobody is left to answer).
func (ws *waitSet) dropClient(conn *actor.PID) {
	for _, w := range ws.byID {
		if w.cmd.Client.PID.Equal(conn) {
			ws.remove(w)
		}
	}
}

// stopTimers stops every waiter's timer (the coordinator is stopping).
func (ws *waitSet) stopTimers() {
	for _, w := range ws.byID {
		if w.timer != nil {
			w.timer.Stop()
			w.timer = nil
		}
	}
}

// maxWaitTimeout: a timeout beyond a year is as good as none (and would
// overflow a time.Duration).
const maxWaitTimeout = 365 * 24 * 3600

func (co *Coordinator) wait(c actor.Context, cmd *registry.Command, m *protocol.SubagentWait) {
	runIDs, err := co.idx.resolveRuns(m.ParentAgentID, m.Handles)
	if err != nil {
		fail(cmd, err)
		return
	}
	co.waits.next++
	w := &waiter{id: co.waits.next, cmd: cmd, parent: m.ParentAgentID, runIDs: runIDs, any: m.Mode == "any"}
	if co.satisfied(w) || (m.Timeout != nil && *m.Timeout == 0) {
		co.answerWait(c, w, !co.satisfied(w))
		return
	}
	co.waits.byID[w.id] = w
	if m.Timeout != nil && *m.Timeout < maxWaitTimeout {
		w.timer = co.after(time.Duration(*m.Timeout*float64(time.Second)), &waitTimeout{id: w.id})
	}
}

func (co *Coordinator) satisfied(w *waiter) bool {
	done := 0
	for _, id := range w.runIDs {
		if _, r := co.idx.run(id); r != nil && r.State.Terminal() {
			done++
		}
	}
	if w.any {
		return done > 0
	}
	return done == len(w.runIDs)
}

// checkWaiters answers every waiter a terminal transition satisfied.
func (co *Coordinator) checkWaiters(c actor.Context) {
	for _, w := range co.waits.byID {
		if co.satisfied(w) {
			co.answerWait(c, w, false)
		}
	}
}

// answerWait responds to a waiter. The timeout never changes a run.
func (co *Coordinator) answerWait(c actor.Context, w *waiter, timedOut bool) {
	co.waits.remove(w)
	data := protocol.SubagentWaitData{TimedOut: timedOut, Runs: []protocol.RunSnapshot{}}
	var runs []store.Run
	terminal := 0
	for _, id := range w.runIDs {
		j, r := co.idx.run(id)
		if r == nil {
			continue
		}
		runs = append(runs, *r)
		if r.State.Terminal() {
			terminal++
		}
		data.Runs = append(data.Runs, view.RunSnapshot(j, r, j.ParentAgentID == w.parent))
	}
	// Shard's choice for aggregate_state: the job-state derivation over the
	// waited runs when all or none are terminal, "mixed" in between.
	if terminal > 0 && terminal < len(runs) {
		data.AggregateState = "mixed"
	} else {
		data.AggregateState = string(view.DeriveState(runs))
	}
	reply(w.cmd, data)
}
