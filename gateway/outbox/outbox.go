package outbox

import (
	"context"
	"sync"

	"github.com/shard-dev/shard/protocol"
)

// Limits bound an Outbox. Both caps apply to records queued and not yet
// taken by the writer; MaxBytes does not count the oldest queued record, so
// one oversized record never trips it on its own.
type Limits struct {
	// MaxBytes caps queued bytes (default 8 MiB).
	MaxBytes int
	// MaxMessages caps queued records (default 10,000).
	MaxMessages int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 8 << 20
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = 10000
	}
	return l
}

// SlowConsumerMessage is the message of the fatal error event a slow
// consumer receives before it is dropped.
const SlowConsumerMessage = "slow consumer"

// Outbox is a bounded queue of encoded records for one connection. Push is
// safe for concurrent use by any number of producers and never blocks; one
// writer goroutine drains it with Next.
type Outbox struct {
	limits Limits

	// mu protects the following.
	mu       sync.Mutex
	queue    [][]byte
	bytes    int
	closed   bool // no more pushes; Next drains what is queued, then ends
	overflow bool // the cap was hit: the connection is a slow consumer
	ready    chan struct{}
	slow     chan struct{} // closed when the cap is hit
}

// New returns an empty Outbox with the given limits (zero fields take the
// defaults).
func New(l Limits) *Outbox {
	return &Outbox{limits: l.withDefaults(), ready: make(chan struct{}, 1), slow: make(chan struct{})}
}

// Push queues rec. It reports false when the record was not queued: the
// Outbox is closed, or it was already full (see Limits) so this push
// overflowed it, in which case every pending
// record is dropped, a fatal slow-consumer `error` event is queued instead
// and the Outbox is closed (Overflowed then reports true). rec must not be
// modified after the call.
func (o *Outbox) Push(rec []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	// The caps bound what waits behind the record the writer takes next
	// (the head): a single record larger than MaxBytes (a big
	// message_complete, a large file read) still reaches a client that keeps
	// up, while MaxBytes of anything queued behind it marks a consumer that
	// does not.
	waiting := o.bytes
	if len(o.queue) > 0 {
		waiting -= len(o.queue[0])
	}
	if len(o.queue) >= o.limits.MaxMessages || (len(o.queue) > 0 && waiting+len(rec) > o.limits.MaxBytes) {
		o.overflow = true
		o.closed = true
		close(o.slow)
		o.queue = [][]byte{slowConsumerEvent()}
		o.bytes = 0
		o.signalLocked()
		return false
	}
	o.queue = append(o.queue, rec)
	o.bytes += len(rec)
	o.signalLocked()
	return true
}

func slowConsumerEvent() []byte {
	return protocol.MustMarshal(protocol.ErrorEvent{
		Header:  protocol.Header{Type: protocol.TypeError},
		Code:    protocol.CodeInternal,
		Message: SlowConsumerMessage,
		Fatal:   true,
	})
}

func (o *Outbox) signalLocked() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// Next blocks until records are queued and returns all of them, oldest
// first. It returns ok=false once the Outbox is closed and drained, or when
// ctx ends.
func (o *Outbox) Next(ctx context.Context) (recs [][]byte, ok bool) {
	for {
		o.mu.Lock()
		if len(o.queue) > 0 {
			recs = o.queue
			o.queue = nil
			o.bytes = 0
			o.mu.Unlock()
			return recs, true
		}
		if o.closed {
			o.mu.Unlock()
			return nil, false
		}
		o.mu.Unlock()
		select {
		case <-o.ready:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// Close stops further pushes. Records already queued are still returned by
// Next. Close is idempotent.
func (o *Outbox) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
	}
	o.signalLocked()
}

// Closed reports whether the Outbox accepts no more records.
func (o *Outbox) Closed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// Overflowed reports whether the Outbox was closed because its consumer was
// too slow.
func (o *Outbox) Overflowed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.overflow
}

// Slow returns a channel closed when the Outbox overflows. The connection's
// owner watches it to close a transport whose writer is stuck on a peer that
// does not read.
func (o *Outbox) Slow() <-chan struct{} { return o.slow }

// Len returns the number of queued records.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue)
}
