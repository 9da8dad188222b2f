package jobs

import (
	"container/list"
	"slices"
	"sort"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// directory is what the coordinator reads of the agents: manifests (a
// parent's cwd, model and launch policy; a child's parent) and
// parent-scoped aliases. *store.Store is one.
//
// These are reads inside the coordinator's Receive, kept there on purpose:
// a bbolt read is a View transaction on the memory map (no fsync, no
// writer lock, microseconds), and what they read is not the coordinator's
// to cache: manifests are written by the registry and the agents, and
// caching every alias would copy a whole bucket to serve a few lookups.
type directory interface {
	aliasBinder
	GetAgent(id string) (store.Agent, error)
}

// jobReader is what the index reads of the jobs that are not live: each a
// keyed read of the store's indexes (docs in store/jobindex.go), fine
// inside Receive for the same reason as directory's. *store.Store is one.
type jobReader interface {
	directory
	GetJob(id string) (store.Job, error)
	JobOfRun(runID string) (string, bool, error)
	LatestRun(agentID string) (store.RunRef, bool, error)
	JobByRequest(parent, requestID string) (string, bool, error)
	AliasBindings(norm string) ([]store.AliasBinding, error)
	WalkParentJobs(parent, before string, fn func(*store.Job) bool) error
}

// recentJobs is how many finished jobs the index keeps after their last
// read or their end. They are the jobs still looked at: a subagent.wait
// or status on runs that just ended, jobs.show of recent work, the
// waiters' checks at every terminal transition. A record without its
// task text is about a kilobyte, so the cache stays near 1 MiB however
// long the history, and reads beyond it are one keyed bbolt read each.
const recentJobs = 1024

// index is the coordinator's view of the jobs: the live ones (a job actor
// runs them, or a relaunch's commit is in flight) in memory, by id, by run
// and by child agent; a few recently used finished ones in an LRU; every
// other job read from the store on demand. Its state follows the live
// work, not the history. It is used by the coordinator alone (not safe for
// concurrent use). Records are the index's own copies, without task text
// (only a job actor reads it, from its own record, and the wire never
// carries it: view.RunSnapshot); callers must not change them.
type index struct {
	st        jobReader
	live      map[string]*store.Job // live jobs, by id
	liveRuns  map[string]string     // run_id → job_id, live jobs
	liveAgent map[string][]string   // agent_id → run ids of live jobs, oldest first
	recent    *jobLRU
}

func newIndex(st jobReader) *index {
	return &index{st: st, live: map[string]*store.Job{}, liveRuns: map[string]string{},
		liveAgent: map[string][]string{}, recent: newJobLRU(recentJobs)}
}

// requestKey keys an idempotent create: its parent and request id.
func requestKey(parent, requestID string) string { return parent + "\x00" + requestID }

// stripped is the index's copy of j: without the runs' task text.
func stripped(j *store.Job) *store.Job {
	jj := *j
	jj.Runs = slices.Clone(j.Runs)
	for i := range jj.Runs {
		jj.Runs[i].Task = ""
	}
	return &jj
}

// addLive indexes (a copy of) j as live: a job actor runs it, or its
// commit is in flight.
func (x *index) addLive(j *store.Job) {
	if _, known := x.live[j.JobID]; !known {
		for _, r := range j.Runs {
			x.liveAgent[r.AgentID] = append(x.liveAgent[r.AgentID], r.RunID)
			x.liveRuns[r.RunID] = j.JobID
		}
	}
	x.recent.remove(j.JobID)
	x.live[j.JobID] = stripped(j)
}

// put records a persisted change of j: in place when it is live, else in
// the LRU (a change that arrives after the job ended).
func (x *index) put(j *store.Job) {
	if _, ok := x.live[j.JobID]; ok {
		x.live[j.JobID] = stripped(j)
		return
	}
	x.recent.add(stripped(j))
}

// retire moves a job that ended from the live set to the LRU.
func (x *index) retire(id string) {
	j := x.dropLive(id)
	if j != nil {
		x.recent.add(j)
	}
}

// dropLive removes a job from the live set and returns it, or nil.
func (x *index) dropLive(id string) *store.Job {
	j, ok := x.live[id]
	if !ok {
		return nil
	}
	delete(x.live, id)
	for _, r := range j.Runs {
		delete(x.liveRuns, r.RunID)
		runs := slices.DeleteFunc(x.liveAgent[r.AgentID], func(id string) bool { return id == r.RunID })
		if len(runs) == 0 {
			delete(x.liveAgent, r.AgentID)
		} else {
			x.liveAgent[r.AgentID] = runs
		}
	}
	return j
}

// forget drops a job: a create whose commit failed, or a deleted one.
func (x *index) forget(id string) {
	x.dropLive(id)
	x.recent.remove(id)
}

// job is the job of that id, or nil.
func (x *index) job(id string) *store.Job {
	if j := x.live[id]; j != nil {
		return j
	}
	if j := x.recent.get(id); j != nil {
		return j
	}
	if !ids.HasPrefix(id, "job") {
		return nil
	}
	stored, err := x.st.GetJob(id)
	if err != nil {
		return nil // not found (or unreadable: as before, not found)
	}
	j := stripped(&stored)
	x.recent.add(j)
	return j
}

// jobOf is the id of the job holding run id, or "".
func (x *index) jobOf(runID string) string {
	if id := x.liveRuns[runID]; id != "" {
		return id
	}
	if !ids.HasPrefix(runID, "run") {
		return ""
	}
	id, _, _ := x.st.JobOfRun(runID)
	return id
}

// byRequest is the job a parent created with requestID, or nil.
func (x *index) byRequest(parent, requestID string) *store.Job {
	id, ok, err := x.st.JobByRequest(parent, requestID)
	if err != nil || !ok {
		return nil
	}
	return x.job(id)
}

// run is a run and its job, or nils.
func (x *index) run(id string) (*store.Job, *store.Run) {
	jobID := x.jobOf(id)
	if jobID == "" {
		return nil, nil
	}
	j := x.job(jobID)
	if j == nil {
		return nil, nil
	}
	r := j.Run(id)
	if r == nil {
		return nil, nil
	}
	return j, r
}

// liveRun is the agent's nonterminal run, or nil. Only a live job has
// one: a job leaves the live set when it ends, with all its runs terminal.
func (x *index) liveRun(agentID string) *store.Run {
	for _, id := range x.liveAgent[agentID] {
		if _, r := x.run(id); r != nil && !r.State.Terminal() {
			return r
		}
	}
	return nil
}

// currentRun is the agent's nonterminal run, else its latest, else nil.
func (x *index) currentRun(agentID string) *store.Run {
	if r := x.liveRun(agentID); r != nil {
		return r
	}
	latest := ""
	if runs := x.liveAgent[agentID]; len(runs) > 0 {
		latest = runs[len(runs)-1]
	}
	if ref, ok, err := x.st.LatestRun(agentID); err == nil && ok && ref.RunID > latest {
		// Run ids sort by creation time: the store's newest is newer.
		latest = ref.RunID
	}
	if latest == "" {
		return nil
	}
	_, r := x.run(latest)
	return r
}

// parentJobs returns up to n of parent's jobs, newest first: the stored
// ones, and live ones not stored yet (a relaunch committing).
func (x *index) parentJobs(parent string, n int) []*store.Job {
	var out []*store.Job
	seen := map[string]bool{}
	_ = x.st.WalkParentJobs(parent, "", func(j *store.Job) bool {
		seen[j.JobID] = true
		if lj := x.live[j.JobID]; lj != nil {
			out = append(out, lj)
		} else {
			sj := stripped(j)
			x.recent.add(sj)
			out = append(out, sj)
		}
		return len(out) < n
	})
	for id, j := range x.live {
		if j.ParentAgentID == parent && !seen[id] {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].JobID > out[b].JobID })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// agent reads an agent's manifest.
func (x *index) agent(id string) (store.Agent, error) { return x.st.GetAgent(id) }

// alias resolves a parent-scoped alias to its agent.
func (x *index) alias(parent, handle string) (string, bool) {
	id, ok, err := x.st.Alias(parent, view.NormalizeAlias(handle))
	return id, err == nil && ok
}

// aliasBindings returns every parent's binding of an alias.
func (x *index) aliasBindings(handle string) []store.AliasBinding {
	b, err := x.st.AliasBindings(view.NormalizeAlias(handle))
	if err != nil {
		return nil
	}
	return b
}

// resolveAgent resolves an agent id, a run id (its run's agent:
// docs/protocol.md §10.3 subagent.relaunch takes "agent_id, run_id, or
// alias") or a parent-scoped alias to a child of parent; anything else
// (including another parent's child) is NOT_FOUND.
func (x *index) resolveAgent(parent, h string) (string, error) {
	if ids.HasPrefix(h, "run") {
		if j, r := x.run(h); r != nil && j.ParentAgentID == parent {
			return r.AgentID, nil
		}
	}
	if ids.HasPrefix(h, "agent") {
		if a, err := x.st.GetAgent(h); err == nil && a.ParentAgentID == parent {
			return h, nil
		}
		// A child that lives on another node of a cluster has no manifest
		// here: its runs, held by its parent's jobs here, say whose it is.
		if r := x.currentRun(h); r != nil && r.Anywhere {
			if j, _ := x.run(r.RunID); j != nil && j.ParentAgentID == parent {
				return h, nil
			}
		}
	}
	if id, ok := x.alias(parent, h); ok {
		return id, nil
	}
	return "", protocol.Errorf(protocol.CodeNotFound, "no subagent %q of %s", h, parent)
}

// resolveRuns turns handles into run ids, owned by parent: typed ids first,
// then parent-scoped aliases. Agent and alias handles snapshot to the
// agent's current-or-latest run. Each run appears once, in handle order.
func (x *index) resolveRuns(parent string, handles []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, h := range handles {
		if ids.HasPrefix(h, "job") {
			if j := x.job(h); j != nil {
				if j.ParentAgentID != parent {
					return nil, protocol.Errorf(protocol.CodeNotFound, "no job %s", h)
				}
				for _, r := range j.Runs {
					add(r.RunID)
				}
				continue
			}
		}
		if ids.HasPrefix(h, "run") {
			if j, _ := x.run(h); j != nil {
				if j.ParentAgentID != parent {
					return nil, protocol.Errorf(protocol.CodeNotFound, "no run %s", h)
				}
				add(h)
				continue
			}
		}
		agentID, err := x.resolveAgent(parent, h)
		if err != nil {
			return nil, err
		}
		run := x.currentRun(agentID)
		if run == nil {
			return nil, protocol.Errorf(protocol.CodeNotFound, "agent %s has no run", h)
		}
		add(run.RunID)
	}
	return out, nil
}

// jobLRU holds the most recently used finished jobs, up to a size.
type jobLRU struct {
	size  int
	order *list.List // of *store.Job, most recent first
	byID  map[string]*list.Element
}

func newJobLRU(size int) *jobLRU {
	return &jobLRU{size: size, order: list.New(), byID: map[string]*list.Element{}}
}

func (l *jobLRU) get(id string) *store.Job {
	e := l.byID[id]
	if e == nil {
		return nil
	}
	l.order.MoveToFront(e)
	return e.Value.(*store.Job)
}

// add stores j, replacing the record of the same id, and evicts the least
// recently used beyond the size.
func (l *jobLRU) add(j *store.Job) {
	if e := l.byID[j.JobID]; e != nil {
		e.Value = j
		l.order.MoveToFront(e)
		return
	}
	l.byID[j.JobID] = l.order.PushFront(j)
	for l.order.Len() > l.size {
		last := l.order.Back()
		l.order.Remove(last)
		delete(l.byID, last.Value.(*store.Job).JobID)
	}
}

func (l *jobLRU) remove(id string) {
	if e := l.byID[id]; e != nil {
		l.order.Remove(e)
		delete(l.byID, id)
	}
}

func (l *jobLRU) len() int { return l.order.Len() }
