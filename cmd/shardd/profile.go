package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file the daemon writes a CPU profile to, covering
// the whole run from startup to a clean shutdown (daemon.shutdown, SIGTERM
// or SIGINT). It is a hidden knob for benchmarks (go run ./bench --cpuprofile
// sets it), not a setting: no flag, no config key, and runtime children
// never see it. Unset or empty, nothing is profiled. The file is created or
// truncated owner-only (0600); a daemon that is killed leaves it empty.
const cpuProfileEnv = "SHARD_CPUPROFILE"

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
