package procs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
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
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	for range schedPasses {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil // exited
		}
		if err != nil {
			return fmt.Errorf("procs: threads of %d: %w", pid, err)
		}
		moved := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			policy, err := schedPolicy(tid)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread ended
			}
			if err != nil {
				return fmt.Errorf("procs: policy of thread %d of %d: %w", tid, pid, err)
			}
			if policy == unix.SCHED_IDLE {
				continue
			}
			if err := setSchedIdle(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("procs: SCHED_IDLE for thread %d of %d: %w", tid, pid, err)
			}
			moved++
		}
		if moved == 0 {
			return nil
		}
	}
	return fmt.Errorf("procs: threads of %d kept appearing after %d passes", pid, schedPasses)
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
