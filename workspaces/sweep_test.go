package workspaces_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
	"github.com/shard-dev/shard/workspaces/layout"
)

// orphan makes, by hand, a worktree where the daemon would put one for
// repo, without a record: our path, our branch naming, and (with token)
// our token in its admin dir. It returns the path and the branch.
func orphan(t *testing.T, repo, root string, token bool) (string, string) {
	t.Helper()
	id := ids.New(ids.Workspace)
	path := layout.WorktreePath(root, repo, id)
	branch := git.BranchName("lost", layout.ShortID(id))
	gitIn(t, repo, "worktree", "add", "-q", "-b", branch, path, "HEAD")
	if token {
		admin, err := layout.AdminDir(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(admin, layout.TokenFile), []byte("0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path, branch
}

// TestStartupSweepsOnlyProvablyOursAndEmpty: an unrecorded worktree under
// the root is removed with its branch at startup only when it is ours
// (path, branch name, token) and empty of work; one with a commit of its
// own, a dirty one, one without our token and one on a branch we would not
// name are left alone.
func TestStartupSweepsOnlyProvablyOursAndEmpty(t *testing.T) {
	repo := newRepo(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	empty, emptyBranch := orphan(t, repo, root, true)
	worked, workedBranch := orphan(t, repo, root, true)
	gitIn(t, worked, "commit", "-q", "--allow-empty", "-m", "work")
	dirty, _ := orphan(t, repo, root, true)
	if err := os.WriteFile(filepath.Join(dirty, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noToken, _ := orphan(t, repo, root, false)
	renamed, _ := orphan(t, repo, root, true)
	gitIn(t, renamed, "branch", "-m", "feature/mine")

	start(t, nil, root)

	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("empty unrecorded worktree not swept: %v", err)
	}
	if out := gitIn(t, repo, "branch", "--list", emptyBranch); out != "" {
		t.Fatalf("branch of the swept worktree kept: %q", out)
	}
	for _, p := range []string{worked, dirty, noToken, renamed} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was swept: %v", p, err)
		}
	}
	if out := gitIn(t, repo, "branch", "--list", workedBranch); !strings.Contains(out, workedBranch) {
		t.Fatalf("branch with work lost: %q", out)
	}
}

// TestStartupMarksAMovedRepositoryMissing: a repository moved while the
// daemon was down leaves its workspace missing, and commands on it refuse
// missing_authority; retire only forgets it.
func TestStartupMarksAMovedRepositoryMissing(t *testing.T) {
	repo := newRepo(t)
	st := openStore(t)
	root := filepath.Join(t.TempDir(), "worktrees")
	h := start(t, st, root)
	d := h.create(repo, "moved")
	id := d.Workspace.WorkspaceID
	if err := os.Rename(repo, repo+"-moved"); err != nil {
		t.Fatal(err)
	}
	h2 := start(t, st, root)
	rec, err := st.GetWorkspace(id)
	if err != nil || rec.State != protocol.WorkspaceStateMissing || !strings.Contains(rec.ConflictReason, "repository") {
		t.Fatalf("after the move: %+v, %v", rec, err)
	}
	h2.refused(&protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: id}, protocol.RefusalMissingAuthority)
	h2.refused(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: id}, protocol.RefusalMissingAuthority)
	h2.refused(&protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: id, Strategy: protocol.MergeMerge}, protocol.RefusalMissingAuthority)
	var res protocol.WorkspaceRetireData
	h2.ok(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: id}, &res)
	if res.Workspace.State != protocol.WorkspaceStateRetired || res.BranchDeleted {
		t.Fatalf("retire of the missing workspace = %+v", res)
	}
	if all, _ := st.ListWorkspaces(store.WorkspaceFilter{}); len(all) != 0 {
		t.Fatalf("live records left: %+v", all)
	}
}
