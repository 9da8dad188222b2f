package jobs

import (
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// opList answers jobs.list: every parent's jobs, newest first, filtered.
func (co *Coordinator) opList(cmd *registry.Command, m *protocol.JobsList) {
	now := co.deps.Clock.Now()
	out := protocol.JobsListData{Jobs: []protocol.OpJob{}}
	for _, j := range co.idx.newest(nil) {
		if m.ParentAgentID != "" && j.ParentAgentID != m.ParentAgentID {
			continue
		}
		if m.SinceMs != 0 && j.CreatedAt < m.SinceMs {
			continue
		}
		v := view.OpView(j, now)
		if m.State != "" && v.State != m.State {
			continue
		}
		if m.Stuck && !view.AnyStuck(v) {
			continue
		}
		out.Jobs = append(out.Jobs, v)
		if m.Limit > 0 && len(out.Jobs) == m.Limit {
			break
		}
	}
	reply(cmd, out)
}

// opShow resolves a job, run, agent or alias handle across every parent.
// An alias two parents use is ambiguous: CONFLICT, use an id.
func (co *Coordinator) opShow(cmd *registry.Command, m *protocol.JobsShow) {
	h := m.Handle
	var job *store.Job
	switch {
	case ids.HasPrefix(h, "job"):
		job = co.idx.job(h)
	case ids.HasPrefix(h, "run"):
		job, _ = co.idx.run(h)
	case ids.HasPrefix(h, "agent"):
		if r := co.idx.currentRun(h); r != nil {
			job, _ = co.idx.run(r.RunID)
		}
	default:
		var found []*store.Job
		seen := map[string]bool{}
		for _, j := range co.idx.newest(nil) {
			if seen[j.ParentAgentID] {
				continue
			}
			if id, ok := co.idx.alias(j.ParentAgentID, h); ok {
				seen[j.ParentAgentID] = true
				if r := co.idx.currentRun(id); r != nil {
					rj, _ := co.idx.run(r.RunID)
					found = append(found, rj)
				}
			}
		}
		if len(found) > 1 {
			fail(cmd, protocol.Errorf(protocol.CodeConflict, "alias %q is used by %d parents; use a job, run or agent id", h, len(found)))
			return
		}
		if len(found) == 1 {
			job = found[0]
		}
	}
	if job == nil {
		fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no job for %q", h))
		return
	}
	reply(cmd, view.OpView(job, co.deps.Clock.Now()))
}
