package jobs

import (
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/internal/paging"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// opList answers jobs.list: every parent's jobs, newest first (job_id
// descending, which is creation order: job ids are ULIDs), filtered, then
// one page (docs/protocol.md §13 "Paged lists").
func (co *Coordinator) opList(cmd *registry.Command, m *protocol.JobsList) {
	var cur *protocol.Cursor
	if m.Cursor != "" {
		c, err := protocol.DecodeCursor(protocol.CursorJobs, m.Cursor)
		if err != nil {
			fail(cmd, err)
			return
		}
		cur = &c
	}
	now := co.deps.Clock.Now()
	var kept []protocol.OpJob
	for _, j := range co.idx.newest(nil) {
		if cur != nil && j.JobID >= cur.ID {
			// At or before the cursor: an earlier page held it.
			continue
		}
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
		kept = append(kept, v)
		if m.Limit > 0 && len(kept) > m.Limit {
			// One past the page: enough to know a next page exists.
			break
		}
	}
	page, next := paging.Page(kept, nil, m.Limit, jobKey, paging.DescendingID)
	if page == nil {
		page = []protocol.OpJob{}
	}
	reply(cmd, protocol.JobsListData{Jobs: page, NextCursor: next})
}

// jobKey is a job's place in jobs.list's order.
func jobKey(j protocol.OpJob) protocol.Cursor {
	return protocol.Cursor{Kind: protocol.CursorJobs, ID: j.JobID}
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
