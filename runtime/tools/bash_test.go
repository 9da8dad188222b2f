package tools

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/procs/procstat"
)

// gone reports whether process pid has ended (absent, or a zombie waiting
// for its new parent to reap it), waiting up to two seconds for it.
func gone(t *testing.T, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if st, err := procstat.Read(pid); err != nil || st.Exited() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidIn reads the pid a command wrote to file name in env.Cwd.
func pidIn(t *testing.T, env Env, name string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Cwd, name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestBash(t *testing.T) {
	t.Parallel()
	env := setup(t, map[string]string{"f.txt": "content\n"})

	t.Run("success", func(t *testing.T) {
		res := call(t, env, "bash", map[string]any{"command": "cat f.txt; pwd; cat"})
		if got := wantText(t, res); got != "content\n"+env.Cwd+"\n" {
			t.Errorf("text = %q", got)
		}
		if res.ExitCode == nil || *res.ExitCode != 0 || res.Render != nil {
			t.Errorf("result = %+v", res)
		}
	})
	t.Run("exit code and stderr", func(t *testing.T) {
		res := call(t, env, "bash", map[string]any{"command": "echo out; echo err >&2; exit 3"})
		if !res.IsError || res.Content.Kind != ContentText || res.Content.Text != "out\nerr\n" {
			t.Errorf("result = %+v", res)
		}
		if res.ExitCode == nil || *res.ExitCode != 3 {
			t.Errorf("exit code = %v", res.ExitCode)
		}
	})
	t.Run("killed by a signal", func(t *testing.T) {
		res := call(t, env, "bash", map[string]any{"command": "kill -9 $$"})
		if !res.IsError || res.ExitCode == nil || *res.ExitCode != 137 {
			t.Errorf("result = %+v", res)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		env := env
		env.MaxOutput = 1000
		res := call(t, env, "bash", map[string]any{"command": "seq 1 100000"})
		got := wantText(t, res)
		if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "99999\n100000\n") ||
			!strings.Contains(got, "\n[… truncated ") || len(got) > 1100 {
			t.Errorf("text = %q", got)
		}
	})
	t.Run("environment", func(t *testing.T) {
		env := env
		env.Environ = []string{"PATH=" + os.Getenv("PATH"), "SHARD_TOOLS_TEST=yes"}
		res := call(t, env, "bash", map[string]any{"command": "echo $SHARD_TOOLS_TEST ${HOME:-unset}"})
		if got := wantText(t, res); got != "yes unset\n" {
			t.Errorf("text = %q", got)
		}
	})
	t.Run("missing cwd", func(t *testing.T) {
		msg := wantError(t, call(t, Env{Cwd: filepath.Join(env.Cwd, "nope")}, "bash", map[string]any{"command": "true"}))
		if !strings.Contains(msg, "bash:") {
			t.Errorf("message = %q", msg)
		}
	})
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	start := time.Now()
	res := call(t, env, "bash", map[string]any{"command": "sleep 60 & echo $! > bg.pid; echo started; wait", "timeout_ms": 300})
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("took %v", elapsed)
	}
	if !res.IsError || res.Content.Text != "started\n[command timed out after 300ms; its process group was killed]" {
		t.Errorf("result = %+v", res)
	}
	if res.ExitCode == nil || *res.ExitCode != 128+15 {
		t.Errorf("exit code = %v, want 143 (SIGTERM)", res.ExitCode)
	}
	if pid := pidIn(t, env, "bg.pid"); !gone(t, pid) {
		t.Errorf("background sleep %d survived the timeout", pid)
	}
}

func TestBashTimeoutEscalates(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	env.BashTimeout = 200 * time.Millisecond // from Env, not the arguments
	start := time.Now()
	res := call(t, env, "bash", map[string]any{"command": "trap '' TERM; sleep 60 & echo $! > bg.pid; wait"})
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("took %v", elapsed)
	}
	if !res.IsError || !strings.Contains(res.Content.Text, "timed out after 200ms") {
		t.Errorf("result = %+v", res)
	}
	if res.ExitCode == nil || *res.ExitCode != 128+9 {
		t.Errorf("exit code = %v, want 137 (SIGKILL after the grace)", res.ExitCode)
	}
	if pid := pidIn(t, env, "bg.pid"); !gone(t, pid) {
		t.Errorf("background sleep %d ignoring SIGTERM survived", pid)
	}
}

func TestBashAbort(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	tool, _ := Lookup("bash")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		done <- tool.Run(ctx, env, map[string]any{"command": "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; wait"})
	}()
	// Wait for the command to be running, then abort.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Stat(filepath.Join(env.Cwd, "bg.pid")); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
	}
	start := time.Now()
	cancel()
	select {
	case res := <-done:
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("abort took %v", elapsed)
		}
		if !res.IsError || !strings.Contains(res.Content.Text, "[command aborted; its process group was killed]") {
			t.Errorf("result = %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, f := range []string{"sh.pid", "bg.pid"} {
		if pid := pidIn(t, env, f); !gone(t, pid) {
			t.Errorf("%s %d survived the abort", f, pid)
		}
	}

	// A context cancelled before the call runs nothing.
	res := tool.Run(ctx, env, map[string]any{"command": "touch ran"})
	wantError(t, res)
	if _, err := os.Stat(filepath.Join(env.Cwd, "ran")); err == nil {
		t.Error("command ran with a cancelled context")
	}
}

func TestBashEndsLeftovers(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	start := time.Now()
	res := call(t, env, "bash", map[string]any{"command": "sleep 60 & echo $! > bg.pid; echo done"})
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("took %v: waited for the background sleep", elapsed)
	}
	if got := wantText(t, res); got != "done\n" || *res.ExitCode != 0 {
		t.Errorf("result = %+v", res)
	}
	if pid := pidIn(t, env, "bg.pid"); !gone(t, pid) {
		t.Errorf("background sleep %d outlived the call", pid)
	}
}

func TestBashAsk(t *testing.T) {
	env := setup(t, nil)
	tool, _ := Lookup("bash")
	prompt, details := tool.Ask(env, map[string]any{"command": "go test ./..."})
	if prompt != "Allow running go test ./...?" {
		t.Errorf("prompt = %q", prompt)
	}
	if len(details) != 2 || details[0].Value != "go test ./..." || details[0].Format != "command" ||
		details[1].Value != env.Cwd || details[1].Format != "path" {
		t.Errorf("details = %+v", details)
	}
	prompt, details = tool.Ask(env, map[string]any{"command": "set -e\nmake\nmake test"})
	if prompt != "Allow running set -e …?" || details[0].Value != "set -e\nmake\nmake test" {
		t.Errorf("multi-line prompt = %q, details = %+v", prompt, details)
	}
	if tool.Preview(env, map[string]any{"command": "true"}) != nil {
		t.Error("bash has a preview")
	}
}
