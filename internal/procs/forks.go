package procs

import (
	"os/exec"
	"sync"
)

// ForkGate starts one process at a time; the daemon has one, which every
// process it starts goes through (runtimes, git, the setup command). Go
// forks with vfork from a raw system call, so the goroutine keeps its P
// (its share of GOMAXPROCS) until the child has exec'd (golang/go#11155),
// which under load takes milliseconds: a job starting 16 runtimes at once
// on a 2-core machine had both of the daemon's Ps parked in vfork, and a
// group commit whose fdatasync had returned waited 4–7 ms for a P while
// creates waited for their ack (bench jobs; BENCHMARKS.md). Through the
// gate at most one P is held so; the child's exec takes no longer for it,
// and the processes start in the order they came. The zero value is
// ready; a nil gate starts at once.
type ForkGate struct {
	mu sync.Mutex
}

// Start is cmd.Start, one at a time through g.
func (g *ForkGate) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return cmd.Start()
}
