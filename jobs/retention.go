package jobs

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// pruneState is a jobs.prune or a retention sweep in progress (one at a
// time): the jobs and children chosen off the mailbox from the store, then
// the registry's live check, the store's deletion and agent.remove, each
// answered to the mailbox.
type pruneState struct {
	cmd    *registry.Command // nil: the retention timer's sweep
	dryRun bool
	jobs   []string // oldest first
	agents []string
	// runs: each chosen job's runs (ids and agents only).
	runs map[string][]store.Run
	// refs: each child of a chosen job → every stored job that names it
	// (as a run's agent or as its parent), when the jobs were chosen.
	refs map[string][]string
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

// startPrune chooses, off the mailbox, the finished jobs that ended at
// least olderThan ago, with no waiter on their runs and no report of
// theirs in flight or in the store, and their children that nothing else
// references; then (pruneChosen) asks the registry which children are
// live. The jobs are walked from the oldest, and the walk stops at the
// first one created after the cut-off: a job ends after it is created,
// and ids sort by creation time, so none further can qualify. It reads
// the history from bbolt, never from memory.
func (co *Coordinator) startPrune(c actor.Context, p *pruneState, olderThan time.Duration) {
	cutoff := co.deps.Clock.Now().Add(-olderThan).UnixMilli()
	busy := co.busyRuns()
	live := map[string]bool{}
	for id := range co.actors {
		live[id] = true
	}
	for id := range co.idx.live {
		live[id] = true
	}
	co.ret.running = p
	st, sys, self := co.deps.Store, co.sys, co.self
	if !co.deps.Group.Go(func() {
		m := &pruneChosen{runs: map[string][]store.Run{}, refs: map[string][]string{}}
		m.err = choosePrune(st, cutoff, busy, live, m)
		sys.Root.Send(self, m)
	}) {
		co.endPrune(p, errStopping)
	}
}

// busyRuns are the runs a waiter or a report in flight still needs.
func (co *Coordinator) busyRuns() map[string]bool {
	busy := map[string]bool{}
	for _, w := range co.waits.byID {
		for _, id := range w.runIDs {
			busy[id] = true
		}
	}
	for id := range co.reports.inFlight {
		busy[id] = true
	}
	return busy
}

// choosePrune fills m from the store (see startPrune); it runs off the
// mailbox and touches nothing of the coordinator's.
func choosePrune(st *store.Store, cutoff int64, busy, live map[string]bool, m *pruneChosen) error {
	reports, err := st.Reports()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "list reports: %w", err)
	}
	for _, r := range reports {
		busy[r.RunID] = true
	}
	err = st.WalkJobsOldest(func(j *store.Job) bool {
		if j.CreatedAt > cutoff {
			return false
		}
		if j.EndedAt == 0 || j.EndedAt > cutoff || live[j.JobID] {
			return true
		}
		for _, r := range j.Runs {
			if !r.State.Terminal() || busy[r.RunID] {
				return true
			}
		}
		m.jobs = append(m.jobs, j.JobID)
		for _, r := range j.Runs {
			m.runs[j.JobID] = append(m.runs[j.JobID], store.Run{RunID: r.RunID, AgentID: r.AgentID})
		}
		return true
	})
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "walk jobs: %w", err)
	}
	for _, id := range m.jobs {
		for _, r := range m.runs[id] {
			if _, done := m.refs[r.AgentID]; done {
				continue
			}
			refs, err := st.AgentJobs(r.AgentID)
			if err != nil {
				return protocol.Errorf(protocol.CodeInternal, "jobs of agent %s: %w", r.AgentID, err)
			}
			m.refs[r.AgentID] = refs
		}
	}
	return nil
}

