package procs

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestHasEnv(t *testing.T) {
	env := []byte("A=1\x00SHARD_HOME=/h\x00SHARD_AGENT_ID=agent-1\x00")
	for _, c := range []struct {
		entries []string
		want    bool
	}{
		{[]string{"SHARD_HOME=/h"}, true},
		{[]string{"SHARD_HOME=/h", "SHARD_AGENT_ID="}, true},
		{[]string{"SHARD_HOME=/h", "SHARD_AGENT_ID=agent-1"}, true},
		{[]string{"SHARD_HOME=/h", "SHARD_AGENT_ID=agent-2"}, false},
		{[]string{"SHARD_HOME=/"}, false}, // exact unless it ends in "="
		{[]string{"B="}, false},
	} {
		if got := hasEnv(env, c.entries); got != c.want {
			t.Errorf("hasEnv(%q) = %v, want %v", c.entries, got, c.want)
		}
	}
}

// TestKillWithEnv kills the processes carrying a tag, in whatever session
// they run, and no other.
func TestKillWithEnv(t *testing.T) {
	tag := "PROCS_TEST_TAG=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	tagged := start(tag)
	// Its tag comes after 100 KiB of environment: the sweep reads past
	// its first buffer.
	big := start("PROCS_TEST_PAD="+strings.Repeat("x", 100<<10), tag+"-big")
	other := start("PROCS_TEST_TAG=other")
	if n := KillWithEnv(tag); n != 1 {
		t.Fatalf("KillWithEnv signalled %d processes, want 1", n)
	}
	if n := KillWithEnv(tag + "-big"); n != 1 {
		t.Fatalf("KillWithEnv signalled %d processes with a large environment, want 1", n)
	}
	for _, cmd := range []*exec.Cmd{tagged, big} {
		if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("tagged process: %v, want killed", err)
		}
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("untagged process was hit: %v", err)
	}
	if n := KillWithEnv(); n != 0 {
		t.Fatalf("KillWithEnv() with no entries signalled %d processes", n)
	}
}

// TestSweeperServesConcurrentCallers: callers sweeping at the same time,
// each for its own tag, each get their own process killed and counted,
// and a process none of them names survives.
func TestSweeperServesConcurrentCallers(t *testing.T) {
	base := "PROCS_SWEEP_TAG=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	start := func(env string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), env)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	const n = 8
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = start(base + "-" + strconv.Itoa(i))
	}
	other := start(base + "-other")
	var s Sweeper
	counts := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { counts[i] = s.KillWithEnv(base + "-" + strconv.Itoa(i)) })
	}
	wg.Wait()
	for i, cmd := range cmds {
		if counts[i] != 1 {
			t.Errorf("caller %d: %d killed, want 1", i, counts[i])
		}
		if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("process of caller %d: %v, want killed", i, err)
		}
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process no caller named was hit: %v", err)
	}
	if got := s.KillWithEnv(); got != 0 {
		t.Fatalf("KillWithEnv() with no entries signalled %d processes", got)
	}
}

// TestSweeperSharesOneScan: callers that ask while a scan runs are all
// served by the next scan, one pass for all of them.
func TestSweeperSharesOneScan(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var scans [][][]string
	s := Sweeper{scan: func(sets [][]string) []int {
		mu.Lock()
		scans = append(scans, sets)
		first := len(scans) == 1
		mu.Unlock()
		if first {
			started <- struct{}{}
			<-release // the first scan runs while the others queue
		}
		return make([]int, len(sets))
	}}
	var wg sync.WaitGroup
	wg.Go(func() { s.KillWithEnv("A=1") })
	<-started
	const n = 5
	for i := range n {
		wg.Go(func() { s.KillWithEnv("B=" + strconv.Itoa(i)) })
	}
	// Every later caller is queued before the first scan ends.
	for {
		s.mu.Lock()
		queued := len(s.pending)
		s.mu.Unlock()
		if queued == n {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if len(scans) != 2 || len(scans[0]) != 1 || len(scans[1]) != n {
		t.Fatalf("scans served %v sets, want [1 %d]", func() []int {
			var out []int
			for _, sc := range scans {
				out = append(out, len(sc))
			}
			return out
		}(), n)
	}
}

// TestWaitExitWaitsForTheProcess: WaitExit returns only once the process
// has exited, and leaves it for Wait to reap with its real status.
func TestWaitExitWaitsForTheProcess(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read line; exit 7")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- WaitExit(cmd.Process.Pid) }()
	select {
	case <-done:
		t.Fatal("WaitExit returned while the process was still running")
	case <-time.After(200 * time.Millisecond):
	}
	stdin.Close() // the shell reads EOF and exits 7
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("WaitExit reported no pidfd support")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitExit did not return after the process exited")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("Wait after WaitExit: %v", err)
	}
}
