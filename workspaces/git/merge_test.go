package git

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var strategies = []MergeStrategy{MergeCommit, MergeSquash, MergeRebase}

// snapshot is everything Merge must leave alone when it refuses: a
// checkout's HEAD, its index and status, and its working tree's files.
type snapshot struct {
	head, index, status string
	files               map[string]string
}

func (f *fixture) snap(dir string) snapshot {
	f.t.Helper()
	s := snapshot{
		head:   f.git(dir, "rev-parse", "HEAD"),
		index:  f.git(dir, "ls-files", "--stage"),
		status: f.git(dir, "status", "--porcelain=v2", "--branch", "--untracked-files=all"),
		files:  map[string]string{},
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s.files[rel] = string(b)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) sameSnap(what string, before, after snapshot) {
	f.t.Helper()
	if before.head != after.head {
		f.t.Errorf("%s: HEAD moved %s -> %s", what, before.head, after.head)
	}
	if before.index != after.index {
		f.t.Errorf("%s: index changed:\n%s\n->\n%s", what, before.index, after.index)
	}
	if before.status != after.status {
		f.t.Errorf("%s: status changed:\n%s\n->\n%s", what, before.status, after.status)
	}
	if len(before.files) != len(after.files) {
		f.t.Errorf("%s: files changed: %v -> %v", what, keys(before.files), keys(after.files))
	}
	for k, v := range before.files {
		if after.files[k] != v {
			f.t.Errorf("%s: %s changed: %q -> %q", what, k, v, after.files[k])
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// divergent makes workspace branch "ws" (in its own worktree) add
// feature.txt and main add other.txt, so neither is an ancestor.
func (f *fixture) divergent() Created {
	f.t.Helper()
	wt := f.worktree("ws")
	f.commit(wt.Path, "feature.txt", "feature\n", "ws: feature")
	f.commit(wt.Path, "feature2.txt", "more\n", "ws: more")
	f.commit(f.root, "other.txt", "other\n", "main: other")
	return wt
}

// conflicting makes "ws" and main change README differently.
func (f *fixture) conflicting() Created {
	f.t.Helper()
	wt := f.worktree("ws")
	f.commit(wt.Path, "feature.txt", "feature\n", "ws: feature")
	f.commit(wt.Path, "README", "hello from ws\n", "ws: README")
	f.commit(f.root, "README", "hello from main\n", "main: README")
	return wt
}

func (f *fixture) refusal(err error, want MergeReason) *MergeRefusal {
	f.t.Helper()
	var ref *MergeRefusal
	if !errors.As(err, &ref) {
		f.t.Fatalf("err = %v, want a *MergeRefusal %s", err, want)
	}
	if ref.Reason != want {
		f.t.Fatalf("reason = %s (%v), want %s", ref.Reason, err, want)
	}
	if !errors.Is(err, want.sentinel()) {
		f.t.Errorf("errors.Is(err, sentinel of %s) is false", want)
	}
	return ref
}

func (f *fixture) parents(dir, rev string) []string {
	f.t.Helper()
	return strings.Fields(f.git(dir, "rev-list", "--parents", "-n", "1", rev))[1:]
}

func TestMergeDivergent(t *testing.T) {
	for _, s := range strategies {
		t.Run(string(s), func(t *testing.T) {
			f := newFixture(t)
			wt := f.divergent()
			repo := f.repo()
			mainBefore, branchBefore := repo.HEAD, f.git(f.root, "rev-parse", "ws")

			res, err := f.c.Merge(t.Context(), repo, "ws", "main", s, "")
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			head := f.git(f.root, "rev-parse", "HEAD")
			if res.TargetHead != head || res.TargetBefore != mainBefore || res.BranchBefore != branchBefore {
				t.Errorf("result %+v; main HEAD %s, before %s, branch before %s", res, head, mainBefore, branchBefore)
			}
			if !res.Proof.Held() {
				t.Errorf("ProveMerged after merge: unproven: %s", res.Proof.Reason)
			}
			if p, err := f.c.ProveMerged(t.Context(), f.repo(), "ws", "main"); err != nil || !p.Held() {
				t.Errorf("ProveMerged = %+v, %v", p, err)
			}
			for name, want := range map[string]string{"feature.txt": "feature\n", "feature2.txt": "more\n", "other.txt": "other\n", "README": "hello\n"} {
				if b, err := os.ReadFile(filepath.Join(f.root, name)); err != nil || string(b) != want {
					t.Errorf("main checkout %s = %q, %v; want %q", name, b, err, want)
				}
			}
			if st := f.git(f.root, "status", "--porcelain", "--untracked-files=all"); st != "" {
				t.Errorf("main checkout not clean after merge:\n%s", st)
			}
			if res.CommitCount != len(res.Commits) || len(res.Commits) == 0 || res.Commits[0] != head {
				t.Errorf("Commits = %v (count %d), head %s", res.Commits, res.CommitCount, head)
			}
			switch s {
			case MergeCommit:
				if p := f.parents(f.root, "HEAD"); !slices.Equal(p, []string{mainBefore, branchBefore}) {
					t.Errorf("merge commit parents %v, want [%s %s]", p, mainBefore, branchBefore)
				}
				if msg := f.git(f.root, "log", "-1", "--format=%s"); msg != "Merge branch 'ws' into main" {
					t.Errorf("message %q", msg)
				}
				if res.Proof.Kind != ProofAncestor {
					t.Errorf("proof %s, want ancestor", res.Proof.Kind)
				}
			case MergeSquash:
				if p := f.parents(f.root, "HEAD"); !slices.Equal(p, []string{mainBefore}) {
					t.Errorf("squash commit parents %v, want [%s]", p, mainBefore)
				}
				if msg := f.git(f.root, "log", "-1", "--format=%s"); msg != "Squash ws" {
					t.Errorf("message %q", msg)
				}
				if res.CommitCount != 1 {
					t.Errorf("squash made %d commits", res.CommitCount)
				}
				if h := f.git(f.root, "rev-parse", "ws"); h != branchBefore {
					t.Errorf("squash moved the branch to %s", h)
				}
			case MergeRebase:
				if res.BranchHead != head || f.git(f.root, "rev-parse", "ws") != head {
					t.Errorf("branch at %s, result %s, target %s", f.git(f.root, "rev-parse", "ws"), res.BranchHead, head)
				}
				if n := f.git(f.root, "rev-list", "--count", "--merges", "HEAD"); n != "0" {
					t.Errorf("rebase left %s merge commit(s)", n)
				}
				if res.CommitCount != 2 {
					t.Errorf("rebase brought %d commits, want 2", res.CommitCount)
				}
				// The workspace's worktree follows its branch and is clean.
				if h := f.git(wt.Path, "rev-parse", "HEAD"); h != head {
					t.Errorf("workspace HEAD %s, want %s", h, head)
				}
				if st := f.git(wt.Path, "status", "--porcelain", "--untracked-files=all"); st != "" {
					t.Errorf("workspace not clean after rebase:\n%s", st)
				}
				if b, err := os.ReadFile(filepath.Join(wt.Path, "other.txt")); err != nil || string(b) != "other\n" {
					t.Errorf("workspace other.txt = %q, %v", b, err)
				}
			}
			// No temporary worktree is left registered.
			if wts, err := f.c.ListWorktrees(t.Context(), f.root); err != nil || len(wts) != 2 {
				t.Errorf("worktrees after merge: %+v, %v", wts, err)
			}
		})
	}
}

func TestMergeFastForwardable(t *testing.T) {
	for _, s := range strategies {
		t.Run(string(s), func(t *testing.T) {
			f := newFixture(t)
			wt := f.worktree("ws")
			branchHead := f.commit(wt.Path, "feature.txt", "feature\n", "ws: feature")
			repo := f.repo()
			res, err := f.c.Merge(t.Context(), repo, "ws", "main", s, "custom message")
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			head := f.git(f.root, "rev-parse", "HEAD")
			if b, err := os.ReadFile(filepath.Join(f.root, "feature.txt")); err != nil || string(b) != "feature\n" {
				t.Errorf("main checkout feature.txt = %q, %v", b, err)
			}
			if !res.Proof.Held() {
				t.Errorf("unproven after merge: %s", res.Proof.Reason)
			}
			switch s {
			case MergeCommit: // --no-ff: a merge commit even when fast-forwardable
				if p := f.parents(f.root, "HEAD"); !slices.Equal(p, []string{repo.HEAD, branchHead}) {
					t.Errorf("parents %v, want a merge commit of [%s %s]", p, repo.HEAD, branchHead)
				}
				if msg := f.git(f.root, "log", "-1", "--format=%B"); msg != "custom message" {
					t.Errorf("message %q", msg)
				}
			case MergeSquash:
				if p := f.parents(f.root, "HEAD"); !slices.Equal(p, []string{repo.HEAD}) || head == branchHead {
					t.Errorf("parents %v, head %s", p, head)
				}
			case MergeRebase: // nothing to replay: a plain fast-forward
				if head != branchHead || res.BranchHead != branchHead {
					t.Errorf("head %s, branch %s, want both at %s", head, res.BranchHead, branchHead)
				}
				if res.Proof.Kind != ProofSameCommit {
					t.Errorf("proof %s, want same_commit", res.Proof.Kind)
				}
			}
		})
	}
}

// A conflict changes nothing: not the main checkout, not the workspace's
// worktree, not the branch, and no temporary worktree stays behind.
func TestMergeConflictChangesNothing(t *testing.T) {
	for _, s := range strategies {
		t.Run(string(s), func(t *testing.T) {
			f := newFixture(t)
			wt := f.conflicting()
			f.write(f.root, "notes.txt", "untracked, unrelated\n")
			mainBefore, wsBefore := f.snap(f.root), f.snap(wt.Path)
			branchBefore := f.git(f.root, "rev-parse", "ws")

			_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", s, "")
			ref := f.refusal(err, MergeReasonConflict)
			if !slices.Equal(ref.Paths, []string{"README"}) || ref.Count != 1 {
				t.Errorf("conflict paths %v (count %d), want [README]", ref.Paths, ref.Count)
			}
			f.sameSnap("main checkout", mainBefore, f.snap(f.root))
			f.sameSnap("workspace", wsBefore, f.snap(wt.Path))
			if h := f.git(f.root, "rev-parse", "ws"); h != branchBefore {
				t.Errorf("branch moved %s -> %s", branchBefore, h)
			}
			if wts, err := f.c.ListWorktrees(t.Context(), f.root); err != nil || len(wts) != 2 {
				t.Errorf("worktrees after refusal: %+v, %v", wts, err)
			}
		})
	}
}

// A rebase can conflict in one step although the combined merge is clean
// (the branch changes README and changes it back): merge and squash
// succeed, rebase is refused and aborted in its temporary worktree.
func TestMergeRebaseStepConflict(t *testing.T) {
	f := newFixture(t)
	wt := f.worktree("ws")
	f.commit(wt.Path, "README", "hello from ws\n", "ws: README")
	f.commit(wt.Path, "README", "hello\n", "ws: README back")
	f.commit(wt.Path, "feature.txt", "feature\n", "ws: feature")
	f.commit(f.root, "README", "hello from main\n", "main: README")
	mainBefore, wsBefore := f.snap(f.root), f.snap(wt.Path)
	branchBefore := f.git(f.root, "rev-parse", "ws")

	_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeRebase, "")
	ref := f.refusal(err, MergeReasonConflict)
	if ref.Detail != "rebase" || !slices.Equal(ref.Paths, []string{"README"}) {
		t.Errorf("refusal %+v, want a rebase conflict on README", ref)
	}
	f.sameSnap("main checkout", mainBefore, f.snap(f.root))
	f.sameSnap("workspace", wsBefore, f.snap(wt.Path))
	if h := f.git(f.root, "rev-parse", "ws"); h != branchBefore {
		t.Errorf("branch moved %s -> %s", branchBefore, h)
	}
	if wts, err := f.c.ListWorktrees(t.Context(), f.root); err != nil || len(wts) != 2 {
		t.Errorf("worktrees after refusal: %+v, %v", wts, err)
	}
	// The same branch merges cleanly.
	if _, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeCommit, ""); err != nil {
		t.Fatalf("merge after refused rebase: %v", err)
	}
}

func TestMergeMainDirty(t *testing.T) {
	tests := []struct {
		name   string
		dirty  func(f *fixture)
		detail string
		paths  []string
	}{
		{"unstaged", func(f *fixture) { f.write(f.root, "README", "edited\n") }, "changes", []string{"README"}},
		{"staged", func(f *fixture) {
			f.write(f.root, "new.txt", "new\n")
			f.git(f.root, "add", "new.txt")
		}, "changes", []string{"new.txt"}},
		{"untracked file the merge would overwrite", func(f *fixture) {
			f.write(f.root, "feature.txt", "mine\n")
		}, "untracked_overwritten", []string{"feature.txt"}},
	}
	for _, tc := range tests {
		for _, s := range strategies {
			t.Run(tc.name+"/"+string(s), func(t *testing.T) {
				f := newFixture(t)
				wt := f.divergent()
				tc.dirty(f)
				mainBefore, wsBefore := f.snap(f.root), f.snap(wt.Path)
				_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", s, "")
				ref := f.refusal(err, MergeReasonMainDirty)
				if ref.Detail != tc.detail || !slices.Equal(ref.Paths, tc.paths) {
					t.Errorf("refusal %+v, want %s %v", ref, tc.detail, tc.paths)
				}
				f.sameSnap("main checkout", mainBefore, f.snap(f.root))
				f.sameSnap("workspace", wsBefore, f.snap(wt.Path))
				if wts, err := f.c.ListWorktrees(t.Context(), f.root); err != nil || len(wts) != 2 {
					t.Errorf("worktrees after refusal: %+v, %v", wts, err)
				}
			})
		}
	}
}

// Untracked files the merge does not touch stay and do not block it.
func TestMergeUntrackedUnrelatedAllowed(t *testing.T) {
	for _, s := range strategies {
		t.Run(string(s), func(t *testing.T) {
			f := newFixture(t)
			f.divergent()
			f.write(f.root, "scratch/notes.txt", "mine\n")
			if _, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", s, ""); err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(f.root, "scratch/notes.txt")); err != nil || string(b) != "mine\n" {
				t.Errorf("untracked file = %q, %v", b, err)
			}
		})
	}
}

func TestMergeWrongBranch(t *testing.T) {
	f := newFixture(t)
	f.divergent()
	f.git(f.root, "checkout", "-q", "-b", "elsewhere")
	before := f.snap(f.root)
	_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeCommit, "")
	if ref := f.refusal(err, MergeReasonWrongBranch); ref.Note != "elsewhere" || ref.Detail != "" {
		t.Errorf("refusal %+v", ref)
	}
	f.git(f.root, "checkout", "-q", "--detach", "main")
	_, err = f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeRebase, "")
	if ref := f.refusal(err, MergeReasonWrongBranch); ref.Detail != "detached" {
		t.Errorf("refusal %+v, want detached", ref)
	}
	f.git(f.root, "checkout", "-q", "elsewhere")
	f.sameSnap("main checkout", before, f.snap(f.root))
}

