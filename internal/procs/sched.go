package procs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// schedPasses bounds SchedIdle's passes over the threads of a process. A
// pass moves the threads the last one could not see; a freshly started Go
// runtime settles in two or three.
const schedPasses = 8

// SchedIdle moves every thread of process pid to the SCHED_IDLE policy,
// keeping its niceness, and returns once all of them are there: the
// threads it starts later, and the processes those start, inherit it.
//
// Why not niceness alone: a niced process still runs out its slice when
// the daemon's thread wakes up on a busy CPU, and every hop of a create's
// ack (reader, actor, commit, writer) waits for that; a normal thread that
// wakes up preempts a SCHED_IDLE one at once (the kernel's wakeup
// preemption checks the policy first). Idle work still runs whenever
// nothing else wants the CPU, so an idle machine loses nothing.
//
// Linux has no process-group form of sched_setscheduler, so the threads
// are read from /proc/<pid>/task. A thread that one not yet moved starts
// between the listing and the move is missed by that pass and found by the
// next; a pass that finds every thread idle already proves they all are
// (any thread started since came from an idle one). Moving a thread to
// SCHED_IDLE needs no privilege for a process of the same user. A process
// that has exited is not an error.
func SchedIdle(pid int) error {
	return settleThreads(pid, "SCHED_IDLE", func(tid int) (bool, error) {
		policy, err := schedPolicy(tid)
		return policy == unix.SCHED_IDLE, err
	}, setSchedIdle)
}

// Renice sets the niceness of every thread of the process group pgid led
// by its process pgid (a runtime right after its start, before it started
// any process of its own) and returns once all of the leader's threads
// carry it: the threads and processes started later inherit it.
//
// setpriority(PRIO_PGRP) reaches every thread of the group at once, except
// a thread that was being created during the call: it copied the old
// niceness and joined its process after the call had gone by (a freshly
// started Go runtime creates its threads right then; a subagent runtime
// was once found with one thread at nice 0). So the leader's threads are
// read from /proc/<pgid>/task afterwards, and any still at another
// niceness is set on its own, in passes, as SchedIdle does.
func Renice(pgid, nice int) error {
	if err := syscall.Setpriority(syscall.PRIO_PGRP, pgid, nice); err != nil {
		return fmt.Errorf("procs: setpriority of group %d: %w", pgid, err)
	}
	return settleThreads(pgid, "niceness", func(tid int) (bool, error) {
		n, err := threadNice(tid)
		return n == nice, err
	}, func(tid int) error { return syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice) })
}

// settleThreads applies fix to every thread of pid that ok says lacks
// what (a policy, a niceness), in passes, until a pass finds every thread
// has it: a thread started between the listing and the fix is missed by
// that pass and found by the next, and a pass that fixes nothing proves
// them all (any thread started since came from a fixed one). A thread that
// ended, or a process that exited, is not an error.
func settleThreads(pid int, what string, ok func(tid int) (bool, error), fix func(tid int) error) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	for range schedPasses {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil // exited
		}
		if err != nil {
			return fmt.Errorf("procs: threads of %d: %w", pid, err)
		}
		fixed := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			done, err := ok(tid)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread ended
			}
			if err != nil {
				return fmt.Errorf("procs: %s of thread %d of %d: %w", what, tid, pid, err)
			}
			if done {
				continue
			}
			if err := fix(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("procs: %s for thread %d of %d: %w", what, tid, pid, err)
			}
			fixed++
		}
		if fixed == 0 {
			return nil
		}
	}
	return fmt.Errorf("procs: threads of %d kept appearing after %d passes", pid, schedPasses)
}

// threadNice is thread tid's niceness (the raw getpriority answers
// 20 − nice, so that it is never negative).
func threadNice(tid int) (int, error) {
	r, _, errno := unix.RawSyscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, uintptr(tid), 0)
	if errno != 0 {
		return 0, errno
	}
	return 20 - int(r), nil
}

// schedPolicy is thread tid's scheduling policy, without the
// SCHED_RESET_ON_FORK flag.
func schedPolicy(tid int) (int, error) {
	r, _, errno := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r) &^ unix.SCHED_RESET_ON_FORK, nil
}

// setSchedIdle moves thread tid to SCHED_IDLE. sched_setscheduler keeps
// the thread's niceness (sched_setattr would set the one it is given, and
// lowering it needs a privilege).
func setSchedIdle(tid int) error {
	var param struct{ priority int32 } // struct sched_param; 0 for SCHED_IDLE
	_, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(tid), unix.SCHED_IDLE, uintptr(unsafe.Pointer(&param)))
	if errno != 0 {
		return errno
	}
	return nil
}

// RunQueueWait is the time the threads of process pid have spent runnable
// but waiting for a CPU, summed over its live threads
// (/proc/<pid>/task/<tid>/schedstat, the second field, in ns). It tells a
// process that was starved of the CPU (a SCHED_IDLE runtime while other
// work keeps every core busy) from one that is blocked or mute: only the
// starved one's wait grows while it makes no progress.
func RunQueueWait(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("procs: threads of %d: %w", pid, err)
	}
	var sum time.Duration
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, fmt.Errorf("procs: schedstat of thread %s of %d: %q", e.Name(), pid, b)
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procs: schedstat of thread %s of %d: %w", e.Name(), pid, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
