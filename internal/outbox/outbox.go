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
//
// With a direct writer (SetDirect), PushDirect and FlushDirect let the
// producer write what is queued to the connection itself, without blocking,
// while the writer goroutine is idle (the common case of a client that
// keeps up): no writer wake-up per event. Whatever the socket does not take
// at once stays queued for the writer, so order, framing and the caps are
// those of the queue alone.
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
	// writing: the writer took records with Next and may still be writing
	// them; nobody else may write then.
	writing bool
	// partial: queue[0] is the rest of a record a direct write began.
	partial bool
	direct  DirectWriter
	// observe, when set, sees every record pushed (see SetObserver).
	observe func(rec []byte)
}

// DirectWriter writes recs, each followed by '\n', to the connection
// without blocking and returns how many bytes it wrote: fewer than all when
// the peer's buffer is full, 0 (with nothing written) when it cannot write
// now or at all. The Outbox calls it with its lock held, only while the
// writer goroutine is not writing.
type DirectWriter func(recs [][]byte) int

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
func (o *Outbox) Push(rec []byte) bool { return o.push(rec, pushWake) }

// How push starts the writing of its record.
const (
	pushHold   = iota // not at all: a later push or flush does
	pushWake          // the writer goroutine writes it
	pushDirect        // the caller writes it when it can (flushDirectLocked)
)

func (o *Outbox) push(rec []byte, how int) bool {
	ok := o.pushLocked(rec, how)
	if o.observe != nil {
		o.observe(rec)
	}
	return ok
}

// SetObserver installs f, which sees every record pushed (Push, Hold,
// PushDirect, queued or not), on the pushing goroutine, after the record
// is queued and without the Outbox's lock: a record f sees is already
// where Close lets Next drain it. The connection counts responses with it
// (its commands in flight). Call it before the Outbox is shared.
func (o *Outbox) SetObserver(f func(rec []byte)) { o.observe = f }

func (o *Outbox) pushLocked(rec []byte, how int) bool {
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
		q := make([][]byte, 0, 2)
		if o.partial {
			// The rest of a record already begun on the wire still goes
			// first: the error event must start a line of its own.
			q = append(q, o.queue[0])
		}
		o.queue = append(q, slowConsumerEvent())
		o.bytes = 0
		for _, r := range o.queue {
			o.bytes += len(r)
		}
		o.signalLocked()
		return false
	}
	o.queue = append(o.queue, rec)
	o.bytes += len(rec)
	switch how {
	case pushWake:
		o.signalLocked()
	case pushDirect:
		o.flushDirectLocked()
	}
	return true
}

// Hold is Push without starting to write: the record waits in the queue
// (counted against the caps) until a later push or flush starts the
// writing. A producer pushing a burst holds its records and then flushes,
// so that the burst goes out in one write.
func (o *Outbox) Hold(rec []byte) bool { return o.push(rec, pushHold) }

// PushDirect is Push, except that when the writer goroutine is idle the
// caller writes what is queued itself (see Outbox), so that a connection
// that keeps up costs no wake-up. Without a direct writer it is Push.
func (o *Outbox) PushDirect(rec []byte) bool { return o.push(rec, pushDirect) }

// Flush wakes the writer for what is queued (what Hold left waiting).
func (o *Outbox) Flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) > 0 {
		o.signalLocked()
	}
}

// FlushDirect is Flush the way PushDirect starts writing.
func (o *Outbox) FlushDirect() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) > 0 {
		o.flushDirectLocked()
	}
}

// SetDirect installs the direct writer (see Outbox). Call it before the
// Outbox is shared.
func (o *Outbox) SetDirect(w DirectWriter) { o.direct = w }

// flushDirectLocked writes the queue directly when it can, and otherwise
// (or for what the socket did not take) wakes the writer.
func (o *Outbox) flushDirectLocked() {
	if o.direct != nil && !o.writing && !o.closed {
		o.consumeLocked(o.direct(o.queue))
		if len(o.queue) == 0 {
			return
		}
	}
	o.signalLocked()
}

// consumeLocked drops the first n bytes of the queue as written (records
// and their newlines); a record written in part is replaced by its rest.
func (o *Outbox) consumeLocked(n int) {
	i := 0
	for ; i < len(o.queue) && n > 0; i++ {
		r := o.queue[i]
		if n <= len(r) { // r in part, or whole without its newline
			o.queue[i] = r[n:]
			o.bytes -= n
			o.partial = true
			break
		}
		n -= len(r) + 1
		o.bytes -= len(r)
		o.partial = false
	}
	if i == len(o.queue) { // all written: keep the array for the next burst
		clear(o.queue)
		o.queue = o.queue[:0]
	} else if i > 0 {
		clear(o.queue[:i])
		o.queue = o.queue[i:]
	}
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
// ctx ends. The writer calls Next again only once it has written (or given
// up on) what the last call returned: until then nothing is written
// directly (see SetDirect). The first record may be the rest of one a
// direct write began; it is written like the others, followed by '\n'.
func (o *Outbox) Next(ctx context.Context) (recs [][]byte, ok bool) {
	for {
		o.mu.Lock()
		o.writing = false
		if len(o.queue) > 0 {
			recs = o.queue
			o.queue = nil
			o.bytes = 0
			o.partial = false
			o.writing = true
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