func TestMergeOperationInProgress(t *testing.T) {
	f := newFixture(t)
	f.divergent()
	// A conflicted merge left in the main checkout.
	f.git(f.root, "checkout", "-q", "-b", "side", "HEAD~1")
	f.commit(f.root, "other.txt", "side\n", "side: other")
	f.git(f.root, "checkout", "-q", "main")
	r := f.repo() // Inspect itself refuses once the merge is under way
	if out, err := f.gitErr(f.root, "merge", "--no-edit", "side"); err == nil {
		t.Fatalf("setup: merge did not conflict:\n%s", out)
	}
	before := f.snap(f.root)
	for _, s := range strategies {
		_, err := f.c.Merge(t.Context(), r, "ws", "main", s, "")
		ref := f.refusal(err, MergeReasonOperationInProgress)
		if ref.Detail != "merge" || !errors.Is(err, ErrOperationInProgress) {
			t.Errorf("%s: refusal %+v", s, ref)
		}
	}
	f.sameSnap("main checkout", before, f.snap(f.root))
}

func TestMergeNothingToMerge(t *testing.T) {
	f := newFixture(t)
	f.worktree("ws")
	for _, s := range strategies {
		_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", s, "")
		if ref := f.refusal(err, MergeReasonNothingToMerge); ref.Detail != string(ProofSameCommit) {
			t.Errorf("%s: refusal %+v", s, ref)
		}
	}
}