// onPruneChosen takes the store's choice, drops the jobs a waiter or a
// report took meanwhile, and asks the registry which children are live.
func (co *Coordinator) onPruneChosen(c actor.Context, m *pruneChosen) {
	p := co.ret.running
	if p == nil {
		return
	}
	if m.err != nil {
		co.endPrune(p, m.err)
		return
	}
	busy := co.busyRuns()
	p.runs, p.refs = m.runs, m.refs
	for _, id := range m.jobs {
		ok := co.actors[id] == nil
		for _, r := range p.runs[id] {
			ok = ok && !busy[r.RunID]
		}
		if ok {
			p.jobs = append(p.jobs, id)
		}
	}
	p.agents = co.freeChildren(p, p.jobs)
	if len(p.agents) == 0 {
		co.deleteJobs(p)
		return
	}
	c.Request(co.deps.Registry, &registry.AgentStates{AgentIDs: p.agents})
}

// freeChildren returns the children of the jobs gone that no other job
// names: every stored job naming them (p.refs) is in gone, and no live job
// runs them or has them as its parent.
func (co *Coordinator) freeChildren(p *pruneState, gone []string) []string {
	in := map[string]bool{}
	for _, id := range gone {
		in[id] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, id := range gone {
		for _, r := range p.runs[id] {
			a := r.AgentID
			if seen[a] {
				continue
			}
			seen[a] = true
			free := !co.liveRefers(a)
			for _, jid := range p.refs[a] {
				free = free && in[jid]
			}
			if free {
				out = append(out, a)
			}
		}
	}
	return out
}

// liveRefers reports whether a live job runs agent a or has it as parent.
func (co *Coordinator) liveRefers(a string) bool {
	if len(co.idx.liveAgent[a]) > 0 {
		return true
	}
	for _, j := range co.idx.live {
		if j.ParentAgentID == a {
			return true
		}
	}
	return false
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
			ok := true
			for _, r := range p.runs[id] {
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
		p.agents = co.freeChildren(p, p.jobs)
	}
	co.deleteJobs(p)
}

// deleteJobs answers a dry run, or deletes the chosen jobs off the mailbox
// (the store checks again, in its transaction, that each has finished),
// then reads which of their children no stored job names any more.
func (co *Coordinator) deleteJobs(p *pruneState) {
	if p.dryRun || len(p.jobs) == 0 {
		co.endPrune(p, nil)
		return
	}
	sys, self, st, ids := co.sys, co.self, co.deps.Store, p.jobs
	var children []string
	seen := map[string]bool{}
	for _, id := range ids {
		for _, r := range p.runs[id] {
			if !seen[r.AgentID] {
				seen[r.AgentID] = true
				children = append(children, r.AgentID)
			}
		}
	}
	if !co.deps.Group.Go(func() {
		deleted, err := st.DeleteJobs(ids)
		m := &jobsDeleted{ids: deleted, err: err}
		if err == nil && len(deleted) > 0 {
			m.free, m.err = unreferenced(st, children)
		}
		sys.Root.Send(self, m)
	}) {
		co.endPrune(p, errStopping)
	}
}

// unreferenced returns the agents no stored job names.
func unreferenced(st *store.Store, agents []string) ([]string, error) {
	var out []string
	for _, a := range agents {
		refs, err := st.AgentJobs(a)
		if err != nil {
			return nil, err
		}
		if len(refs) == 0 {
			out = append(out, a)
		}
	}
	return out, nil
}

// onJobsDeleted forgets the deleted jobs and removes their free children
// (those no stored job and no live one names) through agent.remove (which
// checks again).
func (co *Coordinator) onJobsDeleted(c actor.Context, m *jobsDeleted) {
	p := co.ret.running
	if p == nil {
		return
	}
	if m.err != nil {
		co.endPrune(p, protocol.Errorf(protocol.CodeInternal, "delete jobs: %w", m.err))
		return
	}
	for _, id := range m.ids {
		co.idx.forget(id)
	}
	p.jobs = m.ids
	p.agents = nil
	if len(m.ids) > 0 {
		// Children of the deleted jobs only (another job of the chosen
		// set may have been kept by the store's check).
		gone := map[string]bool{}
		for _, id := range m.ids {
			for _, r := range p.runs[id] {
				gone[r.AgentID] = true
			}
		}
		for _, a := range m.free {
			if gone[a] && !co.liveRefers(a) {
				p.agents = append(p.agents, a)
			}
		}
	}
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
