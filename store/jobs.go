package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// Job is the durable record of a subagent job and its runs (docs/protocol.md
// §10.3, §11.2). Task text is private: it lives only here and in the create
// or relaunch payload, never in any projection.
type Job struct {
	JobID         string               `json:"job_id"`
	ParentAgentID string               `json:"parent_agent_id"`
	Strategy      protocol.JobStrategy `json:"strategy"`
	// RequestID makes create idempotent per parent.
	RequestID string `json:"request_id,omitempty"`
	Runs      []Run  `json:"runs"`
	// HaltedBy is the run_id of the chain step that halted the chain.
	HaltedBy  string `json:"halted_by,omitempty"`
	StoppedAt int64  `json:"stopped_at,omitempty"`
	CreatedAt int64  `json:"created_at"`
	EndedAt   int64  `json:"ended_at,omitempty"`
}

// Run is one run of a job: one task on one child Agent.
type Run struct {
	RunID   string `json:"run_id"`
	Index   int    `json:"index"`
	Name    string `json:"name"`
	AgentID string `json:"agent_id"`
	Alias   string `json:"alias,omitempty"`
	// Task is the private task text, delivered to the child as its prompt.
	Task  string            `json:"task"`
	State protocol.RunState `json:"state"`
	// TimeoutMs is the run's start-to-close budget; Deadline is set from it
	// when the run starts.
	TimeoutMs int64              `json:"timeout_ms,omitempty"`
	Deadline  int64              `json:"deadline,omitempty"`
	QueuedAt  int64              `json:"queued_at"`
	StartedAt int64              `json:"started_at,omitempty"`
	EndedAt   int64              `json:"ended_at,omitempty"`
	FinalText string             `json:"final_text,omitempty"`
	Usage     *protocol.RunUsage `json:"usage,omitempty"`
	Error     string             `json:"error,omitempty"`
	// StopRequestedAt and StopStage record a stop (abort, term, kill).
	StopRequestedAt int64  `json:"stop_requested_at,omitempty"`
	StopStage       string `json:"stop_stage,omitempty"`
	// ExitStatus describes how the child's runtime ended, when it did.
	ExitStatus string `json:"exit_status,omitempty"`
	// Workspace is the run's workspace under isolation "workspace" (its
	// diff stat is recorded when the run ends); nil otherwise.
	Workspace *protocol.RunWorkspace `json:"workspace,omitempty"`
	// Steers are the steers of the run and their outcomes, newest
	// protocol.MaxRunSteers (never the message text).
	Steers []protocol.RunSteer `json:"steers,omitempty"`
	// Node is the cluster node the run runs on ("" on a single shardd, or
	// while a run any node may take waits to be claimed).
	Node string `json:"node,omitempty"`
	// Anywhere marks a run any node of the cluster may claim: its record
	// in the cluster decides its state, which this node follows (the job
	// actor never starts it here itself).
	Anywhere bool `json:"anywhere,omitempty"`
}

// Report is a completion report waiting to be delivered to the parent. It
// is written in the same transaction as the run's terminal transition and
// deleted once the parent's runtime accepted it, so a report survives
// daemon crashes until delivered.
type Report struct {
	RunID         string            `json:"run_id"`
	JobID         string            `json:"job_id"`
	ParentAgentID string            `json:"parent_agent_id"`
	AgentID       string            `json:"agent_id"`
	Alias         string            `json:"alias,omitempty"`
	Name          string            `json:"name"`
	State         protocol.RunState `json:"state"`
	Error         string            `json:"error,omitempty"`
	FinalText     string            `json:"final_text,omitempty"`
	CreatedAt     int64             `json:"created_at"`
	// Workspace is the run's workspace and diff stat, if it had one.
	Workspace *protocol.RunWorkspace `json:"workspace,omitempty"`
}

// Run returns the run with id, or nil.
func (j *Job) Run(id string) *Run {
	for i := range j.Runs {
		if j.Runs[i].RunID == id {
			return &j.Runs[i]
		}
	}
	return nil
}

func scoped(parent, key string) string { return parent + "\x00" + key }

// CreateJob commits a job, the manifests of its new child Agents and their
// aliases (normalized alias → agent_id) in one transaction. A repeated
// request id for the parent returns the existing job's id with an error
// wrapping ErrExists; an alias already bound to another agent of the parent
// is ErrConflict. Nothing is written on any error.
func (s *Store) CreateJob(j Job, agents []Agent, aliases map[string]string) (existing string, err error) {
	return s.CreateJobWorkspaces(j, agents, aliases, nil)
}

