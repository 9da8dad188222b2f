package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The reads in this file serve a jobs coordinator that holds only
// unfinished jobs in memory: each answers one lookup with keyed reads of
// the indexes (schema version 3), so its cost follows the records asked
// for, not the history. The walks visit records one at a time and stop
// when the caller says so, so a page costs its own size. A missing index
// bucket (a file of an older version opened read-only, which is never
// migrated) reads as empty.

// RunRef names one run and the job that holds it.
type RunRef struct {
	RunID string
	JobID string
}

// AliasBinding is one parent's binding of a normalized alias.
type AliasBinding struct {
	ParentAgentID string
	AgentID       string
}

// indexRuns writes the run indexes of j's runs.
func indexRuns(tx *bolt.Tx, j *Job) error {
	rj, ar := tx.Bucket([]byte(bucketRunJobs)), tx.Bucket([]byte(bucketAgentRuns))
	if rj == nil || ar == nil {
		return fmt.Errorf("%w: run index buckets missing", ErrSchema)
	}
	for _, r := range j.Runs {
		if err := rj.Put([]byte(r.RunID), []byte(j.JobID)); err != nil {
			return err
		}
		if err := ar.Put([]byte(scoped(r.AgentID, r.RunID)), []byte(j.JobID)); err != nil {
			return err
		}
	}
	return nil
}

// unindexRuns removes the run indexes of j's runs (the job is deleted).
func unindexRuns(tx *bolt.Tx, j *Job) error {
	rj, ar := tx.Bucket([]byte(bucketRunJobs)), tx.Bucket([]byte(bucketAgentRuns))
	if rj == nil || ar == nil {
		return fmt.Errorf("%w: run index buckets missing", ErrSchema)
	}
	for _, r := range j.Runs {
		if err := rj.Delete([]byte(r.RunID)); err != nil {
			return err
		}
		if err := ar.Delete([]byte(scoped(r.AgentID, r.RunID))); err != nil {
			return err
		}
	}
	return nil
}

// runRefs copies what the run indexes key on: each run's id and agent.
func runRefs(j *Job) []Run {
	out := make([]Run, len(j.Runs))
	for i, r := range j.Runs {
		out[i] = Run{RunID: r.RunID, AgentID: r.AgentID}
	}
	return out
}

// sameRuns reports whether b has a's runs: the same ids on the same agents.
func sameRuns(a, b *Job) bool {
	if len(a.Runs) != len(b.Runs) {
		return false
	}
	for i := range a.Runs {
		if a.Runs[i].RunID != b.Runs[i].RunID || a.Runs[i].AgentID != b.Runs[i].AgentID {
			return false
		}
	}
	return true
}

// JobOfRun returns the id of the job that holds run runID; false when no
// stored job does.
func (s *Store) JobOfRun(runID string) (string, bool, error) {
	var id string
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketRunJobs)); b != nil {
			id = string(b.Get([]byte(runID)))
		}
		return nil
	})
	return id, id != "", wrapOp(err, "job of run %q", runID)
}

// AgentRuns returns the runs of agentID, oldest first (run ids sort by
// creation time).
func (s *Store) AgentRuns(agentID string) ([]RunRef, error) {
	var out []RunRef
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketAgentRuns))
		if b == nil {
			return nil
		}
		eachWithPrefix(b, scoped(agentID, ""), func(rest, v []byte) {
			out = append(out, RunRef{RunID: string(rest), JobID: string(v)})
		})
		return nil
	})
	return out, wrapOp(err, "runs of agent %q", agentID)
}

// LatestRun returns the newest run of agentID; false when it has none.
func (s *Store) LatestRun(agentID string) (RunRef, bool, error) {
	var ref RunRef
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketAgentRuns))
		if b == nil {
			return nil
		}
		prefix := []byte(scoped(agentID, ""))
		k, v := lastWithPrefix(b.Cursor(), prefix)
		if k != nil {
			ref = RunRef{RunID: string(k[len(prefix):]), JobID: string(v)}
		}
		return nil
	})
	return ref, ref.RunID != "", wrapOp(err, "latest run of agent %q", agentID)
}

// eachWithPrefix calls fn, in key order, with every key of b that starts
// with prefix (the rest of the key after it) and its value. The slices
// are bbolt's: valid only inside the transaction, so fn copies what it
// keeps.
func eachWithPrefix(b *bolt.Bucket, prefix string, fn func(rest, v []byte)) {
	p := []byte(prefix)
	c := b.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		fn(k[len(p):], v)
	}
}

// lastWithPrefix positions c on the last key with prefix and returns it, or
// nils. The prefix ends in \x00, so every key of it sorts before the prefix
// with its last byte raised to \x01.
func lastWithPrefix(c *bolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := bytes.Clone(prefix)
	end[len(end)-1]++
	var k, v []byte
	if sk, _ := c.Seek(end); sk == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil, nil
	}
	return k, v
}

