package store

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// jobIDs collects a walk's job ids, stopping after max (0: all).
func walkIDs(t *testing.T, max int, walk func(fn func(*Job) bool) error) []string {
	t.Helper()
	var out []string
	if err := walk(func(j *Job) bool {
		out = append(out, j.JobID)
		return max == 0 || len(out) < max
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// indexFixture: parent agent-p has jobs job-1 (runs on agent-x and
// agent-y, request req-1) and job-3 (a relaunch of agent-x); parent agent-q
// has job-2 (agent-z). agent-p binds ada → agent-x, agent-q binds ada →
// agent-z.
func jobIndexFixture(t *testing.T) *Store {
	t.Helper()
	s := openTest(t)
	for _, a := range []Agent{agent("agent-p", 1), agent("agent-q", 1)} {
		if err := s.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
	}
	j1 := Job{JobID: "job-1", ParentAgentID: "agent-p", RequestID: "req-1", CreatedAt: 1, Runs: []Run{
		{RunID: "run-1a", AgentID: "agent-x", State: protocol.RunQueued},
		{RunID: "run-1b", AgentID: "agent-y", State: protocol.RunQueued}}}
	if _, err := s.CreateJob(j1, []Agent{childAgent("agent-x", "agent-p"), childAgent("agent-y", "agent-p")},
		map[string]string{"ada": "agent-x"}); err != nil {
		t.Fatal(err)
	}
	j2 := Job{JobID: "job-2", ParentAgentID: "agent-q", CreatedAt: 2, Runs: []Run{{RunID: "run-2a", AgentID: "agent-z"}}}
	if _, err := s.CreateJob(j2, []Agent{childAgent("agent-z", "agent-q")}, map[string]string{"ada": "agent-z"}); err != nil {
		t.Fatal(err)
	}
	j3 := Job{JobID: "job-3", ParentAgentID: "agent-p", CreatedAt: 3, Runs: []Run{{RunID: "run-3a", AgentID: "agent-x"}}}
	if _, err := s.CreateJob(j3, nil, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJobIndexLookups(t *testing.T) {
	s := jobIndexFixture(t)
	for run, want := range map[string]string{"run-1a": "job-1", "run-1b": "job-1", "run-2a": "job-2", "run-3a": "job-3"} {
		if got, ok, err := s.JobOfRun(run); err != nil || !ok || got != want {
			t.Errorf("JobOfRun(%s) = %q, %v, %v; want %s", run, got, ok, err, want)
		}
	}
	if _, ok, err := s.JobOfRun("run-9"); err != nil || ok {
		t.Errorf("JobOfRun(run-9) found, %v; want not", err)
	}
	refs, err := s.AgentRuns("agent-x")
	if err != nil || !slices.Equal(refs, []RunRef{{"run-1a", "job-1"}, {"run-3a", "job-3"}}) {
		t.Errorf("AgentRuns(agent-x) = %v, %v; want run-1a, run-3a oldest first", refs, err)
	}
	if ref, ok, err := s.LatestRun("agent-x"); err != nil || !ok || ref != (RunRef{"run-3a", "job-3"}) {
		t.Errorf("LatestRun(agent-x) = %v, %v, %v; want run-3a", ref, ok, err)
	}
	// agent-x's prefix must not reach agent-xy's runs, nor the last key.
	if _, ok, err := s.LatestRun("agent-"); err != nil || ok {
		t.Errorf("LatestRun(agent-) found, %v; want none", err)
	}
	if ref, ok, err := s.LatestRun("agent-z"); err != nil || !ok || ref.RunID != "run-2a" {
		t.Errorf("LatestRun(agent-z) = %v, %v, %v; want run-2a (the last key of the bucket)", ref, ok, err)
	}
	if id, ok, err := s.JobByRequest("agent-p", "req-1"); err != nil || !ok || id != "job-1" {
		t.Errorf("JobByRequest = %q, %v, %v; want job-1", id, ok, err)
	}
	if _, ok, _ := s.JobByRequest("agent-q", "req-1"); ok {
		t.Error("JobByRequest found another parent's request")
	}
	binds, err := s.AliasBindings("ada")
	if err != nil || !slices.Equal(binds, []AliasBinding{{"agent-p", "agent-x"}, {"agent-q", "agent-z"}}) {
		t.Errorf("AliasBindings(ada) = %v, %v", binds, err)
	}
	if got, err := s.AgentJobs("agent-x"); err != nil || !slices.Equal(got, []string{"job-1", "job-3"}) {
		t.Errorf("AgentJobs(agent-x) = %v, %v", got, err)
	}
	if got, err := s.AgentJobs("agent-p"); err != nil || !slices.Equal(got, []string{"job-1", "job-3"}) {
		t.Errorf("AgentJobs(agent-p) = %v, %v; want the jobs it parents", got, err)
	}
}

func TestJobWalks(t *testing.T) {
	s := jobIndexFixture(t)
	for _, tt := range []struct {
		name string
		max  int
		walk func(fn func(*Job) bool) error
		want []string
	}{
		{"all, newest first", 0, func(fn func(*Job) bool) error { return s.WalkJobs("", fn) }, []string{"job-3", "job-2", "job-1"}},
		{"stops when told", 2, func(fn func(*Job) bool) error { return s.WalkJobs("", fn) }, []string{"job-3", "job-2"}},
		{"before an id", 0, func(fn func(*Job) bool) error { return s.WalkJobs("job-3", fn) }, []string{"job-2", "job-1"}},
		{"before an absent id", 0, func(fn func(*Job) bool) error { return s.WalkJobs("job-25", fn) }, []string{"job-2", "job-1"}},
		{"before past the end", 0, func(fn func(*Job) bool) error { return s.WalkJobs("job-9", fn) }, []string{"job-3", "job-2", "job-1"}},
		{"before the first", 0, func(fn func(*Job) bool) error { return s.WalkJobs("job-1", fn) }, nil},
		{"oldest first", 0, s.WalkJobsOldest, []string{"job-1", "job-2", "job-3"}},
		{"a parent's", 0, func(fn func(*Job) bool) error { return s.WalkParentJobs("agent-p", "", fn) }, []string{"job-3", "job-1"}},
		{"a parent's, before", 0, func(fn func(*Job) bool) error { return s.WalkParentJobs("agent-p", "job-3", fn) }, []string{"job-1"}},
		{"a parent's, before past its end", 0, func(fn func(*Job) bool) error { return s.WalkParentJobs("agent-p", "job-9", fn) }, []string{"job-3", "job-1"}},
		{"the last parent's", 0, func(fn func(*Job) bool) error { return s.WalkParentJobs("agent-q", "", fn) }, []string{"job-2"}},
		{"a parent's, before past the bucket's end", 0, func(fn func(*Job) bool) error { return s.WalkParentJobs("agent-q", "job-9", fn) }, []string{"job-2"}},
		{"a parent with none", 0, func(fn func(*Job) bool) error { return s.WalkParentJobs("agent-x", "", fn) }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := walkIDs(t, tt.max, tt.walk); !slices.Equal(got, tt.want) {
				t.Fatalf("walk = %v; want %v", got, tt.want)
			}
		})
	}
}

// Deleting a job removes its run indexes; deleting an agent removes its
// alias's reverse entry; a job's runs cannot change under the indexes.
func TestJobIndexesFollowDeletes(t *testing.T) {
	s := jobIndexFixture(t)
	if _, err := s.UpdateJob("job-1", func(j *Job) ([]Report, error) {
		j.Runs = append(j.Runs, Run{RunID: "run-1c", AgentID: "agent-x"})
		return nil, nil
	}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("UpdateJob adding a run = %v; want ErrInvalid", err)
	}
	for _, id := range []string{"job-1", "job-3"} {
		if _, err := s.UpdateJob(id, func(j *Job) ([]Report, error) {
			for i := range j.Runs {
				j.Runs[i].State = protocol.RunCompleted
			}
			j.EndedAt = 5
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.DeleteJobs([]string{"job-1"}); err != nil || !slices.Equal(got, []string{"job-1"}) {
		t.Fatalf("DeleteJobs = %v, %v", got, err)
	}
	if _, ok, _ := s.JobOfRun("run-1a"); ok {
		t.Error("run-1a still indexed after its job was deleted")
	}
	if refs, _ := s.AgentRuns("agent-x"); !slices.Equal(refs, []RunRef{{"run-3a", "job-3"}}) {
		t.Errorf("AgentRuns(agent-x) = %v; want run-3a only", refs)
	}
	if refs, _ := s.AgentRuns("agent-y"); len(refs) != 0 {
		t.Errorf("AgentRuns(agent-y) = %v; want none", refs)
	}
	if got, _ := s.AgentJobs("agent-y"); len(got) != 0 {
		t.Errorf("AgentJobs(agent-y) = %v; want none", got)
	}
	if _, err := s.DeleteJobs([]string{"job-3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteAgent("agent-x"); err != nil {
		t.Fatal(err)
	}
	if binds, _ := s.AliasBindings("ada"); !slices.Equal(binds, []AliasBinding{{"agent-q", "agent-z"}}) {
		t.Errorf("AliasBindings(ada) after agent-x's removal = %v; want agent-q's only", binds)
	}
}

// A file of schema version 2 (no run or alias indexes) is migrated at
// open: every job's runs and every alias binding are indexed, in the
// opening transaction, and the version is stamped.
func TestOpenMigratesVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAgent(agent("agent-p", 1)); err != nil {
		t.Fatal(err)
	}
	j := Job{JobID: "job-1", ParentAgentID: "agent-p", CreatedAt: 1, Runs: []Run{
		{RunID: "run-1a", AgentID: "agent-x", Task: "private"}, {RunID: "run-1b", AgentID: "agent-y"}}}
	if _, err := s.CreateJob(j, []Agent{childAgent("agent-x", "agent-p"), childAgent("agent-y", "agent-p")},
		map[string]string{"ada": "agent-x", "grace": "agent-y"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it the file a version-2 build left: no version-3 buckets.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{bucketRunJobs, bucketAgentRuns, bucketAliasParents} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaVersionKey), []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Read-only, the old file is not migrated: the indexes read as empty.
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ro.JobOfRun("run-1a"); err != nil || ok {
		t.Fatalf("read-only JobOfRun on a version-2 file = %v, %v; want not found, no error", ok, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	if v, err := s.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Fatalf("migrated version = %d, %v; want %d", v, err, SchemaVersion)
	}
	if id, ok, err := s.JobOfRun("run-1b"); err != nil || !ok || id != "job-1" {
		t.Fatalf("JobOfRun after migration = %q, %v, %v", id, ok, err)
	}
	if refs, _ := s.AgentRuns("agent-x"); !slices.Equal(refs, []RunRef{{"run-1a", "job-1"}}) {
		t.Fatalf("AgentRuns after migration = %v", refs)
	}
	if binds, _ := s.AliasBindings("grace"); !slices.Equal(binds, []AliasBinding{{"agent-p", "agent-y"}}) {
		t.Fatalf("AliasBindings after migration = %v", binds)
	}
	if got, _ := s.GetJob("job-1"); got.Runs[0].Task != "private" {
		t.Fatalf("the migration changed the job: %+v", got)
	}
}

// WalkOpenJobs visits the jobs that have not ended only, newest first,
// after a cursor as WalkJobs does.
func TestWalkOpenJobs(t *testing.T) {
	s := jobIndexFixture(t)
	if _, err := s.UpdateJob("job-2", func(j *Job) ([]Report, error) {
		j.Runs[0].State = protocol.RunCompleted
		j.EndedAt = 5
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		before string
		max    int
		want   []string
	}{
		{"open ones, newest first", "", 0, []string{"job-3", "job-1"}},
		{"stops when told", "", 1, []string{"job-3"}},
		{"before an id", "job-3", 0, []string{"job-1"}},
		{"before an ended id", "job-2", 0, []string{"job-1"}},
		{"before past the end", "job-9", 0, []string{"job-3", "job-1"}},
		{"before the first", "job-1", 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			walk := func(fn func(*Job) bool) error { return s.WalkOpenJobs(tt.before, fn) }
			if got := walkIDs(t, tt.max, walk); !slices.Equal(got, tt.want) {
				t.Fatalf("walk = %v; want %v", got, tt.want)
			}
		})
	}
}
