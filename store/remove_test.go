package store

import (
	"errors"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestDeleteAgentChecksAndForgetsAlias(t *testing.T) {
	s := openTest(t)
	parent := Agent{AgentID: "agent-p", SessionID: "sess-p", Cwd: "/w"}
	child := Agent{AgentID: "agent-c", SessionID: "sess-c", Cwd: "/w", ParentAgentID: "agent-p", Alias: "scout"}
	if err := s.CreateAgent(parent); err != nil {
		t.Fatal(err)
	}
	job := Job{JobID: "job-1", ParentAgentID: "agent-p", Runs: []Run{{RunID: "run-1", AgentID: "agent-c", State: protocol.RunActive}}}
	if _, err := s.CreateJob(job, []Agent{child}, map[string]string{"scout": "agent-c"}); err != nil {
		t.Fatal(err)
	}
	// An open job keeps its run's agent and its parent.
	for _, id := range []string{"agent-c", "agent-p"} {
		var inUse *InUseError
		if _, err := s.DeleteAgent(id); !errors.As(err, &inUse) || inUse.Kind != protocol.RemoveJobOpen || !errors.Is(err, ErrConflict) {
			t.Fatalf("delete %s of an open job: %v", id, err)
		}
	}
	if _, err := s.UpdateJob("job-1", func(j *Job) ([]Report, error) {
		j.Runs[0].State, j.EndedAt = protocol.RunCompleted, 5
		return []Report{{RunID: "run-1", JobID: "job-1", ParentAgentID: "agent-p", AgentID: "agent-c"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The undelivered report keeps it too.
	var inUse *InUseError
	if _, err := s.DeleteAgent("agent-c"); !errors.As(err, &inUse) || inUse.Kind != protocol.RemoveReport {
		t.Fatalf("delete with a pending report: %v", err)
	}
	if err := s.DeleteReport("run-1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.DeleteAgent("agent-c")
	if err != nil || got.SessionID != "sess-c" {
		t.Fatalf("delete finished child = %+v, %v", got, err)
	}
	if _, err := s.GetAgent("agent-c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if id, ok, err := s.Alias("agent-p", "scout"); err != nil || ok {
		t.Fatalf("alias after delete = %q, %v, %v", id, ok, err)
	}
	if _, err := s.DeleteAgent("agent-c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.GetAgent("agent-p"); err != nil {
		t.Fatalf("parent after its child's delete: %v", err)
	}
}
