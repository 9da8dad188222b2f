package jobs

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
)

// pruneState is a jobs.prune or a retention sweep in progress (one at a
// time): the jobs and children chosen on the mailbox, then the registry's
// live check, the store's deletion and agent.remove, each answered to the
// mailbox.
type pruneState struct {
	cmd    *registry.Command // nil: the retention timer's sweep
	dryRun bool
	jobs   []string // oldest first
	agents []string
}

// retentionState is the retention timer (Deps.Retention).
type retentionState struct {
	timer   clock.Timer
	running *pruneState
}

// retentionInterval is how often the sweep runs: the retention itself when
// shorter than an hour, else hourly (a finished job outlives its
// retention by at most that).
func retentionInterval(d time.Duration) time.Duration {
	return min(d, time.Hour)
}

// opPrune answers jobs.prune (docs/protocol.md §10.3).
func (co *Coordinator) opPrune(c actor.Context, cmd *registry.Command, m *protocol.JobsPrune) {
	if co.ret.running != nil {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "a prune is in progress"))
		return
	}
	co.startPrune(c, &pruneState{cmd: cmd, dryRun: m.DryRun}, time.Duration(m.OlderThanMs)*time.Millisecond)
}

// sweep is the retention timer's prune.
func (co *Coordinator) sweep(c actor.Context) {
	co.ret.timer = nil
	if co.ret.running != nil {
		co.scheduleSweep() // a jobs.prune is under way; next time
		return
	}
	co.startPrune(c, &pruneState{}, co.deps.Retention)
}

func (co *Coordinator) scheduleSweep() {
	if co.deps.Retention > 0 && co.ret.timer == nil {
		co.ret.timer = co.after(retentionInterval(co.deps.Retention), &retentionTick{})
	}
}

// startPrune chooses the finished jobs that ended at least olderThan ago,
// with no waiter on their runs and no report of theirs in flight or in the
// store, and their children that nothing else references; then asks the
// registry which children are live.
func (co *Coordinator) startPrune(c actor.Context, p *pruneState, olderThan time.Duration) {
	cutoff := co.deps.Clock.Now().Add(-olderThan).UnixMilli()
	busy := map[string]bool{} // runs a waiter or a report still needs
	for _, w := range co.waits.byID {
		for _, id := range w.runIDs {
			busy[id] = true
		}
	}
	for id := range co.reports.inFlight {
		busy[id] = true
	}
	reports, err := co.deps.Store.Reports()
	if err != nil {
		co.endPrune(p, protocol.Errorf(protocol.CodeInternal, "list reports: %w", err))
		return
	}
	for _, r := range reports {
		busy[r.RunID] = true
	}
	newest := co.idx.newest(nil)
	for i := len(newest) - 1; i >= 0; i-- { // oldest first
		j := newest[i]
		if j.EndedAt == 0 || j.EndedAt > cutoff || co.actors[j.JobID] != nil {
			continue
		}
		ok := true
		for _, r := range j.Runs {
			if !r.State.Terminal() || busy[r.RunID] {
				ok = false
				break
			}
		}
		if ok {
			p.jobs = append(p.jobs, j.JobID)
		}
	}
	p.agents = co.freeChildren(p.jobs)
	co.ret.running = p
	if len(p.agents) == 0 {
		co.deleteJobs(p)
		return
	}
	c.Request(co.deps.Registry, &registry.AgentStates{AgentIDs: p.agents})
}

