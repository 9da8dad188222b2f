package git

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateWorktree(t *testing.T) {
	f := newFixture(t)
	first := f.git(f.root, "rev-parse", "HEAD")
	second := f.commit(f.root, "a", "a\n", "second")
	repo := f.repo()
	dir := filepath.Join(filepath.Dir(f.root), "worktrees")

	cr, err := f.c.CreateWorktree(t.Context(), repo, filepath.Join(dir, "one"), "shard/one", "")
	if err != nil {
		t.Fatal(err)
	}
	if cr.Base != second || cr.Branch != "shard/one" || cr.Path != filepath.Join(dir, "one") {
		t.Errorf("Created = %+v, want base %s (HEAD) at %s/one", cr, second, dir)
	}
	if h, err := f.c.BranchHead(t.Context(), repo, "shard/one"); err != nil || h != second {
		t.Errorf("BranchHead = %q, %v; want %s", h, err, second)
	}
	if got := f.git(cr.Path, "rev-parse", "--abbrev-ref", "HEAD"); got != "shard/one" {
		t.Errorf("worktree on %q, want shard/one", got)
	}
	if got, err := f.gitErr(cr.Path, "config", "--get", "branch.shard/one.remote"); err == nil {
		t.Errorf("new branch tracks %q, want no upstream", got)
	}

	cr2, err := f.c.CreateWorktree(t.Context(), repo, filepath.Join(dir, "two"), "two", first[:10])
	if err != nil {
		t.Fatal(err)
	}
	if cr2.Base != first {
		t.Errorf("base_ref %s gave base %s", first[:10], cr2.Base)
	}
	list, err := f.c.ListWorktrees(t.Context(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[1].Path != cr.Path || list[2].Path != cr2.Path || list[2].Branch != "two" || list[2].HEAD != first {
		t.Errorf("ListWorktrees = %+v", list)
	}
	if err := f.c.RemoveWorktree(t.Context(), repo, cr2.Path, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cr2.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree dir still there after RemoveWorktree: %v", err)
	}
	if _, err := f.c.BranchHead(t.Context(), repo, "two"); err != nil {
		t.Errorf("RemoveWorktree deleted the branch: %v", err)
	}
}

func TestCreateWorktreeRefusals(t *testing.T) {
	f := newFixture(t)
	repo := f.repo()
	base := filepath.Dir(f.root)
	taken := filepath.Join(base, "taken")
	f.write(taken, "keep", "mine\n")
	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	f.git(f.root, "branch", "existing")
	// A worktree deleted behind git's back is still registered.
	stale := f.worktree("stale")
	if err := os.RemoveAll(stale.Path); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path, branch, base string
		want                     error
	}{
		{"branch exists", filepath.Join(base, "a"), "existing", "", ErrBranchExists},
		{"base_ref unknown", filepath.Join(base, "b"), "new-b", "no-such-ref", ErrRefUnknown},
		{"base_ref option-like", filepath.Join(base, "b"), "new-b", "--orphan", ErrRefUnknown},
		{"path taken by a directory", taken, "new-c", "", ErrPathTaken},
		{"path taken by an empty directory", empty, "new-c", "", ErrPathTaken},
		{"path taken by a file", filepath.Join(taken, "keep"), "new-c", "", ErrPathTaken},
		{"path registered to a vanished worktree", stale.Path, "new-d", "", ErrPathTaken},
		{"relative path", "rel/path", "new-e", "", ErrPathNotAbsolute},
		{"invalid branch", filepath.Join(base, "f"), "bad..name", "", ErrInvalidBranchName},
		{"option-like branch", filepath.Join(base, "f"), "-D", "", ErrInvalidBranchName},
		{"branch shorthand", filepath.Join(base, "f"), "@{-1}", "", ErrInvalidBranchName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.git(f.root, "for-each-ref", "refs/heads")
			_, err := f.c.CreateWorktree(t.Context(), repo, tt.path, tt.branch, tt.base)
			if !errors.Is(err, tt.want) {
				t.Fatalf("CreateWorktree: %v, want %v", err, tt.want)
			}
			if after := f.git(f.root, "for-each-ref", "refs/heads"); after != before {
				t.Errorf("refused create changed branches:\n%s\n->\n%s", before, after)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(taken, "keep")); err != nil || string(b) != "mine\n" {
		t.Errorf("taken path touched: %q, %v", b, err)
	}
}

func TestListWorktreesFlags(t *testing.T) {
	f := newFixture(t)
	locked := f.worktree("locked")
	gone := f.worktree("gone")
	det := f.worktree("det")
	f.git(f.root, "worktree", "lock", "--reason", "on a usb stick", locked.Path)
	if err := os.RemoveAll(gone.Path); err != nil {
		t.Fatal(err)
	}
	f.git(det.Path, "checkout", "-q", "--detach")

	list, err := f.c.ListWorktrees(t.Context(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Worktree{}
	for _, w := range list {
		by[w.Path] = w
	}
	if m := by[f.root]; !m.Main || m.Branch != "main" || m.Locked || m.Prunable {
		t.Errorf("main entry = %+v", m)
	}
	if l := by[locked.Path]; !l.Locked || l.LockReason != "on a usb stick" || l.Main || l.Branch != "locked" {
		t.Errorf("locked entry = %+v", l)
	}
	if g := by[gone.Path]; !g.Prunable || g.PrunableReason == "" {
		t.Errorf("gone entry = %+v", g)
	}
	if d := by[det.Path]; !d.Detached || d.Branch != "" || d.HEAD == "" {
		t.Errorf("detached entry = %+v", d)
	}
}

func TestParseWorktreesPathWithNewline(t *testing.T) {
	out := "worktree /r\x00HEAD aa\x00branch refs/heads/main\x00\x00" +
		"worktree /w/with\nnewline and space\x00HEAD bb\x00detached\x00locked\x00\x00" +
		"worktree /bare\x00bare\x00\x00"
	got := parseWorktrees([]byte(out))
	want := []Worktree{
		{Path: "/r", HEAD: "aa", Branch: "main", Main: true},
		{Path: "/w/with\nnewline and space", HEAD: "bb", Detached: true, Locked: true},
		{Path: "/bare", Bare: true},
	}
	if len(got) != len(want) {
		t.Fatalf("parseWorktrees = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestBranchName(t *testing.T) {
	f := newFixture(t)
	tests := []struct{ label, suffix, want string }{
		{"Fix the login bug", "a1b2c3", "shard/fix-the-login-bug-a1b2c3"},
		{"  ..Ünïcode / lock.. ", "x9", "shard/n-code-lock-x9"},
		{"", "a1b2", "shard/a1b2"},
		{"refs/heads/../../evil.lock", "", "shard/refs-heads-evil-lock"},
		{"---", "", "shard/workspace"},
		{strings.Repeat("long-", 20), "zz", "shard/" + strings.TrimRight(strings.Repeat("long-", 8), "-") + "-zz"},
		{"HEAD", "@{1}", "shard/head-1"},
	}
	for _, tt := range tests {
		got := BranchName(tt.label, tt.suffix)
		if got != tt.want {
			t.Errorf("BranchName(%q, %q) = %q, want %q", tt.label, tt.suffix, got, tt.want)
		}
		if err := f.c.CheckBranchName(t.Context(), f.root, got); err != nil {
			t.Errorf("generated %q rejected: %v", got, err)
		}
	}
	for _, bad := range []string{"", "a..b", "a b", "x.lock", "-x", "@{-1}", "a~1", "HEAD^"} {
		if err := f.c.CheckBranchName(t.Context(), f.root, bad); !errors.Is(err, ErrInvalidBranchName) {
			t.Errorf("CheckBranchName(%q): %v, want ErrInvalidBranchName", bad, err)
		}
	}
}

func TestDeleteBranch(t *testing.T) {
	f := newFixture(t)
	repo := f.repo()
	main := f.git(f.root, "rev-parse", "HEAD")
	f.git(f.root, "branch", "merged")
	proof, err := f.c.ProveMerged(t.Context(), repo, "merged", "main")
	if err != nil || !proof.Held() {
		t.Fatalf("ProveMerged = %+v, %v", proof, err)
	}

	if err := f.c.DeleteBranch(t.Context(), repo, "merged", main, Deletion{}); !errors.Is(err, ErrNotProven) {
		t.Errorf("no evidence: %v, want ErrNotProven", err)
	}
	if err := f.c.DeleteBranch(t.Context(), repo, "merged", "0123", Deletion{Proof: proof}); !errors.Is(err, ErrBranchMoved) {
		t.Errorf("proof about another head: %v, want ErrBranchMoved", err)
	}
	// The branch gains a commit after the proof: deletion must refuse.
	wt := f.worktree("later")
	f.commit(wt.Path, "n", "new work\n", "unpushed work")
	if err := f.c.DeleteBranch(t.Context(), repo, "later", main, Deletion{Confirmed: true}); !errors.Is(err, ErrBranchMoved) {
		t.Errorf("moved branch: %v, want ErrBranchMoved", err)
	}
	later := f.git(f.root, "rev-parse", "later")
	if err := f.c.DeleteBranch(t.Context(), repo, "later", later, Deletion{Confirmed: true}); !errors.Is(err, ErrBranchCheckedOut) {
		t.Errorf("checked-out branch: %v, want ErrBranchCheckedOut", err)
	}
	if err := f.c.DeleteBranch(t.Context(), repo, "main", main, Deletion{Confirmed: true}); !errors.Is(err, ErrBranchCheckedOut) {
		t.Errorf("main checkout's branch: %v, want ErrBranchCheckedOut", err)
	}
	if _, err := f.c.BranchHead(t.Context(), repo, "later"); err != nil {
		t.Fatalf("refusals deleted the branch: %v", err)
	}

	if err := f.c.DeleteBranch(t.Context(), repo, "merged", main, Deletion{Proof: proof}); err != nil {
		t.Fatalf("proven delete: %v", err)
	}
	if _, err := f.c.BranchHead(t.Context(), repo, "merged"); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("branch still there: %v", err)
	}
	if err := f.c.DeleteBranch(t.Context(), repo, "merged", main, Deletion{Proof: proof}); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("second delete: %v, want ErrBranchNotFound", err)
	}

	// Confirmed deletion of unmerged work, then the tombstone restores it.
	if err := f.c.RemoveWorktree(t.Context(), repo, wt.Path, false); err != nil {
		t.Fatal(err)
	}
	f.git(f.root, "config", "branch.later.description", "x")
	if err := f.c.DeleteBranch(t.Context(), repo, "later", later, Deletion{Confirmed: true}); err != nil {
		t.Fatalf("confirmed delete: %v", err)
	}
	if out, err := f.gitErr(f.root, "config", "--get", "branch.later.description"); err == nil {
		t.Errorf("branch config left behind: %s", out)
	}
	f.git(f.root, "branch", "later", later)
	if got := f.git(f.root, "log", "-1", "--format=%s", "later"); got != "unpushed work" {
		t.Errorf("restored branch at %q", got)
	}
}

// FuzzParseWorktrees: parseWorktrees never panics, makes one entry per
// "worktree" attribute, marks only the first one Main, and gives every
// entry a path.
func FuzzParseWorktrees(f *testing.F) {
	f.Add([]byte("worktree /r\x00HEAD aa\x00branch refs/heads/main\x00\x00worktree /w\x00HEAD bb\x00detached\x00locked why\x00prunable gone\x00\x00"))
	f.Add([]byte("worktree /bare\x00bare\x00\x00"))
	f.Add([]byte("HEAD orphan\x00\x00worktree \x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		got := parseWorktrees(out)
		n := 0
		for _, field := range strings.Split(string(out), "\x00") {
			if p, ok := strings.CutPrefix(field, "worktree "); ok && p != "" {
				n++
			}
		}
		if len(got) != n {
			t.Fatalf("%d entries for %d worktree attributes", len(got), n)
		}
		for i, w := range got {
			if w.Main != (i == 0) {
				t.Fatalf("entry %d: Main = %v", i, w.Main)
			}
			if w.Path == "" {
				t.Fatalf("entry %d has no path", i)
			}
		}
	})
}
