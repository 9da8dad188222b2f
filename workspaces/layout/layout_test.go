package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorktreePath(t *testing.T) {
	a := WorktreePath("/root", "/src/my repo", "workspace-01abc")
	if !strings.HasPrefix(a, "/root/my-repo-") || filepath.Base(a) != "workspace-01abc" {
		t.Fatalf("WorktreePath = %s", a)
	}
	if b := WorktreePath("/root", "/other/my repo", "workspace-01abc"); filepath.Dir(b) == filepath.Dir(a) {
		t.Fatalf("two repositories of one name share %s", filepath.Dir(a))
	}
	if got := RepoDir("/"); !strings.HasPrefix(got, "repo-") {
		t.Fatalf("RepoDir(/) = %s", got)
	}
}

// TestScan: only directories two levels down named as workspace ids are
// candidates; a .git file naming an admin dir makes one linked, and the
// admin dir's token is read (a relative gitdir too).
func TestScan(t *testing.T) {
	root := t.TempDir()
	admin := filepath.Join(t.TempDir(), "worktrees", "w1")
	if err := os.MkdirAll(admin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(admin, TokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(root, "r-1", "workspace-01a")
	plain := filepath.Join(root, "r-1", "workspace-01b")
	rel := filepath.Join(root, "r-2", "workspace-01c")
	for _, d := range []string{linked, plain, rel, filepath.Join(root, "r-1", "notes"), filepath.Join(root, "r-1", "workspace-")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(linked, ".git"), []byte("gitdir: "+admin+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := filepath.Rel(rel, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rel, ".git"), []byte("gitdir: "+r+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "stray-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Candidate{
		linked: {Path: linked, Linked: true, Token: "tok"},
		plain:  {Path: plain},
		rel:    {Path: rel, Linked: true, Token: "tok"},
	}
	if len(got) != len(want) {
		t.Fatalf("Scan = %+v", got)
	}
	for _, c := range got {
		if want[c.Path] != c {
			t.Errorf("candidate %+v, want %+v", c, want[c.Path])
		}
	}
	if none, err := Scan(filepath.Join(root, "absent")); err != nil || len(none) != 0 {
		t.Fatalf("Scan of a missing root = %v, %v", none, err)
	}
}

// FuzzAdminDir: whatever a .git file holds, AdminDir never panics, and
// what it accepts is an absolute, clean path.
func FuzzAdminDir(f *testing.F) {
	f.Add([]byte("gitdir: /repo/.git/worktrees/w\n"))
	f.Add([]byte("gitdir: ../../repo/.git/worktrees/w"))
	f.Add([]byte("gitdir: "))
	f.Add([]byte("ref: refs/heads/main\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(filepath.Join(dir, ".git"), content, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := AdminDir(dir)
		if err != nil {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("AdminDir of %q = %q", content, got)
		}
	})
}
