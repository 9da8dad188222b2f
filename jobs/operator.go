package jobs

import (
	"time"

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
//
// It is served from the store, off the mailbox: the walk visits the jobs
// bbolt holds (one parent's through its index when parent_agent_id is
// given) and stops as soon as the page is full, one past it to know a
// next page exists, or at the first job created before since_ms. A job
// actor persists every change before it tells the coordinator, so the
// store is never behind what the coordinator holds; a relaunch whose
// commit is in flight is not listed until it committed, as its ack is not
// sent before.
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
	st, now, log := co.deps.Store, co.deps.Clock.Now(), co.deps.Logger
	if !co.deps.Group.Go(func() {
		page, next, err := listJobs(st, m, cur, now)
		if err != nil {
			log.Error("jobs: list", "err", err)
			fail(cmd, protocol.Errorf(protocol.CodeInternal, "could not read the jobs"))
			return
		}
		reply(cmd, protocol.JobsListData{Jobs: page, NextCursor: next})
	}) {
		fail(cmd, errStopping)
	}
}

// jobWalker is what jobs.list reads; *store.Store is one.
type jobWalker interface {
	WalkJobs(before string, fn func(*store.Job) bool) error
	WalkParentJobs(parent, before string, fn func(*store.Job) bool) error
	WalkOpenJobs(before string, fn func(*store.Job) bool) error
}

// liveOnly reports whether only jobs that have not ended can match m: a
// queued or running job, or a stuck run, has a run that is not terminal.
// Those lists (shardctl status, jobs ls --stuck) walk the open jobs only.
func liveOnly(m *protocol.JobsList) bool {
	return m.Stuck || m.State == protocol.JobQueued || m.State == protocol.JobRunning
}

// listJobs walks the store for one page of jobs.list.
//
// since_ms ends the walk at the first job created before it: the walk is
// in job-id order, and a job's id and created_at are taken from the same
// clock at its create, so every later job in the walk is older still.
func listJobs(st jobWalker, m *protocol.JobsList, cur *protocol.Cursor, now time.Time) ([]protocol.OpJob, string, error) {
	before := ""
	if cur != nil {
		before = cur.ID // an earlier page held it and everything newer
	}
	kept := []protocol.OpJob{}
	visit := func(j *store.Job) bool {
		if m.SinceMs != 0 && j.CreatedAt < m.SinceMs {
			return false
		}
		v := view.OpView(j, now)
		if m.State != "" && v.State != m.State {
			return true
		}
		if m.Stuck && !view.AnyStuck(v) {
			return true
		}
		kept = append(kept, v)
		// One past the page: enough to know a next page exists.
		return m.Limit <= 0 || len(kept) <= m.Limit
	}
	var err error
	switch {
	case m.ParentAgentID != "":
		err = st.WalkParentJobs(m.ParentAgentID, before, visit)
	case liveOnly(m):
		err = st.WalkOpenJobs(before, visit)
	default:
		err = st.WalkJobs(before, visit)
	}
	if err != nil {
		return nil, "", err
	}
	page, next := paging.Page(kept, nil, m.Limit, jobKey, paging.DescendingID)
	return page, next, nil
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
		// Every parent that binds the alias, through the store's reverse
		// index: no scan of the parents.
		var found []*store.Job
		for _, b := range co.idx.aliasBindings(h) {
			if r := co.idx.currentRun(b.AgentID); r != nil {
				if rj, _ := co.idx.run(r.RunID); rj != nil {
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
