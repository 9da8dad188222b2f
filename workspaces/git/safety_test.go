package git

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCheckRetire(t *testing.T) {
	needGit(t)
	tests := []struct {
		name string
		// setup prepares the worktree wt of f and returns the record to check
		// and the repository as the daemon recorded it.
		setup  func(f *fixture, wt Created) (Repo, Recorded)
		reason Reason
		detail string
		paths  []string
	}{
		{"clean", func(f *fixture, wt Created) (Repo, Recorded) {
			f.commit(wt.Path, "done", "work\n", "committed work")
			return f.repo(), rec(wt)
		}, "", "", nil},
		{"ignored files only", func(f *fixture, wt Created) (Repo, Recorded) {
			f.commit(wt.Path, ".gitignore", "build/\n", "ignore build")
			f.write(wt.Path, "build/out", "bin\n")
			return f.repo(), rec(wt)
		}, "", "", nil},
		{"staged", func(f *fixture, wt Created) (Repo, Recorded) {
			f.write(wt.Path, "staged.txt", "s\n")
			f.git(wt.Path, "add", "staged.txt")
			return f.repo(), rec(wt)
		}, ReasonDirty, "", []string{"staged.txt"}},
		{"unstaged", func(f *fixture, wt Created) (Repo, Recorded) {
			f.write(wt.Path, "README", "changed\n")
			return f.repo(), rec(wt)
		}, ReasonDirty, "", []string{"README"}},
		{"untracked in a new directory", func(f *fixture, wt Created) (Repo, Recorded) {
			f.write(wt.Path, "new/dir/notes.md", "n\n")
			return f.repo(), rec(wt)
		}, ReasonDirty, "", []string{"new/dir/notes.md"}},
		{"deleted file", func(f *fixture, wt Created) (Repo, Recorded) {
			if err := os.Remove(filepath.Join(wt.Path, "README")); err != nil {
				f.t.Fatal(err)
			}
			return f.repo(), rec(wt)
		}, ReasonDirty, "", []string{"README"}},
		{"locked", func(f *fixture, wt Created) (Repo, Recorded) {
			f.git(f.root, "worktree", "lock", "--reason", "keep me", wt.Path)
			return f.repo(), rec(wt)
		}, ReasonLocked, "", nil},
		{"initialized submodule", func(f *fixture, wt Created) (Repo, Recorded) {
			lib := filepath.Join(filepath.Dir(f.root), "lib")
			f.git(f.root, "init", "-q", "-b", "main", lib)
			f.configure(lib)
			f.commit(lib, "lib.go", "package lib\n", "lib")
			f.git(wt.Path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib")
			f.git(wt.Path, "commit", "-q", "-m", "add submodule")
			return f.repo(), rec(wt)
		}, ReasonSubmodules, "", []string{"vendor/lib"}},
		{"worktree deleted behind our back", func(f *fixture, wt Created) (Repo, Recorded) {
			if err := os.RemoveAll(wt.Path); err != nil {
				f.t.Fatal(err)
			}
			return f.repo(), rec(wt)
		}, ReasonMissingAuthority, "worktree_gone", nil},
		{"worktree moved with git worktree move", func(f *fixture, wt Created) (Repo, Recorded) {
			f.git(f.root, "worktree", "move", wt.Path, wt.Path+"-elsewhere")
			return f.repo(), rec(wt)
		}, ReasonMissingAuthority, "worktree_gone", nil},
		{"repository moved", func(f *fixture, wt Created) (Repo, Recorded) {
			repo := f.repo()
			if err := os.Rename(f.root, f.root+"-moved"); err != nil {
				f.t.Fatal(err)
			}
			return repo, rec(wt)
		}, ReasonMissingAuthority, "repository_gone", nil},
		{"main checkout moved away from its git dir", func(f *fixture, wt Created) (Repo, Recorded) {
			// A --separate-git-dir layout whose work tree was moved: the
			// common dir is still there, the recorded root no longer
			// resolves to it.
			repo := f.repo()
			repo.Root += "-moved"
			return repo, rec(wt)
		}, ReasonMissingAuthority, "repository_moved", nil},
		{"another repository at the recorded root", func(f *fixture, wt Created) (Repo, Recorded) {
			repo := f.repo()
			other := filepath.Join(filepath.Dir(f.root), "other")
			f.git(filepath.Dir(f.root), "init", "-q", other)
			repo.Root = other
			return repo, rec(wt)
		}, ReasonMissingAuthority, "repository_moved", nil},
		{"plain directory at the recorded path", func(f *fixture, wt Created) (Repo, Recorded) {
			f.git(f.root, "worktree", "remove", wt.Path)
			f.write(wt.Path, "someone-else.txt", "x\n")
			return f.repo(), rec(wt)
		}, ReasonUnsafe, "not_a_worktree", nil},
		{"another repository's worktree at the recorded path", func(f *fixture, wt Created) (Repo, Recorded) {
			f.git(f.root, "worktree", "remove", wt.Path)
			other := filepath.Join(filepath.Dir(f.root), "other")
			f.git(f.root, "clone", "-q", f.root, other)
			f.git(other, "worktree", "add", "-q", "-b", wt.Branch, wt.Path)
			return f.repo(), rec(wt)
		}, ReasonUnsafe, "not_a_worktree", nil},
		{"main checkout recorded", func(f *fixture, wt Created) (Repo, Recorded) {
			return f.repo(), Recorded{Path: f.root, Branch: "main"}
		}, ReasonUnsafe, "main_checkout", nil},
		{".git file points elsewhere", func(f *fixture, wt Created) (Repo, Recorded) {
			other := f.worktree("other")
			b, err := os.ReadFile(filepath.Join(other.Path, ".git"))
			if err != nil {
				f.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(wt.Path, ".git"), b, 0o644); err != nil {
				f.t.Fatal(err)
			}
			return f.repo(), rec(wt)
		}, ReasonUnsafe, "gitdir_mismatch", nil},
		{"switched to another branch", func(f *fixture, wt Created) (Repo, Recorded) {
			f.git(wt.Path, "checkout", "-q", "-b", "elsewhere")
			return f.repo(), rec(wt)
		}, ReasonUnsafe, "branch_switched", nil},
		{"detached with commits of its own", func(f *fixture, wt Created) (Repo, Recorded) {
			f.git(wt.Path, "checkout", "-q", "--detach")
			f.commit(wt.Path, "orphan", "o\n", "only reachable from this HEAD")
			return f.repo(), rec(wt)
		}, ReasonUnsafe, "branch_switched", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			wt := f.worktree("shard/task")
			repo, r := tt.setup(f, wt)
			chk, err := f.c.CheckRetire(t.Context(), repo, r)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckRetire: %v, want nil", err)
				}
				if chk.Worktree.Path != wt.Path || !chk.Status.Clean() {
					t.Errorf("RetireCheck = %+v", chk)
				}
				if err := f.c.RemoveWorktree(t.Context(), repo, wt.Path, false); err != nil {
					t.Errorf("git refused to remove a worktree CheckRetire passed: %v", err)
				}
				return
			}
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("CheckRetire: %v, want a *Refusal %s", err, tt.reason)
			}
			if ref.Reason != tt.reason || ref.Detail != tt.detail {
				t.Errorf("Refusal = %+v, want reason %s detail %q", ref, tt.reason, tt.detail)
			}
			if !errors.Is(err, tt.reason.sentinel()) {
				t.Errorf("errors.Is(err, %v) = false", tt.reason.sentinel())
			}
			if tt.reason == ReasonLocked && ref.Note != "keep me" {
				t.Errorf("lock reason = %q, want the user's", ref.Note)
			}
			if tt.paths != nil && (!reflect.DeepEqual(ref.Paths, tt.paths) || ref.Count != len(tt.paths)) {
				t.Errorf("Refusal paths = %q (count %d), want %q", ref.Paths, ref.Count, tt.paths)
			}
		})
	}
}

