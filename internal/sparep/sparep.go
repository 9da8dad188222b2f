// Package sparep lends the Go scheduler one P more than the CPUs while
// some goroutine keeps parking its P in long system calls.
//
// A goroutine in a system call keeps its P (its share of GOMAXPROCS) until
// the call returns or sysmon takes the P back, which it does only after up
// to 10 ms. Two of the daemon's system calls park a P so for milliseconds
// each, over and over while there is work: the vfork of every process it
// starts (the P is held until the child exec'd, golang/go#11155) and the
// group commit's fdatasyncs. On a 2-core machine that left one P, or none,
// to run acks, fan-out and the commit waiters: creates whose commit was
// durable waited for a P before they could be answered. A parked P's
// thread sleeps in the kernel, so lending one P more keeps as many Ps
// running goroutines as there are CPUs. When no call is parked, the lent P
// is one thread more than the CPUs, which the kernel time-slices: a
// runtime trace caught a commit stalled with its thread off the CPU so.
//
// The P is lent for bursts, not for good: the first Touch of a burst
// raises GOMAXPROCS by one, and it is put back once no Touch of any burst
// came for the linger time. Changing GOMAXPROCS stops the world, which per
// system call would cost more than it saves, and a P kept for good lets
// the daemon's own threads preempt each other on the CPUs while it fans
// out, without any call parked.
package sparep

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Linger is how long the spare P outlives a burst's last Touch: the
// system calls of one burst (a job's runtime starts, the commits of runs
// under way) come milliseconds apart.
const Linger = 250 * time.Millisecond

// Lender lends the spare P to its Bursts: GOMAXPROCS is one above the
// default while any of them is on (never two: one covers the P a vfork or
// an fdatasync parks, and more would only add threads that preempt each
// other). The daemon has one. The zero value is ready; a nil
// Lender lends nothing.
type Lender struct {
	mu sync.Mutex
	on int // Bursts that are on
	// linger replaces Linger when > 0, and gaveBack runs after the P was
	// given back (tests).
	linger   time.Duration
	gaveBack func()
}

// Burst is one kind of P-parking system call (forks, commits): it is on
// from its first Touch until Linger after its last. Its methods are safe
// for concurrent use; a nil Burst does nothing.
type Burst struct {
	l     *Lender
	mu    sync.Mutex
	on    bool
	last  time.Time // the last Touch
	timer *time.Timer
}

// Burst returns a new Burst of l (nil for a nil Lender).
func (l *Lender) Burst() *Burst {
	if l == nil {
		return nil
	}
	return &Burst{l: l}
}

// Touch marks a system call of the burst about to park its P: it turns
// the burst on (lending the P if it is the first) and restarts its linger.
// It only notes the time: the timer, armed when the burst turns on, sees
// at its expiry whether a Touch came since and waits out the rest.
func (b *Burst) Touch() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = time.Now()
	if b.on {
		return
	}
	b.on = true
	b.l.lend()
	if b.timer == nil {
		b.timer = time.AfterFunc(b.l.lingerFor(), b.expire)
	} else {
		b.timer.Reset(b.l.lingerFor())
	}
}

// On reports whether the burst is on.
func (b *Burst) On() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.on
}

// Stop turns the burst off now (the daemon stopping) and stops its timer.
func (b *Burst) Stop() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.endLocked()
}

// expire runs when the timer fires: the burst ends if its linger passed
// since the last Touch, and otherwise waits for the rest of it.
func (b *Burst) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		return
	}
	if rest := b.l.lingerFor() - time.Since(b.last); rest > 0 {
		b.timer.Reset(rest)
		return
	}
	b.endLocked()
}

// endLocked turns the burst off and gives its P back; b.mu is held.
func (b *Burst) endLocked() {
	if !b.on {
		return
	}
	b.on = false
	b.l.giveBack()
}

func (l *Lender) lingerFor() time.Duration {
	if l.linger > 0 {
		return l.linger
	}
	return Linger
}

// lend raises GOMAXPROCS by one when the first burst turns on.
func (l *Lender) lend() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on++
	if l.on == 1 {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

// giveBack takes the P back when the last burst turns off: to the
// GOMAXPROCS environment variable's value when it sets one, else to the
// runtime's default (which follows the CPU limit). Not to the value seen
// when the P was lent: another Lender in the process (tests run several
// daemons) may have been lending then.
func (l *Lender) giveBack() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on--
	if l.on > 0 {
		return
	}
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 {
		runtime.GOMAXPROCS(n)
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
	if l.gaveBack != nil {
		l.gaveBack()
	}
}