func TestMergeRebaseWorkspaceDirty(t *testing.T) {
	f := newFixture(t)
	wt := f.divergent()
	f.write(wt.Path, "wip.txt", "uncommitted\n")
	before, wsBefore := f.snap(f.root), f.snap(wt.Path)
	_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeRebase, "")
	if ref := f.refusal(err, MergeReasonWorkspaceDirty); !slices.Equal(ref.Paths, []string{"wip.txt"}) {
		t.Errorf("refusal %+v", ref)
	}
	f.sameSnap("main checkout", before, f.snap(f.root))
	f.sameSnap("workspace", wsBefore, f.snap(wt.Path))
	// A merge commit does not move the branch, so it is allowed.
	if _, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeCommit, ""); err != nil {
		t.Fatalf("merge with a dirty workspace: %v", err)
	}
}

func TestMergeNoIdentity(t *testing.T) {
	f := newFixture(t)
	f.divergent()
	f.git(f.root, "config", "--unset", "user.email")
	before := f.snap(f.root)
	for _, s := range strategies {
		_, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", s, "")
		if ref := f.refusal(err, MergeReasonNoIdentity); ref.Detail != "user.email" {
			t.Errorf("%s: refusal %+v", s, ref)
		}
	}
	f.sameSnap("main checkout", before, f.snap(f.root))
}

