package workspaces_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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

// TestMaterializeFetchesARunOfAnotherNode: a run that ran on another
// node pushed its branch to the shared remote; Materialize with Fetch
// brings it into the workspace here, fast-forwarded to the pushed head
// (recorded as the workspace's head), so the diff shows the work. A head
// that does not descend from the workspace's branch is refused, and the
// branch stays where it was.
func TestMaterializeFetchesARunOfAnotherNode(t *testing.T) {
	h := start(t, nil, "")
	repo := newRepo(t)
	d := h.create(repo, "remote-run")
	ws := d.Workspace
	bare := filepath.Join(t.TempDir(), "origin.git")
	gitIn(t, repo, "init", "-q", "--bare", bare)
	base := gitIn(t, ws.Cwd, "rev-parse", "HEAD")
	// The other node: a clone of the remote, the run's commit on its branch.
	other := filepath.Join(t.TempDir(), "other")
	gitIn(t, repo, "push", "-q", bare, base+":refs/heads/"+ws.Branch)
	gitIn(t, repo, "clone", "-q", "-b", ws.Branch, bare, other)
	if err := os.WriteFile(filepath.Join(other, "work.txt"), []byte("done elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, other, "add", "work.txt")
	gitIn(t, other, "commit", "-q", "-m", "the run's work")
	gitIn(t, other, "push", "-q", "origin", ws.Branch)
	head := gitIn(t, other, "rev-parse", "HEAD")

	fetch := func(runID, head string) *workspaces.Materialized {
		f := h.sys.Root.RequestFuture(h.ws, &workspaces.Materialize{WorkspaceID: ws.WorkspaceID, RunID: runID, AgentID: "agent_of_" + runID,
			Fetch: &workspaces.Fetch{Remote: bare, Branch: ws.Branch, Head: head}}, 30*time.Second)
		res, err := f.Result()
		if err != nil {
			t.Fatal(err)
		}
		h.sys.Root.Send(h.ws, &workspaces.Release{WorkspaceID: ws.WorkspaceID, RunID: runID})
		return res.(*workspaces.Materialized)
	}
	m := fetch("run_fetch", head)
	if m.Err != nil || m.Workspace.HeadSHA != head {
		t.Fatalf("materialize with fetch = %+v, want head %s", m, head)
	}
	if got := gitIn(t, ws.Cwd, "rev-parse", "HEAD"); got != head {
		t.Fatalf("worktree at %s, want %s", got, head)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Cwd, "work.txt")); err != nil || string(b) != "done elsewhere\n" {
		t.Fatalf("work.txt = %q, %v", b, err)
	}
	var diff protocol.WorkspaceDiffData
	h.ok(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: ws.WorkspaceID}, &diff)
	if diff.Stats.Files != 1 || diff.HeadSHA != head {
		t.Fatalf("diff after the fetch = %+v", diff)
	}

	// A diverged remote branch (forced there by someone) is not taken.
	gitIn(t, other, "reset", "-q", "--hard", base)
	gitIn(t, other, "commit", "-q", "--allow-empty", "-m", "diverged")
	gitIn(t, other, "push", "-q", "-f", "origin", ws.Branch)
	if m := fetch("run_diverged", gitIn(t, other, "rev-parse", "HEAD")); m.Err == nil || protocol.CodeOf(m.Err) != protocol.CodeConflict {
		t.Fatalf("materialize with a diverged fetch = %+v, want CONFLICT", m)
	}
	if got := gitIn(t, ws.Cwd, "rev-parse", "HEAD"); got != head {
		t.Fatalf("after the refused fetch the worktree is at %s, want %s", got, head)
	}
}
