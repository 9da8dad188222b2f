// Command shardd is the Shard daemon: it hosts durable agents, runs each
// agent's runtime as a child process, and serves clients on a unix socket
// and a WebSocket. `shardd agent --headless` is the reference agent runtime
// the daemon spawns for each agent (its own executable, so one binary does
// both).
//
// This is the composition root: the only place that reads flags, the
// environment and the working directory.
//
// A hidden variable, SHARD_CPUPROFILE=<file>, makes the daemon write a CPU
// profile (runtime/pprof, file mode 0600) from startup until a clean
// shutdown; the benchmark driver's --cpuprofile uses it. It is off when
// unset and is not passed on to runtime children. SHARD_HEAPPROFILE=<file>
// likewise writes a heap profile when a signal asks the daemon to stop,
// before anything is released (the soak's -soak-heap uses it).
package main
