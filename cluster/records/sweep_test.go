package records_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/protocol"
)

// TestSweepJobs: the parent's node deletes the records of its old jobs it
// does not hold: held runs (a refused create's) and ended ones (a job its
// retention removed), their claim pointers, then the job record. It keeps
// a job it holds, a recent one (a create in flight), another node's, a
// job whose holding it cannot tell, and a run a node claimed and has not
// ended (with its job), until that run ends.
func TestSweepJobs(t *testing.T) {
	b := setup(t, 1, records.Options{})
	rec := b.rec[0]
	put := func(j records.JobRecord, runs ...records.RunRecord) {
		t.Helper()
		for _, r := range runs {
			j.RunIDs = append(j.RunIDs, r.RunID)
		}
		if _, err := rec.Jobs.Create(ctx(t), j.JobID, j); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if _, err := rec.Runs.Create(ctx(t), records.RunKey(r.JobID, r.RunID), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := func(id, node string) records.JobRecord {
		j := job(id)
		j.ParentNode, j.CreatedAt = node, 100
		return j
	}
	ended := func(jobID, id string) records.RunRecord {
		r := run(jobID, id)
		r.State, r.Node, r.Incarnation, r.EndedAt = protocol.RunCompleted, "n2", "1", 5
		return r
	}
	// A refused create's records: held runs, one with a stale pointer.
	put(old("job-refused", "n1"), run("job-refused", "run-a"), run("job-refused", "run-b"))
	if err := rec.Queue(ctx(t), run("job-refused", "run-b")); err != nil {
		t.Fatal(err)
	}
	// A job its retention removed: ended runs.
	put(old("job-pruned", "n1"), ended("job-pruned", "run-c"))
	// A job still running on n2, its parent's job gone.
	claimed := run("job-running", "run-d")
	claimed.State, claimed.Node, claimed.Incarnation = protocol.RunActive, "n2", "1"
	put(old("job-running", "n1"), claimed, ended("job-running", "run-e"))
	// Kept: held here, recent, another node's, unknown.
	put(old("job-held", "n1"), run("job-held", "run-f"))
	recent := old("job-recent", "n1")
	recent.CreatedAt = 1000
	put(recent, run("job-recent", "run-g"))
	put(old("job-other", "n2"), run("job-other", "run-h"))
	put(old("job-unknown", "n1"), run("job-unknown", "run-i"))

	holds := func(id string) (bool, error) {
		switch id {
		case "job-held":
			return true, nil
		case "job-unknown":
			return false, errors.New("store closed")
		}
		return false, nil
	}
	res, err := rec.SweepJobs(ctx(t), "n1", 1000, holds)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Jobs)
	if !slices.Equal(res.Jobs, []string{"job-pruned", "job-refused"}) || res.Runs != 4 {
		t.Fatalf("swept %+v, want jobs job-pruned and job-refused, 4 runs (a, b, c, e)", res)
	}
	keys, err := rec.Runs.Keys(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"job-held.run-f", "job-other.run-h", "job-recent.run-g", "job-running.run-d", "job-unknown.run-i"}
	if !slices.Equal(keys, want) {
		t.Fatalf("run records left %v, want %v", keys, want)
	}
	if q, err := rec.Claims.Keys(ctx(t), ""); err != nil || len(q) != 0 {
		t.Fatalf("claim pointers left: %v %v", q, err)
	}
	jobs, err := rec.Jobs.Keys(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(jobs)
	if !slices.Equal(jobs, []string{"job-held", "job-other", "job-recent", "job-running", "job-unknown"}) {
		t.Fatalf("job records left %v", jobs)
	}

	// The claimed run ends: the next sweep takes it and its job.
	e, err := rec.Runs.Get(ctx(t), "job-running.run-d")
	if err != nil {
		t.Fatal(err)
	}
	e.Value.State, e.Value.EndedAt = protocol.RunInterrupted, 9
	if _, err := rec.Runs.Update(ctx(t), e.Key, e.Value, e.Revision); err != nil {
		t.Fatal(err)
	}
	if res, err = rec.SweepJobs(ctx(t), "n1", 1000, holds); err != nil || !slices.Equal(res.Jobs, []string{"job-running"}) || res.Runs != 1 {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
	if _, err := rec.Jobs.Get(ctx(t), "job-running"); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("job-running after its last run ended: %v", err)
	}
	// Nothing more to do.
	if res, err = rec.SweepJobs(ctx(t), "n1", 1000, holds); err != nil || len(res.Jobs) != 0 || res.Runs != 0 {
		t.Fatalf("third sweep: %+v %v", res, err)
	}
}
