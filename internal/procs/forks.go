package procs

import (
	"os/exec"
	"sync"

	"github.com/shard-dev/shard/internal/sparep"
)

// ForkGate starts one process at a time, with a spare P while starts come
// in bursts; the daemon has one, which every process it starts goes
// through (runtimes, git, the setup command).
//
// Go forks with vfork from a raw system call, so the goroutine keeps its P
// (its share of GOMAXPROCS) until the child has exec'd (golang/go#11155),
// which under load takes milliseconds: a job starting 16 runtimes at once
// on a 2-core machine had both of the daemon's Ps parked in vfork, and a
// group commit whose fdatasync had returned waited for a P while creates
// waited for their ack (the jobs benchmark, BENCHMARKS.md). Through the
// gate at most one P is parked so, and every start touches Spare, whose
// lender keeps GOMAXPROCS one higher during the burst (package sparep).
// The zero value starts one at a time without a spare P; a nil gate starts
// at once.
type ForkGate struct {
	mu sync.Mutex
	// Spare is the burst of starts (nil: no spare P).
	Spare *sparep.Burst
}

// Start is cmd.Start, one at a time through g, with the spare P.
func (g *ForkGate) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.Spare.Touch()
	return cmd.Start()
}

// Run is cmd.Run with the start through g: Start, then Wait.
func (g *ForkGate) Run(cmd *exec.Cmd) error {
	if err := g.Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}