func TestMergeBadArguments(t *testing.T) {
	f := newFixture(t)
	f.divergent()
	repo := f.repo()
	if _, err := f.c.Merge(t.Context(), repo, "ws", "main", "octopus", ""); !errors.Is(err, ErrUnknownStrategy) {
		t.Errorf("unknown strategy: %v", err)
	}
	if _, err := f.c.Merge(t.Context(), repo, "nope", "main", MergeCommit, ""); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("unknown branch: %v", err)
	}
	if _, err := f.c.Merge(t.Context(), repo, "ws", "nope", MergeCommit, ""); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("unknown target: %v", err)
	}
}

// A branch checked out nowhere (its worktree was retired with keep) is
// rebased by a compare-and-swap of its ref.
func TestMergeRebaseBranchWithoutWorktree(t *testing.T) {
	f := newFixture(t)
	wt := f.divergent()
	if err := f.c.RemoveWorktree(t.Context(), f.repo(), wt.Path, false); err != nil {
		t.Fatal(err)
	}
	before := f.git(f.root, "rev-parse", "ws")
	res, err := f.c.Merge(t.Context(), f.repo(), "ws", "main", MergeRebase, "")
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	head := f.git(f.root, "rev-parse", "HEAD")
	if h := f.git(f.root, "rev-parse", "ws"); h != head || res.BranchHead != head || h == before {
		t.Errorf("branch %s, result %s, target %s (before %s)", h, res.BranchHead, head, before)
	}
	if res.Proof.Kind != ProofSameCommit {
		t.Errorf("proof %s", res.Proof.Kind)
	}
	if msg := f.git(f.root, "reflog", "-1", "--format=%gs", "refs/heads/ws"); !strings.Contains(msg, "rebase ws") {
		t.Errorf("branch reflog %q", msg)
	}
}

