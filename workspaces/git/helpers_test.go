package git

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// fixture is a real repository in t.TempDir() with its own HOME, so the
// developer's global git config cannot change what the tests see.
type fixture struct {
	t    *testing.T
	root string // main checkout
	home string
	c    *Client
}

func testEnv(home string) []string {
	return []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "GIT_CONFIG_NOSYSTEM=1"}
}

func needGit(t *testing.T) {
	t.Helper()
	testhost.Tool(t, "git")
}

// newFixture creates a repository on branch main with one commit.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	needGit(t)
	base := canonical(t.TempDir())
	f := &fixture{t: t, root: filepath.Join(base, "repo"), home: filepath.Join(base, "home")}
	if err := os.MkdirAll(f.home, 0o755); err != nil {
		t.Fatal(err)
	}
	f.c = New(&Exec{Env: testEnv(f.home)})
	f.git(base, "init", "-q", "-b", "main", f.root)
	f.configure(f.root)
	f.commit(f.root, "README", "hello\n", "initial")
	return f
}

func (f *fixture) configure(dir string) {
	f.git(dir, "config", "user.name", "Shard Test")
	f.git(dir, "config", "user.email", "test@shard.invalid")
	f.git(dir, "config", "commit.gpgsign", "false")
}

// git runs the real git in dir and fails the test on error.
func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := f.gitErr(dir, args...)
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// gitErr runs git and returns its combined output and error.
func (f *fixture) gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(environ(false, nil), testEnv(f.home)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// write writes a file under dir (creating parents).
func (f *fixture) write(dir, name, content string) {
	f.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// commit writes name and commits it in dir, returning the new HEAD.
func (f *fixture) commit(dir, name, content, msg string) string {
	f.t.Helper()
	f.write(dir, name, content)
	f.git(dir, "add", "--", name)
	f.git(dir, "commit", "-q", "-m", msg)
	return f.git(dir, "rev-parse", "HEAD")
}

func (f *fixture) repo() Repo {
	f.t.Helper()
	r, err := f.c.Inspect(f.t.Context(), f.root)
	if err != nil {
		f.t.Fatalf("Inspect: %v", err)
	}
	return r
}

// worktree creates a worktree for branch via the package under test.
func (f *fixture) worktree(branch string) Created {
	f.t.Helper()
	path := filepath.Join(filepath.Dir(f.root), "wt", strings.ReplaceAll(branch, "/", "-"))
	cr, err := f.c.CreateWorktree(f.t.Context(), f.repo(), path, branch, "")
	if err != nil {
		f.t.Fatalf("CreateWorktree: %v", err)
	}
	return cr
}
