package tunnel

import (
	"fmt"
	"time"
)

// Options tune a Listener's connections or a dialed Conn. The zero value
// takes every default; each side uses its own.
type Options struct {
	// Window is how many bytes this side buffers for its reader and so how
	// many the peer may have in flight towards it unread. Default 256 KiB.
	Window int
	// RetransmitTimeout is how long a sent frame waits for its
	// acknowledgement before it and everything after it are sent again.
	// Default 500 ms.
	RetransmitTimeout time.Duration
	// KeepAlive is how long a side stays quiet before it sends an
	// acknowledgement just to be heard. Default 2 s.
	KeepAlive time.Duration
	// PeerTimeout is how long the peer may stay silent before the
	// connection ends with ErrPeerSilent; it must exceed KeepAlive.
	// Default 10 s.
	PeerTimeout time.Duration
	// Linger bounds how long a closed connection keeps retransmitting what
	// its peer has not acknowledged yet. Default PeerTimeout.
	Linger time.Duration
	// Backlog is how many opened connections a Listener holds for Accept;
	// beyond it an open is refused. Default 128.
	Backlog int

	// Test hooks; nil or zero in production.

	// dropData drops every dropData-th data frame this side publishes
	// (retransmissions included), as a slow consumer or a route reconnect
	// would.
	dropData int
	// writeBlocked is called when a Write waits for the peer's window,
	// with the bytes sent and not acknowledged, and the bytes sent and not
	// read by the peer's reader yet.
	writeBlocked func(unacked, unread uint64)
}

// withDefaults returns o with every unset field at its default, or why o
// is not usable.
func (o Options) withDefaults() (Options, error) {
	if o.Window == 0 {
		o.Window = 256 << 10
	}
	if o.RetransmitTimeout == 0 {
		o.RetransmitTimeout = 500 * time.Millisecond
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 2 * time.Second
	}
	if o.PeerTimeout == 0 {
		o.PeerTimeout = 10 * time.Second
	}
	if o.Linger == 0 {
		o.Linger = o.PeerTimeout
	}
	if o.Backlog == 0 {
		o.Backlog = 128
	}
	switch {
	case o.Window < 1024:
		return o, fmt.Errorf("tunnel: Window %d is under 1024 bytes", o.Window)
	case o.RetransmitTimeout < 0 || o.KeepAlive < 0 || o.Linger < 0:
		return o, fmt.Errorf("tunnel: negative duration in options")
	case o.PeerTimeout <= o.KeepAlive:
		return o, fmt.Errorf("tunnel: PeerTimeout (%s) must exceed KeepAlive (%s)", o.PeerTimeout, o.KeepAlive)
	case o.Backlog < 0:
		return o, fmt.Errorf("tunnel: negative Backlog %d", o.Backlog)
	}
	return o, nil
}

// tick is how often a connection's timer looks at its clocks: often enough
// to retransmit and keep alive on time, no more.
func (o Options) tick() time.Duration {
	return max(min(o.RetransmitTimeout, o.KeepAlive)/2, time.Millisecond)
}

// openAttempt is how long Dial waits for the answer to one open request
// before it sends it again (the listener answers a repeated open with the
// same connection).
func (o Options) openAttempt() time.Duration {
	return max(4*o.RetransmitTimeout, time.Second)
}