// raceRunner runs before() just before the first `merge --ff-only`: the
// target moving between Merge's checks and its fast-forward.
type raceRunner struct {
	Runner
	before func()
	done   bool
}

func (r *raceRunner) Run(ctx context.Context, inv Invocation) ([]byte, error) {
	if !r.done && slices.Contains(inv.Args, "--ff-only") {
		r.done = true
		r.before()
	}
	return r.Runner.Run(ctx, inv)
}

// If the target moves after the checks, the fast-forward fails and changes
// nothing: the main checkout keeps the new commit, clean, no merge state.
func TestMergeTargetMovedDuringMerge(t *testing.T) {
	for _, s := range strategies {
		t.Run(string(s), func(t *testing.T) {
			f := newFixture(t)
			f.divergent()
			var moved snapshot
			c := New(&raceRunner{Runner: f.c.Runner(), before: func() {
				f.commit(f.root, "late.txt", "late\n", "main: late")
				moved = f.snap(f.root)
			}})
			branch := f.git(f.root, "rev-parse", "ws")
			_, err := c.Merge(t.Context(), f.repo(), "ws", "main", s, "")
			if !errors.Is(err, ErrTargetMoved) {
				t.Fatalf("err = %v, want ErrTargetMoved", err)
			}
			f.sameSnap("main checkout", moved, f.snap(f.root))
			if h := f.git(f.root, "rev-parse", "ws"); h != branch {
				t.Errorf("branch moved to %s", h)
			}
			if op := inProgress(filepath.Join(f.root, ".git")); op != "" {
				t.Errorf("%s left in progress", op)
			}
		})
	}
}
