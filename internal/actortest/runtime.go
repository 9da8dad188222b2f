package actortest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/buildlock"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/testhost"
)

// Main is a TestMain body for packages whose tests run the real runtime:
// it builds ./cmd/shardd once into a temporary directory, stores its path
// in *bin for the tests, runs the build and them under a home of their own
// (testhost.IsolateHome) and, when they passed, checks that no
// goroutine outlives them (the actors, runtime actors and their process
// watchers all stopped by the tests' cleanups). It returns the exit code.
func Main(m *testing.M, bin *string) int {
	// The home first: the go command that builds shardd reads the home
	// too (git's ~/.gitconfig for the VCS stamp, go env, telemetry).
	removeHome, err := testhost.IsolateHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actortest:", err)
		return 1
	}
	defer removeHome()
	dir, err := os.MkdirTemp("", "actortest-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "actortest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "shardd")
	build := exec.Command("go", "build", "-o", *bin, "github.com/shard-dev/shard/cmd/shardd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	unlock := buildlock.Lock() // one build at a time across test processes
	err = build.Run()
	unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actortest: build shardd:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(LeakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// LeakOptions are the goroutines a finished actor test may leave behind.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// protoactor's dead-letter throttle parks a goroutine for one
		// interval (1 s) after a burst of dead letters (a stopped runtime
		// actor's late messages); it ends by itself.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	}
}

// RuntimeConfig runs bin as `shardd agent --headless` with a home of its
// own under t.TempDir(): the offline, scripted sim provider, sessions
// and logs in that home. The environment is the test's minus any SHARD_*
// setting, so the runtime sees only what is set here and what the agent
// adds. Timers are the caller's to set.
func RuntimeConfig(t testing.TB, bin string) agent.RuntimeConfig {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARD_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"SHARD_HOME="+home,
		"SHARD_PROVIDER_NAME=sim",
		"SHARD_HEADLESS_TIMEOUT=5m",
	)
	return agent.RuntimeConfig{
		Path:           bin,
		Args:           []string{"agent", "--headless"},
		Env:            env,
		SessionsDir:    filepath.Join(home, "sessions"),
		LogDir:         filepath.Join(home, "logs"),
		HeadlessPolicy: "deny",
	}
}

// RuntimePIDs returns the live processes serving agentID, found by the
// SHARD_AGENT_ID the agent puts in their environment (zombies count as
// gone).
func RuntimePIDs(t testing.TB, agentID string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	needle := []byte("SHARD_AGENT_ID=" + agentID + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, needle) || !Alive(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// Alive reports whether pid is a process that has not exited (a zombie
// has).
func Alive(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && !st.Exited()
}

// Ignores reports whether process pid ignores sig (its SigIgn mask in
// /proc/<pid>/status): how a test sees that a runtime reached `sim: hang`.
func Ignores(pid int, sig syscall.Signal) bool {
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// Eventually polls cond, a state of the outside world that sends no
// signal (a process's state in /proc), until it holds; it fails the test
// after Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", Timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
