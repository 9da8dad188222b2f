package git

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestInspect(t *testing.T) {
	f := newFixture(t)
	head := f.git(f.root, "rev-parse", "HEAD")
	f.write(f.root, "sub/dir/x", "x\n")
	wt := f.worktree("feature")

	for _, cwd := range []string{f.root, filepath.Join(f.root, "sub", "dir"), wt.Path} {
		r, err := f.c.Inspect(t.Context(), cwd)
		if err != nil {
			t.Fatalf("Inspect(%s): %v", cwd, err)
		}
		if r.Root != f.root || r.CommonDir != filepath.Join(f.root, ".git") || r.CurrentBranch != "main" || r.HEAD != head {
			t.Errorf("Inspect(%s) = %+v, want root %s, common dir %s/.git, branch main, head %s", cwd, r, f.root, f.root, head)
		}
		if b, err := r.RequireBranch(); err != nil || b != "main" {
			t.Errorf("RequireBranch = %q, %v", b, err)
		}
	}
	r, err := f.c.Inspect(t.Context(), wt.Path)
	if err != nil || r.Worktree != wt.Path {
		t.Errorf("Inspect(worktree).Worktree = %q, %v; want %s", r.Worktree, err, wt.Path)
	}
}

func TestInspectDetached(t *testing.T) {
	f := newFixture(t)
	f.git(f.root, "checkout", "-q", "--detach")
	r, err := f.c.Inspect(t.Context(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	if r.CurrentBranch != "" {
		t.Errorf("CurrentBranch = %q, want \"\" when detached", r.CurrentBranch)
	}
	if _, err := r.RequireBranch(); !errors.Is(err, ErrDetachedHEAD) {
		t.Errorf("RequireBranch: %v, want ErrDetachedHEAD", err)
	}
}

func TestInspectRefusals(t *testing.T) {
	needGit(t)
	tests := []struct {
		name  string
		setup func(f *fixture) string // returns the cwd to inspect
		want  error
		op    string
	}{
		{"plain directory", func(f *fixture) string { return f.t.TempDir() }, ErrNotRepository, ""},
		{"missing directory", func(f *fixture) string { return filepath.Join(f.t.TempDir(), "nope") }, ErrNotRepository, ""},
		{"inside .git", func(f *fixture) string { return filepath.Join(f.root, ".git") }, ErrNotRepository, ""},
		{"bare", func(f *fixture) string {
			d := filepath.Join(f.t.TempDir(), "bare.git")
			f.git(f.root, "clone", "-q", "--bare", f.root, d)
			return d
		}, ErrBareRepository, ""},
		{"no commits", func(f *fixture) string {
			d := filepath.Join(f.t.TempDir(), "empty")
			f.git(f.root, "init", "-q", d)
			return d
		}, ErrNoCommits, ""},
		{"mid-rebase", func(f *fixture) string {
			conflict(f)
			if out, err := f.gitErr(f.root, "rebase", "main"); err == nil {
				f.t.Fatalf("rebase did not stop: %s", out)
			}
			return f.root
		}, ErrOperationInProgress, "rebase"},
		{"mid-merge", func(f *fixture) string {
			conflict(f)
			if out, err := f.gitErr(f.root, "merge", "main"); err == nil {
				f.t.Fatalf("merge did not stop: %s", out)
			}
			return f.root
		}, ErrOperationInProgress, "merge"},
		{"mid-cherry-pick", func(f *fixture) string {
			conflict(f)
			if out, err := f.gitErr(f.root, "cherry-pick", "main"); err == nil {
				f.t.Fatalf("cherry-pick did not stop: %s", out)
			}
			return f.root
		}, ErrOperationInProgress, "cherry-pick"},
		{"mid-revert", func(f *fixture) string {
			f.commit(f.root, "f", "b\n", "to b")
			f.commit(f.root, "f", "c\n", "to c")
			if out, err := f.gitErr(f.root, "revert", "--no-edit", "HEAD~1"); err == nil {
				f.t.Fatalf("revert did not stop: %s", out)
			}
			return f.root
		}, ErrOperationInProgress, "revert"},
		{"rebase in a linked worktree", func(f *fixture) string {
			wt := f.worktree("side")
			f.commit(wt.Path, "f", "side\n", "side")
			f.commit(f.root, "f", "main\n", "main")
			if out, err := f.gitErr(wt.Path, "rebase", "main"); err == nil {
				f.t.Fatalf("rebase did not stop: %s", out)
			}
			return wt.Path
		}, ErrOperationInProgress, "rebase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			cwd := tt.setup(f)
			_, err := f.c.Inspect(t.Context(), cwd)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Inspect: %v, want %v", err, tt.want)
			}
			var oe *OperationError
			if tt.op != "" && (!errors.As(err, &oe) || oe.Op != tt.op) {
				t.Errorf("OperationError = %+v, want op %q", oe, tt.op)
			}
		})
	}
}

// conflict leaves the main checkout on branch "x" whose change to f
// conflicts with main's.
func conflict(f *fixture) {
	f.commit(f.root, "f", "a\n", "base f")
	f.git(f.root, "checkout", "-q", "-b", "x")
	f.commit(f.root, "f", "x\n", "x changes f")
	f.git(f.root, "checkout", "-q", "main")
	f.commit(f.root, "f", "main\n", "main changes f")
	f.git(f.root, "checkout", "-q", "x")
}

func TestResolveCommit(t *testing.T) {
	f := newFixture(t)
	head := f.git(f.root, "rev-parse", "HEAD")
	for _, rev := range []string{"HEAD", "main", head, head[:8]} {
		if got, err := f.c.ResolveCommit(t.Context(), f.root, rev); err != nil || got != head {
			t.Errorf("ResolveCommit(%q) = %q, %v; want %s", rev, got, err, head)
		}
	}
	for _, rev := range []string{"", "nope", "--all", "HEAD~5", "HEAD^{tree}:README"} {
		if _, err := f.c.ResolveCommit(t.Context(), f.root, rev); !errors.Is(err, ErrRefUnknown) {
			t.Errorf("ResolveCommit(%q): %v, want ErrRefUnknown", rev, err)
		}
	}
}