// CreateJobWorkspaces is CreateJob that also stores new workspace records
// in the same transaction (subagent.create with isolation "workspace"):
// each must be new (ErrConflict wrapping ErrExists otherwise) and claims
// its worktree path like CreateWorkspace (ErrConflict when a live record
// holds it). Nothing is written on any error.
func (s *Store) CreateJobWorkspaces(j Job, agents []Agent, aliases map[string]string, workspaces []Workspace) (existing string, err error) {
	fn, existingp, err := createJobOp(j, agents, aliases, workspaces)
	if err != nil {
		return "", err
	}
	err = s.update(fn)
	return *existingp, wrapOp(err, "create job %q", j.JobID)
}

// CreateJobWorkspacesThen is CreateJobWorkspaces without waiting: then
// gets its answers once the transaction committed (or failed), on the
// store's writer goroutine, and must not block (see updateThen). An
// invalid job is answered at once, on the caller's goroutine.
func (s *Store) CreateJobWorkspacesThen(j Job, agents []Agent, aliases map[string]string, workspaces []Workspace, then func(existing string, err error)) {
	fn, existingp, err := createJobOp(j, agents, aliases, workspaces)
	if err != nil {
		then("", err)
		return
	}
	s.updateThen(fn, func(err error) { then(*existingp, wrapOp(err, "create job %q", j.JobID)) })
}

// createJobOp validates a new job and returns the write that stores it,
// with where that write leaves the existing job's id (see CreateJob).
func createJobOp(j Job, agents []Agent, aliases map[string]string, workspaces []Workspace) (func(*bolt.Tx) error, *string, error) {
	if j.JobID == "" || j.ParentAgentID == "" || len(j.Runs) == 0 {
		return nil, nil, fmt.Errorf("%w: job needs an id, a parent and runs", ErrInvalid)
	}
	for _, a := range agents {
		if err := a.validate(); err != nil {
			return nil, nil, err
		}
	}
	for i := range workspaces {
		if err := workspaces[i].validate(); err != nil {
			return nil, nil, err
		}
	}
	existing := new(string)
	return func(tx *bolt.Tx) error {
		*existing = ""
		if j.RequestID != "" {
			reqs, err := bucket(tx, bucketRequests)
			if err != nil {
				return err
			}
			if prev := reqs.Get([]byte(scoped(j.ParentAgentID, j.RequestID))); prev != nil {
				*existing = string(prev)
				return fmt.Errorf("%w: request %q of %s", ErrExists, j.RequestID, j.ParentAgentID)
			}
			if err := reqs.Put([]byte(scoped(j.ParentAgentID, j.RequestID)), []byte(j.JobID)); err != nil {
				return err
			}
		}
		if taken, err := exists(tx, bucketJobs, j.JobID); err != nil || taken {
			if err == nil {
				err = fmt.Errorf("%w: job %q", ErrExists, j.JobID)
			}
			return err
		}
		al, err := bucket(tx, bucketAliases)
		if err != nil {
			return err
		}
		for norm, agentID := range aliases {
			key := []byte(scoped(j.ParentAgentID, norm))
			if prev := al.Get(key); prev != nil && string(prev) != agentID {
				return fmt.Errorf("%w: alias %q is bound to another agent", ErrConflict, norm)
			}
			if err := al.Put(key, []byte(agentID)); err != nil {
				return err
			}
			if err := tx.Bucket([]byte(bucketAliasParents)).Put([]byte(scoped(norm, j.ParentAgentID)), []byte(agentID)); err != nil {
				return err
			}
		}
		for _, a := range agents {
			if taken, err := exists(tx, bucketAgents, a.AgentID); err != nil || taken {
				if err == nil {
					err = fmt.Errorf("%w: agent %q", ErrExists, a.AgentID)
				}
				return err
			}
			if err := putJSON(tx, bucketAgents, a.AgentID, a); err != nil {
				return err
			}
		}
		for i := range workspaces {
			w := workspaces[i]
			taken, err := exists(tx, bucketWorkspaces, w.WorkspaceID)
			if err != nil {
				return err
			}
			if taken {
				return fmt.Errorf("%w: %w: workspace %q", ErrConflict, ErrExists, w.WorkspaceID)
			}
			if w.Live() {
				if err := claimPath(tx, &w); err != nil {
					return err
				}
			}
			if err := putJSON(tx, bucketWorkspaces, w.WorkspaceID, w); err != nil {
				return err
			}
		}
		pj, err := bucket(tx, bucketParentJobs)
		if err != nil {
			return err
		}
		if err := pj.Put([]byte(scoped(j.ParentAgentID, j.JobID)), nil); err != nil {
			return err
		}
		if err := indexRuns(tx, &j); err != nil {
			return err
		}
		return putJob(tx, &j)
	}, existing, nil
}

