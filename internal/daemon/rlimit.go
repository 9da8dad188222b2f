package daemon

import (
	"log/slog"
	"syscall"
)

// fdsPerConnection is a generous count of the descriptors one client
// connection costs (its socket; a WebSocket's HTTP state), used to warn
// when gateway.max_connections cannot be reached before the process runs
// out of descriptors.
const fdsPerConnection = 2

// fdReserve is what the daemon keeps for everything but connections:
// shard.db, logs, runtimes' pipes, git.
const fdReserve = 256

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit and logs
// both, so that a burst of clients meets gateway.max_connections (a clean
// refusal) long before EMFILE. Go's runtime already does the
// same at startup since Go 1.19 (and restores the old soft limit for the
// processes it starts); doing it here too makes the daemon's own limit
// explicit and logged, whatever started it. A failure is logged, not
// fatal: the gateway rides out EMFILE anyway.
func raiseFileLimit(log *slog.Logger, maxConns int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("read the file descriptor limit", "err", err)
		return
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("raise the file descriptor limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	log.Info("file descriptor limit", "soft", lim.Cur, "hard", lim.Max)
	if need := uint64(maxConns)*fdsPerConnection + fdReserve; lim.Cur < need {
		log.Warn("gateway.max_connections may not be reached before the file descriptor limit",
			"max_connections", maxConns, "soft_limit", lim.Cur, "needs", need)
	}
}