// JobByRequest returns the id of the job parent created with requestID (an
// idempotent subagent.create); false when there is none.
func (s *Store) JobByRequest(parent, requestID string) (string, bool, error) {
	var id string
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketRequests)); b != nil {
			id = string(b.Get([]byte(scoped(parent, requestID))))
		}
		return nil
	})
	return id, id != "", wrapOp(err, "job of request %q", requestID)
}

// AliasBindings returns every parent's binding of the normalized alias
// norm, by parent id.
func (s *Store) AliasBindings(norm string) ([]AliasBinding, error) {
	var out []AliasBinding
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketAliasParents))
		if b == nil {
			return nil
		}
		eachWithPrefix(b, scoped(norm, ""), func(rest, v []byte) {
			out = append(out, AliasBinding{ParentAgentID: string(rest), AgentID: string(v)})
		})
		return nil
	})
	return out, wrapOp(err, "bindings of alias %q", norm)
}

// AgentJobs returns the ids of the jobs that name agentID: as a run's
// agent, or as their parent. Retention removes an agent only once none is
// left.
func (s *Store) AgentJobs(agentID string) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := scoped(agentID, "")
		if b := tx.Bucket([]byte(bucketAgentRuns)); b != nil {
			eachWithPrefix(b, prefix, func(_, job []byte) { out = append(out, string(job)) })
		}
		pj, err := bucket(tx, bucketParentJobs)
		if err != nil {
			return err
		}
		eachWithPrefix(pj, prefix, func(job, _ []byte) { out = append(out, string(job)) })
		return nil
	})
	return out, wrapOp(err, "jobs of agent %q", agentID)
}

// WalkJobs calls fn with every job whose id sorts before before (every
// job when before is ""), newest first (job ids sort by creation time),
// until fn returns false. The whole walk is one read transaction.
func (s *Store) WalkJobs(before string, fn func(*Job) bool) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		c := b.Cursor()
		k, v := c.Last()
		if before != "" {
			if sk, _ := c.Seek([]byte(before)); sk != nil {
				k, v = c.Prev()
			} else {
				k, v = c.Last()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			var j Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("decode %s record %q: %w", bucketJobs, k, err)
			}
			if !fn(&j) {
				return nil
			}
		}
		return nil
	})
	return wrapOp(err, "walk jobs")
}

// WalkJobsOldest calls fn with every job, oldest first, until fn returns
// false (retention: the jobs old enough to remove come first).
func (s *Store) WalkJobsOldest(fn func(*Job) bool) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var j Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("decode %s record %q: %w", bucketJobs, k, err)
			}
			if !fn(&j) {
				return nil
			}
		}
		return nil
	})
	return wrapOp(err, "walk jobs")
}

// WalkParentJobs is WalkJobs over the jobs of parent only, through the
// parent_jobs index.
func (s *Store) WalkParentJobs(parent, before string, fn func(*Job) bool) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		pj, err := bucket(tx, bucketParentJobs)
		if err != nil {
			return err
		}
		jb, err := bucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		prefix := []byte(scoped(parent, ""))
		c := pj.Cursor()
		var k []byte
		if before == "" {
			k, _ = lastWithPrefix(c, prefix)
		} else if k, _ = c.Seek([]byte(scoped(parent, before))); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			raw := jb.Get(k[len(prefix):])
			if raw == nil {
				continue
			}
			var j Job
			if err := json.Unmarshal(raw, &j); err != nil {
				return fmt.Errorf("decode %s record %q: %w", bucketJobs, k[len(prefix):], err)
			}
			if !fn(&j) {
				return nil
			}
		}
		return nil
	})
	return wrapOp(err, "walk jobs of %q", parent)
}

// WalkOpenJobs is WalkJobs over the jobs that have not ended only, through
// the open_jobs index: what jobs.list's queued, running and stuck filters
// can match (a job with a run that is not terminal has not ended), read
// without visiting the finished history.
func (s *Store) WalkOpenJobs(before string, fn func(*Job) bool) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		open, err := bucket(tx, bucketOpenJobs)
		if err != nil {
			return err
		}
		jb, err := bucket(tx, bucketJobs)
		if err != nil {
			return err
		}
		c := open.Cursor()
		var k []byte
		if before == "" {
			k, _ = c.Last()
		} else if k, _ = c.Seek([]byte(before)); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil; k, _ = c.Prev() {
			raw := jb.Get(k)
			if raw == nil {
				continue
			}
			var j Job
			if err := json.Unmarshal(raw, &j); err != nil {
				return fmt.Errorf("decode %s record %q: %w", bucketJobs, k, err)
			}
			if !fn(&j) {
				return nil
			}
		}
		return nil
	})
	return wrapOp(err, "walk open jobs")
}
