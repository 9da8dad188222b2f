package cluster

// The membership's watch of its bucket, and the stale-view rule it feeds:
// a node judges no other while its own heartbeats do not come back
// through this watch.

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watch is one KV watch of the bucket: cancelling its context ends its
// subscription (and deletes its consumer) without waiting for the
// server, which may be electing a leader.
type watch struct {
	w      jetstream.KeyWatcher
	cancel context.CancelFunc
	at     time.Time // when it was started
}

// stop ends the watch without waiting for the server. Its channel is
// drained until the subscription's end closes it: nats.go delivers
// into it under a lock its closing takes too.
func (w *watch) stop() {
	w.cancel()
	go func() {
		for range w.w.Updates() {
		}
	}()
}

// updates is w's channel, nil (never ready) when there is no watch.
func (w *watch) updates() <-chan jetstream.KeyValueEntry {
	if w == nil {
		return nil
	}
	return w.w.Updates()
}

// watchLoop follows the bucket and, every lease/3, restarts the watch
// when it fell behind (restartDue) and declares dead the nodes silent
// past their lease.
func (m *membership) watchLoop(ctx context.Context, w *watch) {
	defer func() {
		if w != nil {
			w.stop()
			_ = w.w.Stop() // deletes its consumer before the connection drains
		}
	}()
	t := time.NewTicker(m.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.updates():
			switch {
			case !ok:
				// The library gave up on its consumer: the view is
				// stale until a new watch replays the bucket.
				m.log.Warn("membership: the watch of the bucket ended; restarting it")
				w.stop()
				w = nil
				m.setReplaying()
			case e == nil:
				m.loaded(time.Now())
			default:
				m.apply(e, time.Now())
			}
		case now := <-t.C:
			if w == nil || m.restartDue(now, w.at) {
				if w != nil {
					w.stop()
					w = nil
				}
				w = m.rewatch(ctx)
			}
			m.sweep(ctx, time.Now())
		}
	}
}

// rewatch starts a new watch of the bucket, which replays every key's
// latest value before it follows the changes; the view is stale until
// that replay ends. It returns nil when the watch cannot be made now
// (no stream leader yet): the next tick tries again.
func (m *membership) rewatch(ctx context.Context) *watch {
	m.setReplaying()
	w, err := m.openWatch(ctx, m.lease/2)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("membership: could not restart the watch of the bucket", "err", err)
		}
		return nil
	}
	m.log.Info("membership: restarted the watch of the bucket (its view was stale)")
	return w
}

// openWatch starts a watch of the bucket that lives until parent ends
// or it is stopped; creating it takes at most bound.
func (m *membership) openWatch(parent context.Context, bound time.Duration) (*watch, error) {
	wctx, cancel := context.WithCancel(parent)
	// The context is the subscription's life, so the create is bounded
	// by cancelling it, not by a deadline.
	timer := time.AfterFunc(bound, cancel)
	kw, err := m.kv.WatchAll(wctx)
	if !timer.Stop() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &watch{w: kw, cancel: cancel, at: time.Now()}, nil
}

// acked notes an acknowledged heartbeat at revision rev.
func (m *membership) acked(rev uint64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putRev = max(m.putRev, rev)
	if rev > m.echoRev && m.unechoedAt.IsZero() {
		m.unechoedAt = now
	}
}

// echoLocked notes this node's own record at revision rev coming back
// through the watch. mu must be held.
func (m *membership) echoLocked(rev uint64, now time.Time) {
	if rev <= m.echoRev {
		return
	}
	if m.staleLocked(now) && !m.replaying {
		m.freshAt = now // this echo ends a stale view
	}
	m.echoRev, m.echoAt = rev, now
	m.unechoedAt = time.Time{}
	if m.putRev > rev {
		// Later heartbeats are acknowledged and not back yet.
		m.unechoedAt = now
	}
}

// setReplaying marks the view stale until a watch's replay ends.
func (m *membership) setReplaying() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaying = true
	m.notifyLocked()
}

// loaded notes the end of a watch's replay.
func (m *membership) loaded(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaying = false
	if !m.staleLocked(now) {
		m.freshAt = now // the replay ends a stale view
	}
	m.notifyLocked()
}

// staleLocked says whether this node's view of the bucket is too old to
// judge others by: a watch is replaying, or this node's own latest
// heartbeat has not come back through the watch for lease/2 (it
// heartbeats every lease/3). The watch delivers the bucket in order, so
// an echo that is fresh means every record written before that
// heartbeat was seen too. mu must be held.
func (m *membership) staleLocked(now time.Time) bool {
	return m.replaying || now.Sub(m.echoAt) > m.lease/2
}

// silentLocked says whether o is silent past its lease as this node can
// tell: its silence counts from when this node last saw it change, or
// from when this node's view became current again (freshAt), whichever
// is later. A view goes stale when the bucket's stream loses its leader
// (its node crashed or was cut off), and until a new leader is elected
// no node's heartbeat is taken: every node then needs a heartbeat's
// retry to land one, and the first to see its own come back must not
// judge the others by the outage (it would declare a live node dead).
// A node really gone stays silent for a lease after, and is declared
// then. mu must be held.
func (m *membership) silentLocked(o *observed, now time.Time) bool {
	since := o.since
	if m.freshAt.After(since) {
		since = m.freshAt
	}
	return now.Sub(since) > o.rec.Lease()
}

// restartDue says whether the watch, started at since, fell behind: an
// acknowledged heartbeat has not come back for lease/3 (nats.go's own
// ordered consumer would only notice after two missed idle heartbeats,
// ten seconds), or nothing came back for a whole lease. Either way, a
// watch is given lease/3 (lease for the second) to replay first.
func (m *membership) restartDue(now, since time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	age := now.Sub(since)
	if !m.unechoedAt.IsZero() && now.Sub(m.unechoedAt) > m.lease/3 && age > m.lease/3 {
		return true
	}
	return now.Sub(m.echoAt) > m.lease && age > m.lease
}
