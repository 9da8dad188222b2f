package procs

import (
	"errors"
	"os/exec"
	"runtime"
	"strconv"
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
	orig := runtime.GOMAXPROCS(0)
	g := ForkGate{hold: time.Hour} // no timer of this test outlives it
	t.Cleanup(func() {
		if g.idle != nil {
			g.idle.Stop()
		}
		runtime.GOMAXPROCS(orig)
	})
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

// TestForkGateSparePDuringABurst: the first start of a burst raises
// GOMAXPROCS by one, the next ones keep it there, and putBack (what the
// idle timer runs) returns it to the environment's setting, or to the
// runtime's default when none is set.
func TestForkGateSparePDuringABurst(t *testing.T) {
	true_, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	g := ForkGate{hold: time.Hour} // only putBack ends the burst here
	t.Cleanup(func() {
		if g.idle != nil {
			g.idle.Stop()
		}
	})
	start := func() {
		t.Helper()
		c := exec.Command(true_)
		if err := g.Start(c); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for _, env := range []string{strconv.Itoa(orig + 2), ""} {
		t.Setenv("GOMAXPROCS", env)
		want := orig + 2
		if env == "" {
			runtime.SetDefaultGOMAXPROCS()
			want = runtime.GOMAXPROCS(0)
		} else {
			runtime.GOMAXPROCS(want)
		}
		start()
		start()
		if got := runtime.GOMAXPROCS(0); got != want+1 {
			t.Errorf("GOMAXPROCS=%q: during a burst of two starts %d, want %d", env, got, want+1)
		}
		if g.idle == nil {
			t.Fatal("no timer armed to take the spare P back")
		}
		g.putBack()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("GOMAXPROCS=%q: after the burst %d, want %d", env, got, want)
		}
		g.putBack() // idempotent: a late timer changes nothing
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("GOMAXPROCS=%q: after a second putBack %d, want %d", env, got, want)
		}
	}
}
