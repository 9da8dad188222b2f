package git

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/testhost"
)

// fakeGit writes an executable standing in for git whose behaviour is
// chosen by its first argument after Exec's fixed "-c" prefix.
func fakeGit(t *testing.T) string {
	t.Helper()
	testhost.Tool(t, "sh") // the fake git is a shell script
	p := filepath.Join(t.TempDir(), "git")
	script := `#!/bin/sh
shift 6
case "$1" in
sleep) exec sleep 30 ;;
env) env ;;
args) printf '%s\n' "$@" ;;
stdin) cat ;;
fail) echo "fatal: oops" >&2; exit 3 ;;
big) head -c 100000 /dev/zero ;;
bigerr) head -c 100000 /dev/zero | tr '\0' e >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExecTimeout(t *testing.T) {
	x := &Exec{Path: fakeGit(t), Timeout: 50 * time.Millisecond}
	start := time.Now()
	_, err := x.Run(t.Context(), Invocation{Dir: t.TempDir(), Args: []string{"sleep"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want DeadlineExceeded", err)
	}
	var ge *Error
	if !errors.As(err, &ge) || ge.ExitCode != -1 || ge.Args[0] != "sleep" {
		t.Errorf("Error = %+v, want exit -1 and the args", ge)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timed-out git took %v to return", d)
	}

	// The caller's context bounds it too, whatever Timeout says.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (&Exec{Path: x.Path}).Run(ctx, Invocation{Dir: t.TempDir(), Args: []string{"sleep"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v, want Canceled", err)
	}
}

// blockingRunner blocks every call until its context ends, like a git
// waiting on a lock or a network.
type blockingRunner struct{}

func (blockingRunner) Run(ctx context.Context, inv Invocation) ([]byte, error) {
	<-ctx.Done()
	return nil, &Error{Args: inv.Args, ExitCode: -1, Err: ctx.Err()}
}

func TestClientSurfacesTimeouts(t *testing.T) {
	c := New(blockingRunner{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Inspect(ctx, t.TempDir())
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotRepository) {
		t.Errorf("Inspect on a hung git: %v, want DeadlineExceeded and not a refusal", err)
	}
	repo := Repo{Root: t.TempDir(), CommonDir: t.TempDir()}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	if _, err := c.ProveMerged(ctx2, repo, "b", "main"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBranchNotFound) {
		t.Errorf("ProveMerged on a hung git: %v, want DeadlineExceeded and not a refusal", err)
	}
	ctx3, cancel3 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel3()
	if _, err := c.CheckRetire(ctx3, repo, Recorded{Path: t.TempDir(), Branch: "b"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CheckRetire on a hung git: %v, want DeadlineExceeded", err)
	}
}

func TestExecEnvironment(t *testing.T) {
	t.Setenv("GIT_DIR", "/somewhere/else")
	t.Setenv("GIT_WORK_TREE", "/else")
	t.Setenv("LANG", "de_DE.UTF-8")
	t.Setenv("GIT_EDITOR", "vim")
	x := &Exec{Path: fakeGit(t), Env: []string{"SHARD_EXTRA=1"}}
	env := func(readOnly bool) map[string]string {
		out, err := x.Run(t.Context(), Invocation{Dir: t.TempDir(), Args: []string{"env"}, ReadOnly: readOnly})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				m[k] = v
			}
		}
		return m
	}
	m := env(false)
	want := map[string]string{"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANG": "C", "GIT_EDITOR": "true", "GIT_PAGER": "cat", "SHARD_EXTRA": "1"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("env %s = %q, want %q", k, m[k], v)
		}
	}
	for _, k := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_OPTIONAL_LOCKS"} {
		if v, ok := m[k]; ok {
			t.Errorf("env %s = %q leaked into git", k, v)
		}
	}
	if env(true)["GIT_OPTIONAL_LOCKS"] != "0" {
		t.Error("read-only call without GIT_OPTIONAL_LOCKS=0")
	}

	out, err := x.Run(t.Context(), Invocation{Dir: t.TempDir(), Args: []string{"args", "a b", "$(touch x)", ";"}})
	if err != nil || string(out) != "args\na b\n$(touch x)\n;\n" {
		t.Errorf("args passed as %q, %v; want verbatim, no shell", out, err)
	}
	if out, err := x.Run(t.Context(), Invocation{Dir: t.TempDir(), Args: []string{"stdin"}}); err != nil || len(out) != 0 {
		t.Errorf("default stdin gave %q, %v; want /dev/null", out, err)
	}
	if out, err := x.Run(t.Context(), Invocation{Dir: t.TempDir(), Args: []string{"stdin"}, Stdin: []byte("patch\n")}); err != nil || string(out) != "patch\n" {
		t.Errorf("stdin round trip = %q, %v", out, err)
	}
}

func TestExecErrors(t *testing.T) {
	x := &Exec{Path: fakeGit(t), MaxOutput: 1000}
	dir := t.TempDir()
	_, err := x.Run(t.Context(), Invocation{Dir: dir, Args: []string{"fail", "https://user:hunter2@example.com/r.git"}})
	var ge *Error
	if !errors.As(err, &ge) || ge.ExitCode != 3 || strings.TrimSpace(ge.Stderr) != "fatal: oops" {
		t.Fatalf("Run = %+v, want exit 3 with stderr", err)
	}
	if strings.Contains(err.Error(), "hunter2") || ge.Args[1] != "https://***@example.com/r.git" {
		t.Errorf("credentials not redacted: %q / %q", err.Error(), ge.Args)
	}
	if _, err := x.Run(t.Context(), Invocation{Dir: dir, Args: []string{"big"}}); !errors.Is(err, ErrOutputTooLarge) {
		t.Errorf("big output: %v, want ErrOutputTooLarge", err)
	}
	_, err = x.Run(t.Context(), Invocation{Dir: dir, Args: []string{"bigerr"}})
	if !errors.As(err, &ge) || ge.ExitCode != 1 || len(ge.Stderr) != maxStderr {
		t.Errorf("big stderr: exit %d, %d bytes kept, want exit 1 and %d", ge.ExitCode, len(ge.Stderr), maxStderr)
	}
	_, err = (&Exec{Path: filepath.Join(dir, "no-git")}).Run(t.Context(), Invocation{Dir: dir, Args: []string{"status"}})
	if !errors.As(err, &ge) || ge.ExitCode != -1 || !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing binary: %v", err)
	}
}

func TestLocks(t *testing.T) {
	var l Locks
	ctx := t.Context()
	unlockA, err := l.Lock(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	// Another repository is independent.
	unlockB, err := l.Lock(ctx, "/b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()

	// A second holder of /a waits; a waiter whose context ends gives up.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "/a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held key: %v, want DeadlineExceeded", err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := l.Lock(ctx, "/a")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	unlockA()
	unlockA() // idempotent
	u := <-got
	u()

	// Many goroutines: one at a time, and the map is emptied afterwards.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		inside int
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, err := l.Lock(ctx, "/c")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			if inside != 1 {
				t.Errorf("%d holders at once", inside)
			}
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			inside--
			mu.Unlock()
			u()
		}()
	}
	wg.Wait()
	l.mu.Lock()
	n := len(l.m)
	l.mu.Unlock()
	if n != 0 {
		t.Errorf("%d lock entries left after all unlocked", n)
	}
}
