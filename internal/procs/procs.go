// Package procs reads what Linux says about a process, so that the daemon
// can recognise its own children across a restart: a pid alone may have
// been reused; a pid plus its start time may not.
package procs

import (
	"bytes"
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

// KillWithEnv sends SIGKILL to every process but the caller whose
// environment holds all of entries — each "NAME=value" exactly, or "NAME="
// for any value — and returns how many it signalled. It reaches what a
// process-group kill misses: a runtime's tool runs in a session (and group)
// of its own, and what the tool started outlives a runtime that dies, while
// every descendant of a runtime inherits its environment. Processes whose
// environment cannot be read (other users', zombies) are skipped. It looks
// again while it finds new ones (at most three passes), so a child forked
// during a pass is not missed.
func KillWithEnv(entries ...string) int {
	if len(entries) == 0 {
		return 0
	}
	self := os.Getpid()
	killed := map[int]bool{}
	for range 3 {
		dir, err := os.ReadDir("/proc")
		if err != nil {
			break
		}
		found := false
		for _, e := range dir {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self || killed[pid] {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !hasEnv(env, entries) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid], found = true, true
			}
		}
		if !found {
			break
		}
	}
	return len(killed)
}

// hasEnv reports whether the NUL-separated environment env holds every
// entry (see KillWithEnv).
func hasEnv(env []byte, entries []string) bool {
	for _, want := range entries {
		prefix := strings.HasSuffix(want, "=")
		found := false
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if prefix && bytes.HasPrefix(kv, []byte(want)) || !prefix && string(kv) == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
