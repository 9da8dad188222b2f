package jobs

import (
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

// index is the coordinator's view of every job, in memory: by id, by run,
// by child agent and by idempotency key. It is pure bookkeeping (its only
// reads are through dir) and used by the coordinator alone (not safe for
// concurrent use). Records are the index's own copies.
type index struct {
	dir       directory
	jobs      map[string]*store.Job // every job, by id
	runJob    map[string]string     // run_id → job_id
	agentRuns map[string][]string   // agent_id → run ids, oldest first
	requests  map[string]string     // requestKey(parent, request_id) → job_id
}

func newIndex(dir directory) *index {
	return &index{dir: dir, jobs: map[string]*store.Job{}, runJob: map[string]string{},
		agentRuns: map[string][]string{}, requests: map[string]string{}}
}

// requestKey keys an idempotent create: its parent and request id.
func requestKey(parent, requestID string) string { return parent + "\x00" + requestID }

// put indexes (a copy of) j, replacing the record of the same id. A job's
// runs never change agent, so they are added to agentRuns once.
//
// The copy leaves out the runs' task text: only a job actor reads it (to
// prompt the child), from its own record, and the wire never carries it
// (view.RunSnapshot), while the index keeps every job of the history.
func (x *index) put(j *store.Job) {
	if _, known := x.jobs[j.JobID]; !known {
		for _, r := range j.Runs {
			x.agentRuns[r.AgentID] = append(x.agentRuns[r.AgentID], r.RunID)
		}
	}
	jj := *j
	jj.Runs = slices.Clone(j.Runs)
	for i := range jj.Runs {
		jj.Runs[i].Task = ""
	}
	x.jobs[j.JobID] = &jj
	for _, r := range j.Runs {
		x.runJob[r.RunID] = j.JobID
	}
	if j.RequestID != "" {
		x.requests[requestKey(j.ParentAgentID, j.RequestID)] = j.JobID
	}
}

// forget drops j (a create whose commit failed).
func (x *index) forget(j *store.Job) {
	if _, ok := x.jobs[j.JobID]; !ok {
		return
	}
	delete(x.jobs, j.JobID)
	if key := requestKey(j.ParentAgentID, j.RequestID); j.RequestID != "" && x.requests[key] == j.JobID {
		delete(x.requests, key)
	}
	for _, r := range j.Runs {
		delete(x.runJob, r.RunID)
		runs := x.agentRuns[r.AgentID]
		for i, id := range runs {
			if id == r.RunID {
				x.agentRuns[r.AgentID] = append(runs[:i], runs[i+1:]...)
				break
			}
		}
		if len(x.agentRuns[r.AgentID]) == 0 {
			delete(x.agentRuns, r.AgentID)
		}
	}
}

// job is the job of that id, or nil.
func (x *index) job(id string) *store.Job { return x.jobs[id] }

// jobOf is the id of the job holding run id, or "".
func (x *index) jobOf(runID string) string { return x.runJob[runID] }

// byRequest is the job a parent created with requestID, or nil.
func (x *index) byRequest(parent, requestID string) *store.Job {
	return x.jobs[x.requests[requestKey(parent, requestID)]]
}

// run is a run and its job, or nils.
func (x *index) run(id string) (*store.Job, *store.Run) {
	j := x.jobs[x.runJob[id]]
	if j == nil {
		return nil, nil
	}
	return j, j.Run(id)
}

// currentRun is the agent's nonterminal run, else its latest, else nil.
func (x *index) currentRun(agentID string) *store.Run {
	var latest *store.Run
	for _, id := range x.agentRuns[agentID] {
		_, r := x.run(id)
		if r == nil {
			continue
		}
		if !r.State.Terminal() {
			return r
		}
		latest = r
	}
	return latest
}

// newest returns the jobs keep accepts (nil: all), newest first (ids sort
// by time).
func (x *index) newest(keep func(*store.Job) bool) []*store.Job {
	var out []*store.Job
	for _, j := range x.jobs {
		if keep == nil || keep(j) {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].JobID > out[b].JobID })
	return out
}

// agent reads an agent's manifest.
func (x *index) agent(id string) (store.Agent, error) { return x.dir.GetAgent(id) }

// alias resolves a parent-scoped alias to its agent.
func (x *index) alias(parent, handle string) (string, bool) {
	id, ok, err := x.dir.Alias(parent, view.NormalizeAlias(handle))
	return id, err == nil && ok
}

// resolveAgent resolves an agent id, a run id (its run's agent:
// docs/protocol.md §10.3 subagent.relaunch takes "agent_id, run_id, or
// alias") or a parent-scoped alias to a child of parent; anything else
// (including another parent's child) is NOT_FOUND.
func (x *index) resolveAgent(parent, h string) (string, error) {
	if ids.HasPrefix(h, "run") && x.runJob[h] != "" {
		if j := x.jobs[x.runJob[h]]; j != nil && j.ParentAgentID == parent {
			for _, r := range j.Runs {
				if r.RunID == h {
					return r.AgentID, nil
				}
			}
		}
	}
	if ids.HasPrefix(h, "agent") {
		if a, err := x.dir.GetAgent(h); err == nil && a.ParentAgentID == parent {
			return h, nil
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
		switch {
		case ids.HasPrefix(h, "job") && x.jobs[h] != nil:
			j := x.jobs[h]
			if j.ParentAgentID != parent {
				return nil, protocol.Errorf(protocol.CodeNotFound, "no job %s", h)
			}
			for _, r := range j.Runs {
				add(r.RunID)
			}
		case ids.HasPrefix(h, "run") && x.runJob[h] != "":
			if x.jobs[x.runJob[h]].ParentAgentID != parent {
				return nil, protocol.Errorf(protocol.CodeNotFound, "no run %s", h)
			}
			add(h)
		default:
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
	}
	return out, nil
}
