package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Timer is a pending call of f; *time.Timer is one.
type Timer interface {
	// Stop prevents the call if it has not run yet and reports whether it
	// did so.
	Stop() bool
}

// Clock tells the time and runs functions later. Implementations are safe
// for concurrent use. f runs on a goroutine of its own and must not block:
// the callers here only send a message to an actor.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

// Or returns c, or the wall clock when c is nil (for Deps fields whose
// zero value means "real time").
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}

// Manual is a clock that moves only when the test says so. Timers fire in
// Advance, in the order of their deadlines, on the goroutine calling it
// (after the clock's lock is released, so f may arm new timers). The zero
// value is not usable: create one with NewManual.
type Manual struct {
	// mu protects the following.
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*manualTimer
	armed  chan struct{} // closed and replaced whenever a timer is armed
}

type manualTimer struct {
	m    *Manual
	at   time.Time
	seq  int
	f    func()
	done bool // fired or stopped
}

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start, armed: make(chan struct{})}
}

// Now implements Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc implements Clock. A timer with d <= 0 fires at the next
// Advance (even by 0).
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{m: m, at: m.now.Add(d), seq: m.seq, f: f}
	m.timers = append(m.timers, t)
	close(m.armed)
	m.armed = make(chan struct{})
	return t
}

// Stop implements Timer.
func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.m.pruneLocked()
	return true
}

// pruneLocked drops fired and stopped timers. m.mu must be held.
func (m *Manual) pruneLocked() {
	kept := m.timers[:0]
	for _, t := range m.timers {
		if !t.done {
			kept = append(kept, t)
		}
	}
	clear(m.timers[len(kept):])
	m.timers = kept
}

// Advance moves the clock by d and runs every timer now due, in deadline
// order. It returns how many ran.
func (m *Manual) Advance(d time.Duration) int {
	m.mu.Lock()
	m.now = m.now.Add(d)
	var due []*manualTimer
	for _, t := range m.timers {
		if !t.done && !t.at.After(m.now) {
			t.done = true
			due = append(due, t)
		}
	}
	m.pruneLocked()
	m.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		t.f()
	}
	return len(due)
}

// Pending returns how many timers are armed and have not fired.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// WaitPending blocks until at least n timers are armed, or ctx ends. Tests
// use it to know that the code under test has armed the timer it is about
// to fire.
func (m *Manual) WaitPending(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		have, armed := len(m.timers), m.armed
		m.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sleep waits d or until ctx ends, and reports whether d passed: the wait
// between two attempts of a goroutine that retries (never in an actor's
// mailbox).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
