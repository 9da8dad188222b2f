package team

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// The worker's edits are committed with the task's title, with the
// repository's identity; without one nothing is committed (no identity is
// invented); a clean worktree commits nothing.
func TestCommitWork(t *testing.T) {
	testhost.Tool(t, "git")
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "README")
	gitIn(t, dir, "commit", "-q", "-m", "initial")
	co := &Coordinator{deps: Deps{Git: git.New(&git.Exec{Env: []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}})}}
	ctx := context.Background()

	if err := co.commitWork(ctx, dir, "nothing"); err != nil {
		t.Fatalf("a clean worktree: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := co.commitWork(ctx, dir, "add new"); !errors.Is(err, errNoIdentity) {
		t.Fatalf("without an identity: %v, want errNoIdentity", err)
	}
	if got := gitIn(t, dir, "rev-list", "--count", "HEAD"); got != "1" {
		t.Fatalf("commits = %s, want nothing committed", got)
	}
	gitIn(t, dir, "config", "user.name", "t")
	gitIn(t, dir, "config", "user.email", "t@example.test")
	if err := co.commitWork(ctx, dir, "add new"); err != nil {
		t.Fatal(err)
	}
	if got := gitIn(t, dir, "log", "-1", "--format=%s|%an"); got != "add new|t" {
		t.Fatalf("head = %q", got)
	}
	if got := gitIn(t, dir, "status", "--porcelain"); got != "" {
		t.Fatalf("worktree after the commit: %q", got)
	}
}

// CI passes on exit 0 and keeps the output's last lines; fails otherwise;
// a command past team.ci_timeout is killed (its whole group) and fails.
func TestRunCI(t *testing.T) {
	dir := t.TempDir()
	run := func(cmd string, bound time.Duration) store.CIResult {
		co := &Coordinator{deps: Deps{CICommand: cmd, CITimeout: bound}}
		return co.runCI(context.Background(), dir)
	}
	if r := run("for i in $(seq 1 30); do echo line $i; done", time.Minute); r.Status != store.CIPass ||
		!strings.HasPrefix(r.Summary, "line 11\n") || !strings.HasSuffix(r.Summary, "line 30") {
		t.Fatalf("pass = %+v", r)
	}
	if r := run("echo broken >&2; exit 3", time.Minute); r.Status != store.CIFail || r.Summary != "broken" {
		t.Fatalf("fail = %+v", r)
	}
	start := time.Now()
	if r := run("sleep 30 & wait", 200*time.Millisecond); r.Status != store.CIFail || !strings.Contains(r.Summary, "timed out") {
		t.Fatalf("timeout = %+v", r)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("the CI outlived its bound")
	}
}
