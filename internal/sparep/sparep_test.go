package sparep

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestOneSpareWhileAnyBurstIsOn: the first Touch raises GOMAXPROCS by one;
// another Touch, and a second burst, keep it there (never two); the P goes
// back only when the last burst is off: to the environment's GOMAXPROCS,
// or to the runtime's default when it sets none.
func TestOneSpareWhileAnyBurstIsOn(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	l := &Lender{linger: time.Hour} // only Stop ends a burst here
	forks, commits := l.Burst(), l.Burst()
	t.Cleanup(forks.Stop)
	t.Cleanup(commits.Stop)
	for _, env := range []string{strconv.Itoa(orig + 2), ""} {
		t.Setenv("GOMAXPROCS", env)
		want := orig + 2
		if env == "" {
			runtime.SetDefaultGOMAXPROCS()
			want = runtime.GOMAXPROCS(0)
		} else {
			runtime.GOMAXPROCS(want)
		}
		forks.Touch()
		forks.Touch()
		commits.Touch()
		if got := runtime.GOMAXPROCS(0); got != want+1 {
			t.Fatalf("GOMAXPROCS=%q: with two bursts on %d, want %d", env, got, want+1)
		}
		forks.Stop()
		if got := runtime.GOMAXPROCS(0); got != want+1 {
			t.Fatalf("GOMAXPROCS=%q: one burst still on, %d, want %d", env, got, want+1)
		}
		commits.Stop()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Fatalf("GOMAXPROCS=%q: after the bursts %d, want %d", env, got, want)
		}
		commits.Stop() // idempotent: a late timer changes nothing
		if got := runtime.GOMAXPROCS(0); got != want || l.on != 0 {
			t.Fatalf("GOMAXPROCS=%q: after a second Stop %d (%d on), want %d", env, got, l.on, want)
		}
	}
}

// TestBurstEndsAfterItsLinger: with no Touch for the linger time the
// burst turns itself off and the P is given back.
func TestBurstEndsAfterItsLinger(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	back := make(chan struct{}, 1)
	l := &Lender{linger: 10 * time.Millisecond, gaveBack: func() { back <- struct{}{} }}
	b := l.Burst()
	t.Cleanup(b.Stop)
	b.Touch()
	if !b.On() {
		t.Fatal("Touch did not turn the burst on")
	}
	<-back
	if b.On() {
		t.Fatal("the P was given back with the burst still on")
	}
	if got, want := runtime.GOMAXPROCS(0), orig; got != want {
		t.Fatalf("GOMAXPROCS after the linger %d, want %d", got, want)
	}
}

// TestNilDoesNothing: a nil Lender hands out nil Bursts, whose methods
// are no-ops.
func TestNilDoesNothing(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	var l *Lender
	b := l.Burst()
	b.Touch()
	b.Stop()
	if b.On() || runtime.GOMAXPROCS(0) != orig {
		t.Fatal("a nil burst lent a P")
	}
}

// TestTwoLendersEndAtTheSetting: two Lenders in one process (tests run
// several daemons) lending over each other leave GOMAXPROCS at the
// environment's setting once both are done, not at a value one of them saw
// while the other was lending.
func TestTwoLendersEndAtTheSetting(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	want := orig + 1
	t.Setenv("GOMAXPROCS", strconv.Itoa(want))
	runtime.GOMAXPROCS(want)
	a, b := (&Lender{linger: time.Hour}).Burst(), (&Lender{linger: time.Hour}).Burst()
	t.Cleanup(a.Stop)
	t.Cleanup(b.Stop)
	a.Touch()
	b.Touch() // lends on top of a's P
	a.Stop()
	b.Stop()
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS after both lenders %d, want the setting %d", got, want)
	}
}

// TestATouchDuringTheLingerKeepsTheBurstOn: when the timer expires with a
// Touch inside the linger, the burst stays on (and waits out the rest);
// once the linger passed since the last Touch, the expiry ends it.
func TestATouchDuringTheLingerKeepsTheBurstOn(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	l := &Lender{linger: time.Hour} // the test runs the expiries itself
	b := l.Burst()
	t.Cleanup(b.Stop)
	b.Touch()
	b.Touch() // a second Touch while on: the same burst
	b.expire()
	if !b.On() || l.on != 1 {
		t.Fatalf("expiry right after a Touch: on %v (%d lent), want still on", b.On(), l.on)
	}
	b.mu.Lock()
	b.last = time.Now().Add(-2 * time.Hour)
	b.mu.Unlock()
	b.expire()
	if b.On() || l.on != 0 {
		t.Fatalf("expiry a linger after the last Touch: on %v (%d lent), want off", b.On(), l.on)
	}
}
