package procs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shard-dev/shard/internal/procs/procstat"
)

// threadsHelperEnv makes the test binary a helper process (TestMain): it
// starts threadsHelperCount threads, prints "ready", and for every "more"
// read from stdin starts one more thread and prints its thread id.
const threadsHelperEnv = "PROCS_TEST_THREADS_HELPER"

const threadsHelperCount = 6

func TestMain(m *testing.M) {
	if os.Getenv(threadsHelperEnv) != "" {
		threadsHelper()
		return
	}
	os.Exit(m.Run())
}

// threadsHelper never returns: the test kills it.
func threadsHelper() {
	lockedThread := func() int {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: this goroutine owns its thread
			tid <- unix.Gettid()
			select {}
		}()
		return <-tid
	}
	for range threadsHelperCount {
		lockedThread()
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println(lockedThread())
	}
	select {}
}

// threadSched is the policy (field 41) and niceness (field 19) in
// /proc/<pid>/task/<tid>/stat.
func threadSched(t *testing.T, pid, tid int) (policy, nice int) {
	t.Helper()
	st, err := procstat.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	return st.Policy, st.Nice
}

func tids(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestSchedIdleMovesEveryThread: Renice puts every thread of a real
// multi-threaded process at the niceness; SchedIdle then moves every one
// to SCHED_IDLE with its niceness unchanged; a thread the process starts
// afterwards inherits both, and the caller's own are untouched.
func TestSchedIdleMovesEveryThread(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), threadsHelperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("helper: %q, %v", out.Text(), out.Err())
	}
	pid := cmd.Process.Pid
	own, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	nice := min(19, 20-own+3) // the raw syscall answers 20 - nice
	// Every thread (the helper leads a group of its own), the ones its Go
	// runtime was starting during the call included.
	if err := Renice(pid, nice); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids(t, pid) {
		if _, n := threadSched(t, pid, tid); n != nice {
			t.Fatalf("after Renice thread %d is at nice %d, want %d", tid, n, nice)
		}
	}
	if n, _ := threadSched(t, os.Getpid(), unix.Gettid()); n == nice && nice != 20-own {
		t.Fatal("Renice changed the caller's own niceness")
	}
	before := tids(t, pid)
	if len(before) < threadsHelperCount {
		t.Fatalf("helper has %d threads, want at least %d", len(before), threadsHelperCount)
	}
	for _, tid := range before {
		if p, _ := threadSched(t, pid, tid); p == unix.SCHED_IDLE {
			t.Fatalf("thread %d is SCHED_IDLE before SchedIdle", tid)
		}
	}

	if err := SchedIdle(pid); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids(t, pid) {
		if p, n := threadSched(t, pid, tid); p != unix.SCHED_IDLE || n != nice {
			t.Errorf("thread %d: policy %d nice %d, want SCHED_IDLE (%d) at nice %d", tid, p, n, unix.SCHED_IDLE, nice)
		}
	}
	if _, err := fmt.Fprintln(stdin, "more"); err != nil {
		t.Fatal(err)
	}
	if !out.Scan() {
		t.Fatalf("helper: %v", out.Err())
	}
	tid, err := strconv.Atoi(out.Text())
	if err != nil {
		t.Fatal(err)
	}
	if p, n := threadSched(t, pid, tid); p != unix.SCHED_IDLE || n != nice {
		t.Errorf("a thread started afterwards has policy %d nice %d, want SCHED_IDLE at nice %d", p, n, nice)
	}
	if p, _ := threadSched(t, os.Getpid(), unix.Gettid()); p == unix.SCHED_IDLE {
		t.Error("the caller's own thread became SCHED_IDLE")
	}
}

// TestSchedIdleOfAnExitedProcess: a process that is gone is not an error
// (a runtime may exit before the daemon gets to it).
func TestSchedIdleOfAnExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := SchedIdle(cmd.Process.Pid); err != nil {
		t.Fatalf("SchedIdle of an exited process: %v", err)
	}
}

// RunQueueWait reads a live process's wait for a CPU and refuses one that
// is gone; the wait only grows (a Go process's threads do not end). That
// a starved process's wait grows is shown with a real one in
// agent.TestActorLevelStarvedStartGetsAnotherBound.
func TestRunQueueWait(t *testing.T) {
	first, err := RunQueueWait(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Yield for a while, so that the second read comes later.
	for range 1000 {
		runtime.Gosched()
	}
	second, err := RunQueueWait(os.Getpid())
	if err != nil || second < first {
		t.Fatalf("second read = %v, %v; want ≥ %v", second, err, first)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := RunQueueWait(cmd.Process.Pid); err == nil {
		t.Fatal("RunQueueWait of a reaped process: no error")
	}
}