func rec(c Created) Recorded { return Recorded{Path: c.Path, Branch: c.Branch} }

func TestCheckRetireBoundsPaths(t *testing.T) {
	f := newFixture(t)
	wt := f.worktree("many")
	for i := range 30 {
		f.write(wt.Path, filepath.Join("u", string(rune('a'+i%26))+string(rune('a'+i/26))), "x\n")
	}
	_, err := f.c.CheckRetire(t.Context(), f.repo(), rec(wt))
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Reason != ReasonDirty || ref.Count != 30 || len(ref.Paths) != maxRefusalPaths {
		t.Fatalf("CheckRetire = %v (%+v), want dirty with 30 paths, %d listed", err, ref, maxRefusalPaths)
	}
}

func TestParseStatus(t *testing.T) {
	z := func(recs ...string) []byte {
		var b []byte
		for _, r := range recs {
			b = append(b, r...)
			b = append(b, 0)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want Status
	}{
		{"empty", nil, Status{}},
		{"headers and ignored", z("# branch.oid abc", "# branch.head main", "! build/x"), Status{}},
		{"staged and unstaged", z(
			"1 M. N... 100644 100644 100644 aaa bbb staged file.txt",
			"1 .M N... 100644 100644 100644 aaa aaa work.txt",
			"1 MM N... 100644 100644 100644 aaa bbb both.txt",
		), Status{Staged: []string{"staged file.txt", "both.txt"}, Unstaged: []string{"work.txt", "both.txt"}}},
		{"rename keeps the new path and skips the original", z(
			"2 R. N... 100644 100644 100644 aaa aaa R100 new name.txt", "old name.txt",
			"? after.txt",
		), Status{Staged: []string{"new name.txt"}, Untracked: []string{"after.txt"}}},
		{"unmerged", z("u UU N... 100644 100644 100644 100644 a b c conflict.go"), Status{Unmerged: []string{"conflict.go"}}},
		{"untracked with newline", z("? weird\nname"), Status{Untracked: []string{"weird\nname"}}},
		{"submodule modified", z("1 .M SC.. 160000 160000 160000 aaa aaa vendor/lib"), Status{Unstaged: []string{"vendor/lib"}}},
	}
	for _, tt := range tests {
		got, err := parseStatus(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: parseStatus = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if _, err := parseStatus(z("1 M")); err == nil {
		t.Error("truncated record parsed without error")
	}
}

func TestStatusRealUnmergedAndRename(t *testing.T) {
	f := newFixture(t)
	conflict(f)
	if _, err := f.gitErr(f.root, "merge", "main"); err == nil {
		t.Fatal("merge did not conflict")
	}
	f.git(f.root, "mv", "README", "README.md")
	st, err := f.c.Status(t.Context(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	want := Status{Staged: []string{"README.md"}, Unmerged: []string{"f"}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("Status = %+v, want %+v", st, want)
	}
}
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("1 M. N... 100644 100644 100644 aaa bbb a\x002 R. N... 100644 100644 100644 a a R100 b\x00c\x00? d\x00"))
	f.Add([]byte("u UU N... 1 1 1 1 a b c x\x00# h\x00! i\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStatus(b)
		if err == nil {
			_ = st.Paths()
		}
	})
}
