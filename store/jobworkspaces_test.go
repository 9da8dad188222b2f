package store

import (
	"errors"
	"reflect"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestCreateJobWorkspaces: a job's workspace records are written in its
// transaction, with the path claim; a refused one writes nothing at all
// (no job, no agent, no record).
func TestCreateJobWorkspaces(t *testing.T) {
	s := openTest(t)
	ws := workspace("workspace-j1", "/src/a", 1)
	ws.State, ws.JobID, ws.AgentIDs = protocol.WorkspaceStateCreating, "job-1", []string{"agent-c1"}
	child := Agent{AgentID: "agent-c1", SessionID: "sess-c1", Cwd: ws.WorktreePath, WorkspaceID: ws.WorkspaceID}
	job := Job{JobID: "job-1", ParentAgentID: "agent-p", Strategy: protocol.StrategySingle, Runs: []Run{{
		RunID: "run-1", AgentID: "agent-c1", State: protocol.RunQueued,
		Workspace: &protocol.RunWorkspace{WorkspaceID: ws.WorkspaceID, Branch: ws.Branch, Cwd: ws.WorktreePath},
	}}}
	if _, err := s.CreateJobWorkspaces(job, []Agent{child}, nil, []Workspace{ws}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWorkspace(ws.WorkspaceID)
	if err != nil || !reflect.DeepEqual(got, ws) {
		t.Fatalf("workspace = %+v, %v", got, err)
	}
	if byPath, err := s.WorkspaceByPath(ws.WorktreePath); err != nil || byPath.WorkspaceID != ws.WorkspaceID {
		t.Fatalf("path claim = %+v, %v", byPath, err)
	}
	if j, err := s.GetJob("job-1"); err != nil || !reflect.DeepEqual(j.Runs[0].Workspace, job.Runs[0].Workspace) {
		t.Fatalf("job = %+v, %v", j, err)
	}
	if a, err := s.GetAgent("agent-c1"); err != nil || a.WorkspaceID != ws.WorkspaceID {
		t.Fatalf("agent = %+v, %v", a, err)
	}

	// A second job whose workspace claims the same worktree: nothing of it
	// is written.
	other := workspace("workspace-j2", "/src/a", 2)
	other.WorktreePath = ws.WorktreePath
	job2 := Job{JobID: "job-2", ParentAgentID: "agent-p", Strategy: protocol.StrategySingle,
		Runs: []Run{{RunID: "run-2", AgentID: "agent-c2", State: protocol.RunQueued}}}
	child2 := Agent{AgentID: "agent-c2", SessionID: "sess-c2", Cwd: other.WorktreePath}
	if _, err := s.CreateJobWorkspaces(job2, []Agent{child2}, nil, []Workspace{other}); !errors.Is(err, ErrConflict) {
		t.Fatalf("claimed path: %v, want ErrConflict", err)
	}
	if _, err := s.GetJob("job-2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("refused job written: %v", err)
	}
	if _, err := s.GetAgent("agent-c2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("refused job's agent written: %v", err)
	}
	if _, err := s.GetWorkspace("workspace-j2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("refused job's workspace written: %v", err)
	}
	// An invalid record is refused before any write.
	bad := workspace("workspace-j3", "/src/a", 3)
	bad.Branch = ""
	job3 := Job{JobID: "job-3", ParentAgentID: "agent-p", Runs: []Run{{RunID: "run-3", AgentID: "agent-c3"}}}
	if _, err := s.CreateJobWorkspaces(job3, nil, nil, []Workspace{bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid workspace: %v, want ErrInvalid", err)
	}
}