// freeChildren returns the children of the jobs gone that no other job
// names: every run of theirs is in gone, and no job outside gone has them
// as its parent.
func (co *Coordinator) freeChildren(gone []string) []string {
	in := map[string]bool{}
	for _, id := range gone {
		in[id] = true
	}
	parents := map[string]bool{}
	for id, j := range co.idx.jobs {
		if !in[id] {
			parents[j.ParentAgentID] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, id := range gone {
		j := co.idx.job(id)
		if j == nil {
			continue
		}
		for _, r := range j.Runs {
			a := r.AgentID
			if seen[a] || parents[a] {
				continue
			}
			seen[a] = true
			free := true
			for _, run := range co.idx.agentRuns[a] {
				if !in[co.idx.jobOf(run)] {
					free = false
					break
				}
			}
			if free {
				out = append(out, a)
			}
		}
	}
	return out
}

// onAgentStates keeps every job with a live child (a runtime not stopped,
// or a client attached), and the children of kept jobs.
func (co *Coordinator) onAgentStates(m *registry.AgentStatesResult) {
	p := co.ret.running
	if p == nil {
		return
	}
	live := map[string]bool{}
	for _, in := range m.Infos {
		if (in.RuntimeState != protocol.RuntimeStopped && in.RuntimeState != protocol.RuntimeFailed) || m.Attachments[in.AgentID] > 0 {
			live[in.AgentID] = true
		}
	}
	if len(live) > 0 {
		kept := p.jobs[:0]
		for _, id := range p.jobs {
			j := co.idx.job(id)
			if j == nil {
				continue
			}
			ok := true
			for _, r := range j.Runs {
				if live[r.AgentID] {
					ok = false
					break
				}
			}
			if ok {
				kept = append(kept, id)
			}
		}
		p.jobs = kept
		p.agents = co.freeChildren(p.jobs)
	}
	co.deleteJobs(p)
}

// deleteJobs answers a dry run, or deletes the chosen jobs off the mailbox
// (the store checks again, in its transaction, that each has finished).
func (co *Coordinator) deleteJobs(p *pruneState) {
	if p.dryRun || len(p.jobs) == 0 {
		co.endPrune(p, nil)
		return
	}
	sys, self, st, ids := co.sys, co.self, co.deps.Store, p.jobs
	if !co.deps.Group.Go(func() {
		deleted, err := st.DeleteJobs(ids)
		sys.Root.Send(self, &jobsDeleted{ids: deleted, err: err})
	}) {
		co.endPrune(p, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
	}
}

// onJobsDeleted forgets the deleted jobs and removes their free children
// through agent.remove (which checks again).
func (co *Coordinator) onJobsDeleted(c actor.Context, m *jobsDeleted) {
	p := co.ret.running
	if p == nil {
		return
	}
	if m.err != nil {
		co.endPrune(p, protocol.Errorf(protocol.CodeInternal, "delete jobs: %w", m.err))
		return
	}
	p.agents = co.freeChildren(m.ids)
	for _, id := range m.ids {
		if j := co.idx.job(id); j != nil {
			co.idx.forget(j)
		}
	}
	p.jobs = m.ids
	if len(p.agents) == 0 {
		co.endPrune(p, nil)
		return
	}
	c.Request(co.deps.Registry, &registry.RemoveAgents{AgentIDs: p.agents})
}

// onAgentsRemoved keeps, of the children, those agent.remove removed.
func (co *Coordinator) onAgentsRemoved(m *registry.RemoveAgentsResult) {
	p := co.ret.running
	if p == nil {
		return
	}
	p.agents = p.agents[:0]
	for _, r := range m.Data.Results {
		if r.Removed {
			p.agents = append(p.agents, r.AgentID)
		}
	}
	co.endPrune(p, nil)
}

// endPrune answers the command (or logs the sweep: counts only) and arms
// the next sweep.
func (co *Coordinator) endPrune(p *pruneState, err error) {
	co.ret.running = nil
	if err != nil {
		co.deps.Logger.Error("jobs: prune", "err", err)
	} else {
		co.deps.Logger.Info("jobs: prune", "jobs", len(p.jobs), "agents", len(p.agents), "dry_run", p.dryRun, "sweep", p.cmd == nil)
	}
	if p.cmd != nil {
		if err != nil {
			fail(p.cmd, err)
		} else {
			data := protocol.JobsPruneData{JobIDs: p.jobs, AgentIDs: p.agents, DryRun: p.dryRun}
			if data.JobIDs == nil {
				data.JobIDs = []string{}
			}
			if data.AgentIDs == nil {
				data.AgentIDs = []string{}
			}
			reply(p.cmd, data)
		}
	}
	co.scheduleSweep()
}
