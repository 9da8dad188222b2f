package treediff

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// workspaceFixture builds a repository whose linked worktree (branch
// feature) has every kind of change at once: committed, staged, unstaged,
// untracked text and binary, a plain-mv rename, an unstaged deletion, and
// an ignored file; main advances after the branch point. It returns the
// repository, the worktree directory and the merge-base.
func workspaceFixture(t *testing.T) (*repo, string, string) {
	t.Helper()
	r := newRepo(t)
	r.write(".gitignore", "*.log\n")
	r.write("committed.txt", lines(10))
	r.write("staged.txt", lines(10))
	r.write("unstaged.txt", lines(10))
	r.write("moved.txt", lines(10))
	r.write("doomed.txt", "bye\n")
	base := r.commitAll("base")

	wt := filepath.Join(t.TempDir(), "wt")
	r.git("worktree", "add", "-q", "-b", "feature", wt, base)
	w := &repo{t: t, dir: wt, run: r.run}

	// main moves on: none of this is the workspace's change.
	r.write("main-only.txt", "main\n")
	r.commitAll("main advances")

	w.write("committed.txt", strings.Replace(lines(10), "line 1\n", "line one\n", 1))
	w.commitAll("feature work")
	w.write("staged.txt", lines(10)+"staged\n")
	w.git("add", "staged.txt")
	w.write("unstaged.txt", strings.Replace(lines(10), "line 10\n", "", 1))
	w.write("untracked.txt", "new 1\nnew 2\n")
	w.write("dir/untracked.bin", "\x00\x01binary")
	if err := os.Rename(filepath.Join(wt, "moved.txt"), filepath.Join(wt, "renamed.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(wt, "doomed.txt")); err != nil {
		t.Fatal(err)
	}
	w.write("glob*[x].txt", "g\n") // a pathspec only if not taken literally
	w.write("debug.log", "ignored\n")
	return r, wt, r.git("merge-base", "main", "feature")
}

// TestWorkspace diffs a worktree with every kind of change and checks that
// the diff has them all, with exact counts, and that the real index and
// the object database are untouched.
func TestWorkspace(t *testing.T) {
	r, wt, base := workspaceFixture(t)
	w := &repo{t: t, dir: wt, run: r.run}
	indexPath := w.git("rev-parse", "--path-format=absolute", "--git-path", "index")
	indexBefore, err := os.ReadFile(indexPath)
	if err != nil {
		t.Fatal(err)
	}
	statusBefore := w.git("status", "--porcelain=v1", "-z")
	// git add -N records (and writes) the empty blob, the one object
	// Workspace may add; write it first so that any other shows.
	w.git("hash-object", "-w", "--", os.DevNull)
	objectsBefore := w.git("count-objects", "-v")

	res, err := Workspace(context.Background(), r.run, wt, base, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res, Limits{})
	want := []string{
		"modified committed.txt +1 -1 hunks=1",
		"added dir/untracked.bin bin +0 -0 mode >100644",
		"deleted doomed.txt +0 -1 mode 100644> hunks=1",
		"added glob*[x].txt +1 -0 mode >100644 hunks=1",
		"renamed renamed.txt<-moved.txt +0 -0",
		"modified staged.txt +1 -0 hunks=1",
		"modified unstaged.txt +0 -1 hunks=1",
		"added untracked.txt +2 -0 mode >100644 hunks=1",
	}
	if got := summary(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("files:\n got %q\nwant %q", got, want)
	}
	if res.Additions != 5 || res.Deletions != 3 || res.FileCount != 8 || res.Truncated {
		t.Fatalf("totals %+v", res)
	}
	if !res.Files[1].Untracked || !res.Files[7].Untracked || res.Files[0].Untracked || res.Files[5].Untracked || res.Files[4].Untracked {
		t.Fatalf("untracked flags: %v %v %v %v %v", res.Files[0].Untracked, res.Files[1].Untracked, res.Files[4].Untracked, res.Files[5].Untracked, res.Files[7].Untracked)
	}
	if l := res.Files[7].Hunks[0].Lines[1]; l.Kind != KindAdd || l.Text != "new 2" || l.NewNo != 2 {
		t.Fatalf("untracked line %+v", l)
	}

	indexAfter, err := os.ReadFile(indexPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(indexAfter) != string(indexBefore) {
		t.Fatal("the real index changed")
	}
	if got := w.git("status", "--porcelain=v1", "-z"); got != statusBefore {
		t.Fatalf("status changed:\n%q\n%q", statusBefore, got)
	}
	if got := w.git("count-objects", "-v"); got != objectsBefore {
		t.Fatalf("objects written:\n%s\n%s", objectsBefore, got)
	}

	t.Run("truncated at a small cap", func(t *testing.T) {
		lim := Limits{MaxBytes: 64}
		res, err := Workspace(context.Background(), r.run, wt, base, lim)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, res, lim)
		if !res.Truncated || res.Additions != 5 || res.Deletions != 3 || len(res.Files) != 8 || res.Bytes > 64 {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("clean worktree at base", func(t *testing.T) {
		res, err := Workspace(context.Background(), r.run, r.dir, r.git("rev-parse", "HEAD"), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Files) != 0 || res.FileCount != 0 || res.Truncated {
			t.Fatalf("result %+v", res)
		}
	})
}

// TestWorkspaceErrors checks the protocol codes of the refusals.
func TestWorkspaceErrors(t *testing.T) {
	r := newRepo(t)
	for _, base := range []string{"", "-p", "no-such-ref", strings.Repeat("0", 40)} {
		_, err := Workspace(context.Background(), r.run, r.dir, base, Limits{})
		if !errors.Is(err, ErrBadBase) || protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Fatalf("base %q: %v", base, err)
		}
	}

	failing := func(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
		if args[0] == "diff" {
			return nil, errors.New("boom")
		}
		return r.run(ctx, dir, env, args...)
	}
	_, err := Workspace(context.Background(), failing, r.dir, "HEAD", Limits{})
	if protocol.CodeOf(err) != protocol.CodeInternal || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("failing diff: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Workspace(ctx, r.run, r.dir, "HEAD", Limits{})
	if protocol.CodeOf(err) != protocol.CodeTimeout || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestWorkspaceWithoutIndex: a worktree whose index is missing (never
// written yet, or lost) diffs the same as with it.
func TestWorkspaceWithoutIndex(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", lines(5))
	r.write("b.txt", "b\n")
	head := r.commitAll("base")
	r.write("a.txt", lines(6))
	r.write("c.txt", "c\n")
	with, err := Workspace(context.Background(), r.run, r.dir, head, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(r.dir, ".git", "index")); err != nil {
		t.Fatal(err)
	}
	without, err := Workspace(context.Background(), r.run, r.dir, head, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"modified a.txt +1 -0 hunks=1", "added c.txt +1 -0 mode >100644 hunks=1"}
	if got := summary(with); !reflect.DeepEqual(got, want) {
		t.Fatalf("with index: %q", got)
	}
	if !reflect.DeepEqual(with, without) {
		t.Fatalf("without index:\n%s\nwith:\n%s", js(without), js(with))
	}
}

// TestExecRunner: env reaches git, an inherited GIT_DIR does not, and a failure carries git's stderr and
// wraps the exit error.
func TestExecRunner(t *testing.T) {
	r := newRepo(t)
	run := ExecRunner("", nil)
	index := filepath.Join(t.TempDir(), "idx")
	out, err := run(context.Background(), r.dir, []string{"GIT_INDEX_FILE=" + index}, "rev-parse", "--git-path", "index")
	if err != nil || strings.TrimSpace(string(out)) != index {
		t.Fatalf("env not passed: %q %v", out, err)
	}
	// An inherited GIT_DIR (a daemon started from a hook) must not win over dir.
	t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "elsewhere"))
	if out, err := run(context.Background(), r.dir, nil, "rev-parse", "--show-toplevel"); err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), filepath.Base(r.dir)) {
		t.Fatalf("inherited GIT_DIR used: %q %v", out, err)
	}
	_, err = run(context.Background(), r.dir, nil, "-c", "x.y=z", "rev-parse", "--verify", "no-such-ref")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(err.Error(), "git rev-parse: exit status 128: fatal: Needed a single revision") {
		t.Fatalf("failure: %v", err)
	}
}
