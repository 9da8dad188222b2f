package workspaces_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/workspaces"
)

// materialize asks for a workspace's worktree as a job actor does at a
// run's start and returns the answer's future (Result waits for it).
func (h *harness) materialize(wsID, runID string) func() *workspaces.Materialized {
	f := h.sys.Root.RequestFuture(h.ws, &workspaces.Materialize{WorkspaceID: wsID, RunID: runID, AgentID: "agent_of_" + runID}, 30*time.Second)
	return func() *workspaces.Materialized {
		h.t.Helper()
		res, err := f.Result()
		if err != nil {
			h.t.Fatalf("materialize %s: %v", wsID, err)
		}
		m, ok := res.(*workspaces.Materialized)
		if !ok || m.RunID != runID {
			h.t.Fatalf("materialize answered %#v", res)
		}
		return m
	}
}

func retireKeep(id string) *protocol.WorkspaceRetire {
	return &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: id,
		BranchDisposition: protocol.DispositionKeep}
}

// refusedRetired asserts a Materialized refused with the typed refusal
// "retired", making nothing.
func refusedRetired(t *testing.T, m *workspaces.Materialized, id string) {
	t.Helper()
	var pe *protocol.Error
	if m.Err == nil || !errors.As(m.Err, &pe) {
		t.Fatalf("materialize after retire = %+v, want the refusal retired", m)
	}
	ref, ok := protocol.WorkspaceRefusalOf(m.Err)
	if !ok || ref.Kind != protocol.RefusalRetired || ref.WorkspaceID != id || pe.Code != protocol.CodeConflict {
		t.Fatalf("materialize error = %v (refusal %+v), want kind retired for %s", m.Err, ref, id)
	}
	if m.Workspace.WorkspaceID != "" {
		t.Fatalf("a refused materialize returned a workspace: %+v", m.Workspace)
	}
}

// TestRunClaimRefusesRetireUntilReleased: a run that asked for its
// worktree claims the workspace; retire is refused busy, naming the run,
// until the run's end releases it; a run that starts after the retire is
// refused "retired".
func TestRunClaimRefusesRetireUntilReleased(t *testing.T) {
	h := start(t, nil, "")
	d := h.create(newRepo(t), "claimed")
	id := d.Workspace.WorkspaceID
	if m := h.materialize(id, "run_one")(); m.Err != nil || m.Workspace.State != protocol.WorkspaceStateActive {
		t.Fatalf("materialize of an active workspace = %+v", m)
	}
	ref := h.refused(retireKeep(id), protocol.RefusalBusy)
	if ref.WorkspaceID != id || !strings.Contains(ref.Reason, "run_one") || len(ref.AgentIDs) != 1 || ref.AgentIDs[0] != "agent_of_run_one" {
		t.Fatalf("busy refusal = %+v, want it to name run_one", ref)
	}
	// The run ends; its release reaches the mailbox before the retire.
	h.sys.Root.Send(h.ws, &workspaces.Release{WorkspaceID: id, RunID: "run_one"})
	var res protocol.WorkspaceRetireData
	h.ok(retireKeep(id), &res)
	if res.Workspace.State != protocol.WorkspaceStateRetired {
		t.Fatalf("retire = %+v", res.Workspace)
	}
	refusedRetired(t, h.materialize(id, "run_two")(), id)
	if _, err := os.Stat(d.Workspace.Cwd); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("worktree after retire: %v", err)
	}
}

// TestRetireAndRunStartAtTheSameMoment: a run's start arrives while a
// retire that already passed its checks holds the repository's lock. The
// retire wins; the run's start waits for the lock, then is refused
// "retired" and makes nothing: never a run whose cwd vanished. And the
// refusal released its claim (a later retire of another state would not
// be refused busy by it).
func TestRetireAndRunStartAtTheSameMoment(t *testing.T) {
	reached, proceed := make(chan struct{}), make(chan struct{})
	h := startDeps(t, nil, "", func(d *workspaces.Deps) {
		d.Failpoint = func(s workspaces.Step) {
			if s == workspaces.StepRetireRecorded {
				close(reached)
				<-proceed
			}
		}
	})
	d := h.create(newRepo(t), "raced")
	id := d.Workspace.WorkspaceID
	h.send(retireKeep(id)) // answered with id "crash"
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the retire never passed its checks")
	}
	run := h.materialize(id, "run_late")
	// A barrier: its answer comes after the mailbox took run_late's claim.
	if m := h.materialize("ws_none", "run_barrier")(); m.Err == nil {
		t.Fatalf("materialize of no workspace = %+v", m)
	}
	close(proceed)
	resp := h.response("crash")
	if !resp.Success {
		t.Fatalf("the retire that passed its checks failed: %+v", resp.Error)
	}
	refusedRetired(t, run(), id)
	if _, err := os.Stat(d.Workspace.Cwd); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("worktree after retire: %v", err)
	}
}

// response waits for the response of id (a command sent with send).
func (h *harness) response(id string) protocol.Response {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		recs, ok := h.out.Next(ctx)
		if !ok {
			h.t.Fatalf("no response %s", id)
		}
		for _, rec := range recs {
			var r protocol.Response
			if json.Unmarshal(rec, &r) == nil && r.ID == id {
				return r
			}
		}
	}
}