// GetJob returns the job with id, or an error wrapping ErrNotFound.
func (s *Store) GetJob(id string) (Job, error) {
	var j Job
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getJSON(tx, bucketJobs, id, &j)
		if err == nil && !found {
			err = fmt.Errorf("%w: job %q", ErrNotFound, id)
		}
		return err
	})
	return j, wrapOp(err, "get job %q", id)
}

// Jobs returns every job, oldest first (job ids sort by creation time).
func (s *Store) Jobs() ([]Job, error) {
	var out []Job
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = listJSON[Job](tx, bucketJobs)
		return err
	})
	return out, wrapOp(err, "list jobs")
}

// Alias returns the agent bound to a parent's normalized alias.
func (s *Store) Alias(parent, norm string) (string, bool, error) {
	var id string
	err := s.db.View(func(tx *bolt.Tx) error {
		al, err := bucket(tx, bucketAliases)
		if err != nil {
			return err
		}
		if v := al.Get([]byte(scoped(parent, norm))); v != nil {
			id = string(v)
		}
		return nil
	})
	return id, id != "", wrapOp(err, "resolve alias")
}

// UpdateJob applies fn to the job in one read-modify-write transaction and
// stores the reports fn returns in the same transaction. fn checks the
// states it expects (compare-and-set) and returns an error — ErrConflict
// when the record moved on — to write nothing. It returns the stored job.
// fn may run more than once (a group-commit retry, on a fresh copy of the
// job), so it must depend on the job it is given, and any variable it sets
// is overwritten by its last run.
func (s *Store) UpdateJob(id string, fn func(*Job) ([]Report, error)) (Job, error) {
	var j Job
	err := s.update(func(tx *bolt.Tx) error {
		j = Job{} // a group-commit retry runs this again
		found, err := getJSON(tx, bucketJobs, id, &j)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: job %q", ErrNotFound, id)
		}
		before := Job{Runs: runRefs(&j)}
		reports, err := fn(&j)
		if err != nil {
			return err
		}
		if j.JobID != id {
			return fmt.Errorf("%w: job_id may not change", ErrInvalid)
		}
		if !sameRuns(&before, &j) {
			return fmt.Errorf("%w: a job's runs (ids and agents) may not change", ErrInvalid)
		}
		for _, r := range reports {
			if err := putJSON(tx, bucketReports, r.RunID, r); err != nil {
				return err
			}
		}
		return putJob(tx, &j)
	})
	return j, wrapOp(err, "update job %q", id)
}

// putJob writes j and keeps the open-jobs index in step with it: a job is
// indexed until it has ended. The run indexes (run_jobs, agent_runs) are
// written once, at the create (createJobOp): a job's runs are fixed then
// (a relaunch is a new job), and UpdateJob refuses a change to them.
func putJob(tx *bolt.Tx, j *Job) error {
	open, err := bucket(tx, bucketOpenJobs)
	if err != nil {
		return err
	}
	if j.EndedAt == 0 {
		err = open.Put([]byte(j.JobID), nil)
	} else {
		err = open.Delete([]byte(j.JobID))
	}
	if err != nil {
		return err
	}
	return putJSON(tx, bucketJobs, j.JobID, *j)
}

