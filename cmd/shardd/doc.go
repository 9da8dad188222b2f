// Command shardd is the Shard daemon: it hosts durable agents, runs each
// agent's runtime as a child process, and serves clients on a unix socket
// and a WebSocket. `shardd agent --headless` is the reference agent runtime
// the daemon spawns for each agent (its own executable, so one binary does
// both).
//
// This is the composition root: the only place that reads flags, the
// environment and the working directory.
package main
