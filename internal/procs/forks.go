package procs

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
)

// ForkGate starts processes one at a time, each with a spare P. Go forks
// with vfork from a raw system call, so the forking goroutine keeps its P
// (its share of GOMAXPROCS) until the child has exec'd (golang/go#11155),
// which under load takes milliseconds. A job starting 16 runtimes at once
// on a 2-core machine had both of the daemon's Ps parked in vfork, and a
// group commit whose fdatasync had returned waited 4–7 ms for a P while
// creates waited for their ack (bench jobs; BENCHMARKS.md). Through the
// gate at most one P is parked so, and GOMAXPROCS is one higher while it
// is: the parked P's thread sleeps in vfork, so the CPUs stay as many as
// the runnable Ps. The zero value is ready; a nil gate starts at once.
type ForkGate struct {
	mu sync.Mutex
}

// Start is cmd.Start, one at a time through g and with one P more for its
// duration. GOMAXPROCS is put back afterwards: to the runtime's default
// (which follows the CPU limit) unless the GOMAXPROCS environment variable
// set it, then to that (a value set by a call to runtime.GOMAXPROCS is
// not kept; the daemon makes none).
func (g *ForkGate) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(n + 1)
	defer func() {
		if os.Getenv("GOMAXPROCS") != "" {
			runtime.GOMAXPROCS(n)
		} else {
			runtime.SetDefaultGOMAXPROCS()
		}
	}()
	return cmd.Start()
}