// UpdateOpenJobs applies fn to every job that has not ended, oldest first,
// in one transaction of its own (startup reconciliation: one commit,
// idempotent if interrupted); fn runs exactly once per such job and never
// sees an ended one, whose runs are all terminal. It reads the open-jobs
// index, so its cost follows the unfinished jobs, not the history. fn
// reports whether it changed the job and which reports to store.
func (s *Store) UpdateOpenJobs(fn func(*Job) (changed bool, reports []Report, err error)) error {
	err := s.updateAlone(func(tx *bolt.Tx) error {
		open, err := bucket(tx, bucketOpenJobs)
		if err != nil {
			return err
		}
		var ids []string // collected first: fn's writes change the index
		if err := open.ForEach(func(k, _ []byte) error { ids = append(ids, string(k)); return nil }); err != nil {
			return err
		}
		for _, id := range ids {
			var j Job
			found, err := getJSON(tx, bucketJobs, id, &j)
			if err != nil {
				return err
			}
			if !found {
				// An index entry without its job cannot come from putJob;
				// drop it rather than fail every start.
				if err := open.Delete([]byte(id)); err != nil {
					return err
				}
				continue
			}
			changed, reports, err := fn(&j)
			if err != nil {
				return err
			}
			for _, r := range reports {
				if err := putJSON(tx, bucketReports, r.RunID, r); err != nil {
					return err
				}
			}
			if changed {
				if j.JobID != id {
					return fmt.Errorf("%w: job_id may not change", ErrInvalid)
				}
				if err := putJob(tx, &j); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return wrapOp(err, "update open jobs")
}

// OpenJobs returns the ids of the jobs that have not ended, oldest first.
func (s *Store) OpenJobs() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		open := tx.Bucket([]byte(bucketOpenJobs))
		if open == nil {
			return nil // a file from before version 2, opened read-only
		}
		return open.ForEach(func(k, _ []byte) error { out = append(out, string(k)); return nil })
	})
	return out, wrapOp(err, "list open jobs")
}

// Reports returns every undelivered completion report.
func (s *Store) Reports() ([]Report, error) {
	var out []Report
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = listJSON[Report](tx, bucketReports)
		return err
	})
	return out, wrapOp(err, "list reports")
}

// DeleteReport forgets a delivered report. Deleting an absent one is fine.
func (s *Store) DeleteReport(runID string) error {
	err := s.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketReports)
		if err != nil {
			return err
		}
		return b.Delete([]byte(runID))
	})
	return wrapOp(err, "delete report %q", runID)
}

// DeleteJobs forgets finished jobs (retention, docs/protocol.md §10.3
// jobs.prune): each job's record, its parent index entry and its
// idempotency key, in one transaction that first checks, against the
// records as they are at that commit, that the job has ended, every run of
// it is terminal and no completion report of its runs waits for delivery.
// A job that fails the check is kept and left out of the answer (an
// unfinished job is never removed); a missing one is skipped. It returns
// the ids it deleted. The Agents of the runs are not touched: they go
// through DeleteAgent, whose own checks decide.
func (s *Store) DeleteJobs(ids []string) ([]string, error) {
	var deleted []string
	err := s.update(func(tx *bolt.Tx) error {
		deleted = nil // a group-commit retry runs this again
		reports, err := bucket(tx, bucketReports)
		if err != nil {
			return err
		}
		for _, id := range ids {
			var j Job
			found, err := getJSON(tx, bucketJobs, id, &j)
			if err != nil {
				return err
			}
			if !found || !jobFinished(&j, reports) {
				continue
			}
			if j.RequestID != "" {
				reqs, err := bucket(tx, bucketRequests)
				if err != nil {
					return err
				}
				key := []byte(scoped(j.ParentAgentID, j.RequestID))
				if string(reqs.Get(key)) == j.JobID {
					if err := reqs.Delete(key); err != nil {
						return err
					}
				}
			}
			if err := unindexRuns(tx, &j); err != nil {
				return err
			}
			for _, name := range []string{bucketParentJobs, bucketOpenJobs, bucketJobs} {
				b, err := bucket(tx, name)
				if err != nil {
					return err
				}
				key := j.JobID
				if name == bucketParentJobs {
					key = scoped(j.ParentAgentID, j.JobID)
				}
				if err := b.Delete([]byte(key)); err != nil {
					return err
				}
			}
			deleted = append(deleted, j.JobID)
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp(err, "delete jobs")
	}
	return deleted, nil
}

// jobFinished reports whether j may be forgotten: it has ended, every run
// is terminal, and no report of its runs is undelivered.
func jobFinished(j *Job, reports *bolt.Bucket) bool {
	if j.EndedAt == 0 {
		return false
	}
	for _, r := range j.Runs {
		if !r.State.Terminal() || reports.Get([]byte(r.RunID)) != nil {
			return false
		}
	}
	return true
}
