package team

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// errNoIdentity: the repository has no committer identity, so the
// worker's changes cannot be committed (the daemon never invents one, as
// workspace.merge does not).
var errNoIdentity = errors.New("team: no committer identity: set user.name and user.email in the repository")

// commitWork commits everything the worker left in its worktree (edits,
// new files, deletions) with the task's title as the message: a worker's
// edits are uncommitted, and workspace.merge merges commits. Nothing to
// commit is no error. git runs directly, never through a shell, with the
// repository's own identity.
func (co *Coordinator) commitWork(ctx context.Context, worktree, title string) error {
	r := co.deps.Git.Runner()
	out, err := r.Run(ctx, git.Invocation{Dir: worktree, Args: []string{"status", "--porcelain", "--untracked-files=all"}, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	for _, key := range []string{"user.name", "user.email"} {
		v, err := r.Run(ctx, git.Invocation{Dir: worktree, Args: []string{"config", "--get", key}, ReadOnly: true})
		if err != nil || len(bytes.TrimSpace(v)) == 0 {
			return errNoIdentity
		}
	}
	if _, err := r.Run(ctx, git.Invocation{Dir: worktree, Args: []string{"add", "-A"}}); err != nil {
		return fmt.Errorf("git add: %w", err)
	}
	args := []string{"-c", "user.useConfigOnly=true", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-F", "-"}
	if _, err := r.Run(ctx, git.Invocation{Dir: worktree, Args: args, Stdin: []byte(title + "\n")}); err != nil {
		return fmt.Errorf("git commit: %w", err)
	}
	return nil
}

// ahead counts the commits of the worktree's branch that the main
// checkout's branch lacks (0 when it cannot tell).
func (co *Coordinator) ahead(ctx context.Context, worktree string) int {
	repo, err := co.deps.Git.Inspect(ctx, worktree)
	if err != nil || repo.CurrentBranch == "" {
		return 0
	}
	out, err := co.deps.Git.Runner().Run(ctx, git.Invocation{Dir: worktree,
		Args: []string{"rev-list", "--count", "refs/heads/" + repo.CurrentBranch + "..HEAD"}, ReadOnly: true})
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// ciTailLines is how many of the CI output's last lines a task keeps.
const ciTailLines = 20

// runCI runs the repository's test command with `sh -c` in the worktree,
// in a process group of its own (killed whole at the timeout), bounded by
// team.ci_timeout: exit 0 passes, anything else (the timeout included)
// fails. The summary is the output's last lines.
func (co *Coordinator) runCI(ctx context.Context, worktree string) store.CIResult {
	ctx, cancel := context.WithTimeout(ctx, co.deps.CITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", co.deps.CICommand)
	cmd.Dir = worktree
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out tail
	cmd.Stdout, cmd.Stderr = &out, &out
	err := co.deps.Forks.Run(cmd)
	res := store.CIResult{Status: store.CIPass, Summary: out.lines(ciTailLines)}
	switch {
	case ctx.Err() != nil && err != nil:
		res.Status = store.CIFail
		res.Summary = strings.TrimSpace(res.Summary + "\n(timed out after " + co.deps.CITimeout.String() + ")")
	case err != nil:
		res.Status = store.CIFail
		if res.Summary == "" {
			res.Summary = err.Error()
		}
	}
	return res
}

// tail keeps the last 16 KiB written to it.
type tail struct{ b []byte }

const tailBytes = 16 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailBytes {
		t.b = append(t.b[:0:0], t.b[len(t.b)-tailBytes:]...)
	}
	return len(p), nil
}

// lines returns the last n lines, trimmed.
func (t *tail) lines(n int) string {
	ls := strings.Split(strings.TrimRight(string(t.b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.TrimSpace(strings.Join(ls, "\n"))
}
