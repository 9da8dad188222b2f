package jobs

import (
	"sort"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

func (co *Coordinator) opList(cmd *Command, m *protocol.JobsList) {
	now := co.deps.Now()
	out := protocol.JobsListData{Jobs: []protocol.OpJob{}}
	var all []*store.Job
	for _, j := range co.jobs {
		all = append(all, j)
	}
	sort.Slice(all, func(a, b int) bool { return all[a].JobID > all[b].JobID }) // newest first
	for _, j := range all {
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
func (co *Coordinator) opShow(cmd *Command, m *protocol.JobsShow) {
	h := m.Handle
	var job *store.Job
	switch {
	case ids.HasPrefix(h, "job"):
		job = co.jobs[h]
	case ids.HasPrefix(h, "run"):
		job = co.jobs[co.runJob[h]]
	case ids.HasPrefix(h, "agent"):
		if r := co.currentRun(h); r != nil {
			job = co.jobs[co.runJob[r.RunID]]
		}
	default:
		norm := view.NormalizeAlias(h)
		var found []*store.Job
		seen := map[string]bool{}
		for _, j := range co.jobs {
			if seen[j.ParentAgentID] {
				continue
			}
			if id, ok, err := co.deps.Store.Alias(j.ParentAgentID, norm); err == nil && ok {
				seen[j.ParentAgentID] = true
				if r := co.currentRun(id); r != nil {
					found = append(found, co.jobs[co.runJob[r.RunID]])
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
	reply(cmd, view.OpView(job, co.deps.Now()))
}
