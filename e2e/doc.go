// Package e2e holds Shard's binary-level end-to-end tests.
//
// Unlike the in-process integration tests of package daemon, these tests
// build the real shardd and shardctl executables once (in TestMain) and drive
// them as a user would: shardd runs as a subprocess on a private, short
// SHARD_HOME, and shardctl and the Go client talk to it over its unix socket.
// They cover what only the assembled binaries can show: signal handling and
// exit statuses, that no runtime child outlives the daemon, the single-daemon
// lock on a home, flag and config handling at startup, the shardctl command
// line against a real daemon, and that logs never carry conversation text or
// WebSocket tickets.
//
// The package contains no non-test code. The tests need Linux: they find an
// agent's runtime processes by scanning /proc/*/environ for SHARD_AGENT_ID.
package e2e
