// Package procs reads what Linux says about a process, so that the daemon
// can recognise its own children across a restart: a pid alone may have
// been reused; a pid plus its start time may not.
package procs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// StartTime returns the start time of pid (field 22 of /proc/<pid>/stat,
// in clock ticks since boot).
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("procs: stat %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("procs: stat %d: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("procs: stat %d: malformed", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// KillGroupIfSame sends SIGKILL to process group pgid when its leader pid
// still runs with the recorded start time, or when the leader is gone but
// the group still has members (the runtime died, its tool subprocesses did
// not). It reports whether it signalled anything.
func KillGroupIfSame(pid, pgid int, start uint64) bool {
	if pgid <= 1 {
		return false
	}
	if st, err := StartTime(pid); err == nil {
		if st != start {
			return false // the pid was reused by an unrelated process
		}
		return syscall.Kill(-pgid, syscall.SIGKILL) == nil
	}
	// Leader gone: a group with the same id can only be ours if no new
	// process took the pid, which is what a missing /proc entry tells.
	return syscall.Kill(-pgid, syscall.SIGKILL) == nil
}
