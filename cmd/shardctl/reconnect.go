package main

import (
	"context"
	"errors"
	"time"
)

// Reconnect backoff of watch and attach: the first retry comes quickly (a
// daemon restart takes well under a second), later ones back off so a
// daemon that stays down is not hammered.
const (
	defaultReconnect = 30 * time.Second
	reconnectFirst   = 100 * time.Millisecond
	reconnectMax     = 5 * time.Second
)

// errReconnectExpired says the reconnect window passed.
var errReconnectExpired = errors.New("reconnect window passed")

// reconnector paces reconnect attempts after a lost connection: waits that
// double from reconnectFirst to reconnectMax, within a window that starts at
// the first wait since the last reset.
type reconnector struct {
	since time.Time
	next  time.Duration
}

// reset starts over after a successful reconnect.
func (r *reconnector) reset() { *r = reconnector{} }

// wait sleeps until the next attempt; it fails once window has passed since
// the loss or when ctx ends.
func (r *reconnector) wait(ctx context.Context, window time.Duration) error {
	if r.since.IsZero() {
		r.since, r.next = time.Now(), reconnectFirst
	}
	left := window - time.Since(r.since)
	if left <= 0 {
		return errReconnectExpired
	}
	d := min(r.next, left)
	r.next = min(2*r.next, reconnectMax)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
