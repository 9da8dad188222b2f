package daemon_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func commitFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "add", name)
	runGit(t, dir, "commit", "-q", "-m", name)
	return runGit(t, dir, "rev-parse", "HEAD")
}

// TestWorkspaceRetireProvesSquashedAndRebased: delete_if_merged proves a
// branch squash-merged into main and one whose commit was rebased
// (cherry-picked) onto a main that moved on, neither an ancestor of main,
// and deletes both; the tombstone keeps each head.
func TestWorkspaceRetireProvesSquashedAndRebased(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()

	squashed := wsCreate(t, c, repo, "squashed").Workspace
	sqHead := commitFile(t, squashed.Cwd, "s.txt", "s\n")
	runGit(t, repo, "merge", "-q", "--squash", squashed.Branch)
	runGit(t, repo, "commit", "-q", "-m", "squash")
	commitFile(t, repo, "later.txt", "later\n") // main moves on: trees differ

	rebased := wsCreate(t, c, repo, "rebased").Workspace
	rbHead := commitFile(t, rebased.Cwd, "r.txt", "r\n")
	commitFile(t, repo, "main.txt", "main\n")
	runGit(t, repo, "cherry-pick", rbHead)

	for _, ws := range []struct {
		info protocol.WorkspaceInfo
		head string
	}{{squashed, sqHead}, {rebased, rbHead}} {
		res, err := wsRetire(t, c, ws.info.WorkspaceID, protocol.DispositionDeleteIfMerged)
		if err != nil {
			t.Fatalf("retire %s: %v", ws.info.Branch, err)
		}
		if !res.BranchDeleted || res.Proof == "" || res.Proof == protocol.ProofConfirmed || branchExists(t, repo, ws.info.Branch) ||
			res.Workspace.Tombstone == nil || res.Workspace.Tombstone.HeadSHA != ws.head {
			t.Fatalf("retire %s = %+v (tombstone %+v)", ws.info.Branch, res, res.Workspace.Tombstone)
		}
	}
}

// TestWorkspaceRetireRefusalsOnRealGit: each state git can be in that a
// removal would lose work or touch what is not ours is refused with its
// kind, and nothing changes: a tracked edit (dirty), a locked worktree, an
// initialized submodule, a worktree deleted behind the daemon's back and a
// repository moved (missing_authority; the record becomes missing and a
// second retire only forgets it).
func TestWorkspaceRetireRefusalsOnRealGit(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	retireRefused := func(ws protocol.WorkspaceInfo, kind protocol.WorkspaceRefusalKind) protocol.WorkspaceRefusal {
		t.Helper()
		_, err := wsRetire(t, c, ws.WorkspaceID, protocol.DispositionKeep)
		r := wantRefusal(t, err, protocol.CodeConflict, kind)
		if r.WorkspaceID != ws.WorkspaceID {
			t.Fatalf("refusal %+v names another workspace", r)
		}
		return r
	}
	stillThere := func(ws protocol.WorkspaceInfo) {
		t.Helper()
		if _, err := os.Stat(ws.Cwd); err != nil {
			t.Fatalf("a refused retire removed %s: %v", ws.Cwd, err)
		}
		if st := wsStatus(t, c, ws.WorkspaceID); st.State != protocol.WorkspaceStateActive {
			t.Fatalf("state after a refused retire = %s", st.State)
		}
	}

	dirty := wsCreate(t, c, repo, "dirty").Workspace
	if err := os.WriteFile(filepath.Join(dirty.Cwd, "README"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := retireRefused(dirty, protocol.RefusalDirty); len(r.Paths) != 1 || r.Paths[0] != "README" {
		t.Fatalf("dirty paths = %v", r.Paths)
	}
	stillThere(dirty)

	locked := wsCreate(t, c, repo, "locked").Workspace
	runGit(t, repo, "worktree", "lock", "--reason", "on a USB stick", locked.Cwd)
	retireRefused(locked, protocol.RefusalLocked)
	stillThere(locked)

	sub := gitRepo(t)
	withSub := wsCreate(t, c, repo, "submodule").Workspace
	runGit(t, withSub.Cwd, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "vendor/sub")
	runGit(t, withSub.Cwd, "commit", "-q", "-m", "submodule")
	if r := retireRefused(withSub, protocol.RefusalSubmodules); len(r.Paths) != 1 || r.Paths[0] != "vendor/sub" {
		t.Fatalf("submodule paths = %v", r.Paths)
	}
	stillThere(withSub)

	deleted := wsCreate(t, c, repo, "deleted").Workspace
	if err := os.RemoveAll(deleted.Cwd); err != nil {
		t.Fatal(err)
	}
	retireRefused(deleted, protocol.RefusalMissingAuthority)
	if st := wsStatus(t, c, deleted.WorkspaceID); st.State != protocol.WorkspaceStateMissing {
		t.Fatalf("deleted worktree: state %s, want missing", st.State)
	}
	if res, err := wsRetire(t, c, deleted.WorkspaceID, protocol.DispositionKeep); err != nil || res.Workspace.State != protocol.WorkspaceStateRetired {
		t.Fatalf("second retire of the deleted worktree = %+v, %v", res, err)
	}
	if !branchExists(t, repo, deleted.Branch) {
		t.Fatal("forgetting a missing workspace deleted its branch")
	}

	moved := wsCreate(t, c, repo, "moved").Workspace
	if err := os.Rename(repo, repo+"-moved"); err != nil {
		t.Fatal(err)
	}
	retireRefused(moved, protocol.RefusalMissingAuthority)
	if st := wsStatus(t, c, moved.WorkspaceID); st.State != protocol.WorkspaceStateMissing {
		t.Fatalf("moved repository: state %s, want missing", st.State)
	}
	err := c.Call(ctx(t), &protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: moved.WorkspaceID}, nil)
	wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalMissingAuthority)
}
