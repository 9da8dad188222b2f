package workspaces_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
	"github.com/shard-dev/shard/workspaces/git"
)

// blockAdd runs real git, except `worktree add`, which runs fake: a git
// that never ends unless it is killed. ran receives what that invocation
// returned.
type blockAdd struct {
	real, fake git.Exec
	ran        chan error
}

func (b *blockAdd) Run(ctx context.Context, inv git.Invocation) ([]byte, error) {
	if len(inv.Args) > 1 && inv.Args[0] == "worktree" && inv.Args[1] == "add" {
		out, err := b.fake.Run(ctx, inv)
		b.ran <- err
		return out, err
	}
	return b.real.Run(ctx, inv)
}

// TestShutdownCancelsGitInFlight: a create whose git hangs is cut short
// when the actor stops, the daemon's shutdown: the git is killed, not
// awaited; the stop returns once the cancelled command has returned, the
// client is answered CONFLICT, and the record is left creating, for the
// next start to settle as after a crash.
func TestShutdownCancelsGitInFlight(t *testing.T) {
	repo := newRepo(t)
	st := openStore(t)
	root := filepath.Join(t.TempDir(), "worktrees")
	dir := t.TempDir()
	ready, block := filepath.Join(dir, "ready"), filepath.Join(dir, "block")
	for _, p := range []string{ready, block} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The fake writes its pid into ready, which the test reads (the sign
	// that git runs), then opens block, which nobody ever writes.
	fake := script(t, `echo $$ > "$SHARD_TEST_READY"`+"\n"+`exec cat "$SHARD_TEST_BLOCK"`)
	r := &blockAdd{
		fake: git.Exec{Path: fake, Timeout: -1, Env: []string{"SHARD_TEST_READY=" + ready, "SHARD_TEST_BLOCK=" + block}},
		ran:  make(chan error, 1),
	}
	h := startDeps(t, st, root, func(d *workspaces.Deps) {
		d.Git = git.New(r)
		d.Timeout = time.Hour // only the stop ends the command
	})
	// Should the stop not kill the fake, killing it here lets the test
	// fail instead of hanging in the harness's cleanup. Until its Run
	// returned, the fake is not reaped, so pid is still its.
	var pid int
	gitEnded := false
	t.Cleanup(func() {
		if !gitEnded && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	h.send(&protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo, Label: "blocked"})
	pidText := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(ready)
		pidText <- string(b)
	}()
	select {
	case s := <-pidText:
		var err error
		if pid, err = strconv.Atoi(strings.TrimSpace(s)); err != nil {
			t.Fatalf("the fake git wrote %q", s)
		}
	case <-time.After(60 * time.Second): // a failure bound, not a wait
		t.Fatal("the create never ran git worktree add")
	}

	// StopFuture gives up after 10 s: a stop that waited for the git
	// would fail here.
	if err := h.sys.Root.StopFuture(h.ws).Wait(); err != nil {
		t.Fatalf("stop the actor: %v", err)
	}
	select {
	case err := <-r.ran:
		gitEnded = true
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the blocked git returned %v, want context.Canceled", err)
		}
	default:
		t.Fatal("the stop returned before the git it cancelled")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the fake git (pid %d) is still there: %v", pid, err)
	}
	if res := h.response("crash"); res.Success || res.Error == nil || res.Error.Code != protocol.CodeConflict ||
		!strings.Contains(res.Error.Message, "shutting down") {
		t.Fatalf("the cut-short create was answered %+v, want CONFLICT (shutting down)", res)
	}
	all, err := st.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: true})
	if err != nil || len(all) != 1 || all[0].State != protocol.WorkspaceStateCreating {
		t.Fatalf("records after the stop = %+v, %v; want one creating", all, err)
	}

	startDeps(t, st, root, nil)
	realRoot, _ := filepath.EvalSymlinks(root)
	checkSettled(t, st, repo, realRoot)
}
