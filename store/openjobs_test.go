package store

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// The open-jobs index follows every write: a created job is open, a job
// updated to ended leaves it, and UpdateOpenJobs sees the open ones only.
func TestOpenJobsIndexFollowsWrites(t *testing.T) {
	s := openTest(t)
	if err := s.CreateAgent(agent("agent-p", 1)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		if _, err := s.CreateJob(testJob(id, "agent-p", protocol.RunQueued), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateJob("job-2", func(j *Job) ([]Report, error) {
		j.Runs[0].State, j.EndedAt = protocol.RunCompleted, 5
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OpenJobs(); err != nil || !slices.Equal(got, []string{"job-1", "job-3"}) {
		t.Fatalf("OpenJobs = %v, %v; want [job-1 job-3]", got, err)
	}

	var seen []string
	err := s.UpdateOpenJobs(func(j *Job) (bool, []Report, error) {
		seen = append(seen, j.JobID)
		if j.JobID != "job-3" {
			return false, nil, nil
		}
		j.Runs[0].State, j.EndedAt = protocol.RunInterrupted, 9
		return true, []Report{{RunID: j.Runs[0].RunID, JobID: j.JobID, ParentAgentID: "agent-p"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"job-1", "job-3"}) {
		t.Fatalf("UpdateOpenJobs visited %v; want [job-1 job-3] (never the ended job-2)", seen)
	}
	if got, _ := s.OpenJobs(); !slices.Equal(got, []string{"job-1"}) {
		t.Fatalf("OpenJobs after ending job-3 = %v; want [job-1]", got)
	}
	if j, err := s.GetJob("job-3"); err != nil || j.EndedAt != 9 {
		t.Fatalf("job-3 = %+v, %v; want the update stored", j, err)
	}
	if r, _ := s.Reports(); len(r) != 1 {
		t.Fatalf("reports = %v; want the one UpdateOpenJobs returned", r)
	}
}

// A file of schema version 1 (no open-jobs index) is migrated at open: its
// unfinished jobs are indexed, its ended ones are not, and the version is
// stamped in the same transaction.
func TestOpenMigratesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAgent(agent("agent-p", 1)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"job-a", "job-b"} {
		if _, err := s.CreateJob(testJob(id, "agent-p", protocol.RunActive), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateJob("job-a", func(j *Job) ([]Report, error) {
		j.Runs[0].State, j.EndedAt = protocol.RunCompleted, 5
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it the file a version-1 build left: no index bucket, version 1.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(bucketOpenJobs)); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaVersionKey), []byte("1"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Fatalf("migrated version = %d, %v; want %d", v, err, SchemaVersion)
	}
	if got, err := s.OpenJobs(); err != nil || !slices.Equal(got, []string{"job-b"}) {
		t.Fatalf("OpenJobs after migration = %v, %v; want [job-b]", got, err)
	}
}
