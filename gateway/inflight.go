package gateway

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/shard-dev/shard/protocol"
)

// InboundLimits bound what one connection may have read and not yet had
// answered: its commands from the moment the reader decoded them until
// their response is queued on its Outbox, wherever they wait meanwhile
// (this actor's mailbox, held behind an agent.attach, the registry's or an
// agent's mailbox, a runtime). Past a bound the connection's reader stops
// reading until responses drain, so that the socket pushes back on the
// client instead of the daemon's memory (without it, a client writing
// large records faster than they are answered grows the daemon without
// bound).
type InboundLimits struct {
	// MaxBytes caps the bytes of the commands in flight
	// (gateway.inbound_max_bytes). A single record larger than it (up to
	// the record limit) is still taken when nothing else is in flight.
	// Default 8 MiB.
	MaxBytes int
	// MaxRecords caps the commands in flight
	// (gateway.inbound_max_records). Default 1024.
	MaxRecords int
}

// Default InboundLimits.
const (
	DefaultInboundMaxBytes   = 8 << 20
	DefaultInboundMaxRecords = 1024
)

func (l InboundLimits) withDefaults() InboundLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultInboundMaxBytes
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultInboundMaxRecords
	}
	return l
}

// inflight is one connection's account of commands read and not yet answered.
// The reader admits each record (blocking while it does not fit); the
// Outbox's observer releases a command when its response is queued. Every
// command gets exactly one response (docs/protocol.md §5.1), which carries
// the command's id: commands are matched to responses by id, in order among
// equal ids (a record whose id could not be read is answered without one,
// under "").
//
// It is safe for concurrent use: the reader admits, any actor pushing a
// response releases.
type inflight struct {
	limits InboundLimits
	// hook, when set, sees the totals after each change (tests).
	hook func(records, bytes int)

	// mu protects the following.
	mu             sync.Mutex
	pending        map[string][]int // sizes of the commands in flight, by id, oldest first
	records, bytes int
	// changed is closed (and replaced) whenever something is released.
	changed chan struct{}
}

func newInflight(l InboundLimits, hook func(records, bytes int)) *inflight {
	return &inflight{limits: l.withDefaults(), hook: hook, pending: make(map[string][]int), changed: make(chan struct{})}
}

// fitsLocked reports whether a record of n bytes may be admitted now.
func (f *inflight) fitsLocked(n int) bool {
	return f.records == 0 || (f.records < f.limits.MaxRecords && f.bytes+n <= f.limits.MaxBytes)
}

// admit counts a command of n bytes under id, first waiting until it fits
// (calling pause, if set, when it starts to wait). It reports false when
// stop closed first (nothing counted then).
func (f *inflight) admit(id string, n int, stop <-chan struct{}, pause func()) bool {
	return f.waitLocked(stop, pause, func() bool {
		if !f.fitsLocked(n) {
			return false
		}
		f.pending[id] = append(f.pending[id], n)
		f.records++
		f.bytes += n
		f.notifyLocked()
		return true
	})
}

// waitRoom blocks until a record could be admitted without waiting for
// room (fewer than MaxRecords and fewer than MaxBytes in flight), calling
// pause, if set, when it starts to wait; it reports false when stop closed
// first. The reader calls it before it reads the next record, so that one
// connection has at most its bound in flight plus the one record being
// read and admitted: a record of up to the record limit is never read
// while another such is still held (docs/protocol.md §2.3).
func (f *inflight) waitRoom(stop <-chan struct{}, pause func()) bool {
	return f.waitLocked(stop, pause, func() bool {
		return f.records == 0 || (f.records < f.limits.MaxRecords && f.bytes < f.limits.MaxBytes)
	})
}

// waitLocked calls ready under mu until it reports true, waiting for a
// release between calls (calling pause once, if set, before the first
// wait); it reports false when stop closed first.
func (f *inflight) waitLocked(stop <-chan struct{}, pause func(), ready func() bool) bool {
	waited := false
	for {
		f.mu.Lock()
		if ready() {
			f.mu.Unlock()
			return true
		}
		changed := f.changed
		f.mu.Unlock()
		if !waited && pause != nil {
			pause()
		}
		waited = true
		select {
		case <-changed:
		case <-stop:
			return false
		}
	}
}

// waitIdle blocks until nothing is in flight; it reports false when stop
// or stop2 closed first.
func (f *inflight) waitIdle(stop, stop2 <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if f.records == 0 {
			f.mu.Unlock()
			return true
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-stop:
			return false
		case <-stop2:
			return false
		}
	}
}

// observe is the connection's Outbox observer (outbox.Outbox.SetObserver):
// a response record releases the oldest command in flight with its id.
// Other records (events, hello) pass.
func (f *inflight) observe(rec []byte) {
	id, ok := responseID(rec)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sizes := f.pending[id]
	if len(sizes) == 0 {
		return // not a command of this connection's in flight
	}
	n := sizes[0]
	if len(sizes) == 1 {
		delete(f.pending, id)
	} else {
		f.pending[id] = sizes[1:]
	}
	f.records--
	f.bytes -= n
	f.notifyLocked()
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *inflight) notifyLocked() {
	if f.hook != nil {
		f.hook(f.records, f.bytes)
	}
}

// responseHead is how every response record begins: the daemon writes
// them all with protocol.Marshal of protocol.Response, whose Header puts
// type first and id (omitted when empty) second.
var (
	responseHead     = []byte(`{"type":"response"`)
	responseIDMember = []byte(`,"id":`)
)

// responseID reports whether rec is a response record and returns its id
// ("" for one without). For the responses the daemon writes it reads only
// the record's first members.
func responseID(rec []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(rec, responseHead)
	if !ok {
		return "", false
	}
	rest, ok = bytes.CutPrefix(rest, responseIDMember)
	if !ok || len(rest) == 0 || rest[0] != '"' {
		// Not the shape Marshal gives (a response rewritten, members in
		// another order): read the envelope properly. A response whose id
		// were misread would hold its command in flight for good.
		h, _ := protocol.DecodeHeader(rec)
		return h.ID, true
	}
	escaped := false
	for i := 1; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if !escaped {
				return string(rest[1:i]), true
			}
			var id string
			if json.Unmarshal(rest[:i+1], &id) != nil {
				return "", true
			}
			return id, true
		}
	}
	return "", true
}
