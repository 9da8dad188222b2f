package procs

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/sparep"
	"github.com/shard-dev/shard/internal/testhost"
)

// TestForkGateStartsOneAtATime: a Start waits while the gate is held, and
// then starts its process; concurrent Starts all start theirs; a nil gate
// starts at once.
func TestForkGateStartsOneAtATime(t *testing.T) {
	true_ := testhost.Tool(t, "true")
	var g ForkGate
	g.mu.Lock()
	cmd := exec.Command(true_)
	done := make(chan error, 1)
	go func() { done <- g.Start(cmd) }()
	select {
	case err := <-done:
		t.Fatalf("Start returned (%v) while the gate was held", err)
	case <-time.After(50 * time.Millisecond): // absence has no signal to wait on
	}
	g.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			c := exec.Command(true_)
			if err := g.Start(c); err != nil {
				errs <- err
				return
			}
			errs <- c.Wait()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	var none *ForkGate
	c := exec.Command(true_)
	if err := none.Start(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := none.Start(exec.Command("/nonexistent/shard-test")); err == nil {
		t.Fatal("Start of a missing program: no error")
	}
	// Run waits for the exit and reports it, as cmd.Run does.
	if err := g.Run(exec.Command(true_)); err != nil {
		t.Fatalf("Run of true: %v", err)
	}
	var exit *exec.ExitError
	if err := g.Run(exec.Command("sh", "-c", "exit 3")); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Run of exit 3: %v, want exit status 3", err)
	}
	if err := g.Run(exec.Command("/nonexistent/shard-test")); err == nil {
		t.Fatal("Run of a missing program: no error")
	}
}

// TestForkGateTouchesItsBurst: a start through the gate turns its Spare
// burst on (the lender's P, package sparep); a gate without one starts
// all the same.
func TestForkGateTouchesItsBurst(t *testing.T) {
	true_ := testhost.Tool(t, "true")
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	g := ForkGate{Spare: (&sparep.Lender{}).Burst()}
	t.Cleanup(g.Spare.Stop)
	if g.Spare.On() {
		t.Fatal("burst on before any start")
	}
	if err := g.Run(exec.Command(true_)); err != nil {
		t.Fatal(err)
	}
	if !g.Spare.On() {
		t.Fatal("a start did not turn the gate's burst on")
	}
}
