//go:build linux

// Package shardtest starts real shardd subprocesses for the suites that
// drive the built binaries: e2e, faults and the bench driver. It builds
// shardd and shardctl once, makes short private homes (unix socket paths
// are limited to 108 bytes), runs shardd with flags and a SHARD_*-free
// environment, waits until its socket answers hello (and, when asked, until
// daemon.json names the web listener), stops it (SIGTERM, then a bounded
// wait, then SIGKILL), kills whatever is left with its SHARD_HOME and reads
// its logs.
//
// bench is a program, not a test, so nothing here needs a *testing.T:
// every function returns an error, and the suites put their own t.Fatalf
// and t.Cleanup around it. Each Proc and Daemon is safe for concurrent use;
// none holds package-level state.
package shardtest
