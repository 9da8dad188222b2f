package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// DeleteJobs forgets a finished job with its parent index entry and its
// idempotency key, and keeps every job that is unfinished or whose report
// waits for delivery; the children's manifests stay (DeleteAgent's to judge).
func TestDeleteJobsOnlyFinished(t *testing.T) {
	s := openTest(t)
	if err := s.CreateAgent(agent("agent-p", 1)); err != nil {
		t.Fatal(err)
	}
	done := testJob("job-done", "agent-p", protocol.RunCompleted)
	done.RequestID = "req-1"
	done.EndedAt = 5
	open := testJob("job-open", "agent-p", protocol.RunCompleted, protocol.RunActive)
	pending := testJob("job-pending", "agent-p", protocol.RunFailed)
	pending.EndedAt = 6
	for _, j := range []Job{done, open, pending} {
		if _, err := s.CreateJob(j, []Agent{childAgent(j.Runs[0].AgentID, "agent-p")}, map[string]string{"a-" + j.JobID: j.Runs[0].AgentID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateJob("job-pending", func(j *Job) ([]Report, error) {
		return []Report{{RunID: j.Runs[0].RunID, JobID: j.JobID, ParentAgentID: "agent-p"}}, nil
	}); err != nil {
		t.Fatal(err)
	}

	got, err := s.DeleteJobs([]string{"job-done", "job-open", "job-pending", "job-missing"})
	if err != nil || !slices.Equal(got, []string{"job-done"}) {
		t.Fatalf("DeleteJobs = %v, %v; want [job-done]", got, err)
	}
	if _, err := s.GetJob("job-done"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJob(job-done) err = %v; want ErrNotFound", err)
	}
	for _, id := range []string{"job-open", "job-pending"} {
		if _, err := s.GetJob(id); err != nil {
			t.Fatalf("GetJob(%s) = %v; want it kept", id, err)
		}
	}
	var pj []string
	err = s.WalkParentJobs("agent-p", "", func(j *Job) bool { pj = append(pj, j.JobID); return true })
	if err != nil || len(pj) != 2 {
		t.Fatalf("jobs of agent-p = %v, %v; want the 2 kept", pj, err)
	}
	// The request id is free again: a new create with it is a new job.
	again := testJob("job-again", "agent-p", protocol.RunQueued)
	again.RequestID = "req-1"
	if existing, err := s.CreateJob(again, nil, nil); err != nil || existing != "" {
		t.Fatalf("create with the deleted job's request id = %q, %v; want a new job", existing, err)
	}
	// The child stays until DeleteAgent removes it, which it now may.
	if _, err := s.GetAgent(done.Runs[0].AgentID); err != nil {
		t.Fatalf("child of the deleted job: %v; want it kept", err)
	}
	if _, err := s.DeleteAgent(done.Runs[0].AgentID); err != nil {
		t.Fatalf("DeleteAgent(child of the deleted job) = %v", err)
	}
	if id, ok, _ := s.Alias("agent-p", "a-job-done"); ok {
		t.Fatalf("alias still bound to %s after the child was deleted", id)
	}
}
