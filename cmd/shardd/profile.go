package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// cpuProfileEnv names a file the daemon writes a CPU profile to, covering
// the whole run from startup to a clean shutdown (daemon.shutdown, SIGTERM
// or SIGINT). It is a hidden knob for benchmarks (go run ./bench --cpuprofile
// sets it), not a setting: no flag, no config key, and runtime children
// never see it. Unset or empty, nothing is profiled. The file is created or
// truncated owner-only (0600); a daemon that is killed leaves it empty.
const cpuProfileEnv = "SHARD_CPUPROFILE"

// heapProfileEnv names a file the daemon writes a heap profile to when a
// signal asks it to shut down, before anything is released (after a GC, so
// in-use figures are live memory): the other hidden knob, for finding what
// a long run keeps (the soak's -soak-heap). daemon.shutdown and SIGKILL
// write none.
const heapProfileEnv = "SHARD_HEAPPROFILE"

// writeHeapProfile writes the heap profile to path, owner-only; an empty
// path writes nothing.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("$%s: %w", heapProfileEnv, err)
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	return errors.Join(err, f.Chmod(0o600), f.Close())
}

// startCPUProfile starts CPU profiling into path; an empty path profiles
// nothing. stop ends the profile and flushes and closes the file; it must
// be called once.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", cpuProfileEnv, err)
	}
	// O_CREATE's mode applies only to a new file.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("$%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("$%s: start CPU profile: %w", cpuProfileEnv, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return errors.Join(f.Sync(), f.Close())
	}, nil
}
