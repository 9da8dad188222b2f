package main

import (
	"runtime"
	"strconv"
)

// daemonProcs is the GOMAXPROCS the daemon runs with: one more than the
// runtime's default (the CPUs it may use), unless the GOMAXPROCS
// environment variable set it. Go starts a process with vfork from a raw
// system call, which keeps the forking goroutine's P until the child has
// exec'd (golang/go#11155; procs.ForkGate lets one such start run at a
// time): the spare P is that one, so the daemon's acks, commits and
// fan-out keep every CPU meanwhile. An explicit setting also ends Go's
// tracking of a changed CPU limit (cgroup), which the extra P would
// otherwise be reapplied over; the daemon reads it once, at start.
func daemonProcs(env string, defaultProcs int) int {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return n
	}
	return defaultProcs + 1
}

// setDaemonProcs applies daemonProcs.
func setDaemonProcs(env string) {
	runtime.GOMAXPROCS(daemonProcs(env, runtime.GOMAXPROCS(0)))
}
