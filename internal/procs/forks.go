package procs

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// ForkGate starts one process at a time, with a spare P while starts come
// in bursts; the daemon has one, which every process it starts goes
// through (runtimes, git, the setup command).
//
// Go forks with vfork from a raw system call, so the goroutine keeps its P
// (its share of GOMAXPROCS) until the child has exec'd (golang/go#11155),
// which under load takes milliseconds: a job starting 16 runtimes at once
// on a 2-core machine had both of the daemon's Ps parked in vfork, and a
// group commit whose fdatasync had returned waited 4–7 ms for a P while
// creates waited for their ack (bench jobs; BENCHMARKS.md). Through the
// gate at most one P is parked so, and the first start of a burst raises
// GOMAXPROCS by one, so that the Ps left to run goroutines stay as many as
// the CPUs (the parked P's thread sleeps in vfork). The spare P is taken
// back once no start came for spareFor: changing GOMAXPROCS stops the
// world, which per start cost more than it saved, and a spare P kept for
// good would let the daemon's threads preempt each other on the CPUs while
// it fans out. The zero value is ready; a nil gate starts at once.
type ForkGate struct {
	mu    sync.Mutex
	spare bool        // GOMAXPROCS is one above what it was
	base  int         // what it was
	idle  *time.Timer // runs putBack spareFor after the last start
	// hold replaces spareFor when > 0 (tests).
	hold time.Duration
}

// spareFor is how long the spare P outlives the last start: the starts of
// one burst (a job's runs, a drain's relaunches) come milliseconds apart.
const spareFor = 250 * time.Millisecond

// Start is cmd.Start, one at a time through g, with the spare P.
func (g *ForkGate) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.spare {
		g.base = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(g.base + 1)
		g.spare = true
	}
	err := cmd.Start()
	hold := spareFor
	if g.hold > 0 {
		hold = g.hold
	}
	if g.idle == nil {
		g.idle = time.AfterFunc(hold, g.putBack)
	} else {
		g.idle.Reset(hold)
	}
	return err
}

// Run is cmd.Run with the start through g: Start, then Wait.
func (g *ForkGate) Run(cmd *exec.Cmd) error {
	if err := g.Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// putBack takes the spare P back: to the runtime's default (which follows
// the CPU limit) unless the GOMAXPROCS environment variable set it, then
// to what it was. It holds the gate, so no vfork is in flight meanwhile.
func (g *ForkGate) putBack() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.spare {
		return
	}
	if os.Getenv("GOMAXPROCS") != "" {
		runtime.GOMAXPROCS(g.base)
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
	g.spare = false
}
