package procs

import (
	"os/exec"
	"sync"
	"testing"
	"time"
)

// TestForkGateStartsOneAtATime: a Start waits while the gate is held, and
// then starts its process; concurrent Starts all start theirs; a nil gate
// starts at once.
func TestForkGateStartsOneAtATime(t *testing.T) {
	true_, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
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
}
