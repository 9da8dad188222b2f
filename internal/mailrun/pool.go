// Package mailrun runs actor mailboxes on reused goroutines.
//
// protoactor's default dispatcher starts a goroutine for every mailbox run
// (each time an idle actor gets a message) and lets it end when the
// mailbox is empty. A new goroutine starts on a small stack, and an
// actor's Receive grows it (JSON, bbolt, protocol records) by copying it
// once or twice; the goroutine's exit then frees the grown stack. A Pool
// keeps goroutines that finished a run parked for the next one, so their
// stacks stay grown and no goroutine is created or destroyed per message.
package mailrun

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Pool is an actor.Dispatcher that hands mailbox runs to parked goroutines
// and starts one only when none is parked. It never queues a run: a run
// starts at once, as with the default dispatcher, so one actor's long run
// never delays another's.
type Pool struct {
	throughput int
	maxIdle    int32
	// linger is how long a goroutine stays parked without a run before it
	// ends, so that a daemon at rest keeps none.
	linger time.Duration

	work chan func()
	done chan struct{}
	// idle counts goroutines parked or about to park; it bounds them by
	// maxIdle.
	idle atomic.Int32
	// stop makes Close idempotent.
	stop sync.Once

	// parked and exited, when set, are told of a goroutine that parks or
	// ends (the package's tests).
	parked, exited func()
}

var _ actor.Dispatcher = (*Pool)(nil)

// New returns a Pool whose mailboxes yield after throughput messages (as
// the default dispatcher's 300) and that keeps at most maxIdle goroutines
// parked between runs, each for at most linger.
func New(throughput, maxIdle int, linger time.Duration) *Pool {
	return &Pool{throughput: throughput, maxIdle: int32(maxIdle), linger: linger,
		work: make(chan func()), done: make(chan struct{})}
}

// Schedule runs fn on a parked goroutine, or on a new one when none is
// parked (the channel is unbuffered: a send succeeds only into a waiting
// receiver).
func (p *Pool) Schedule(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.run(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (p *Pool) Throughput() int { return p.throughput }

// Close ends the parked goroutines. Runs scheduled later still run, each on
// a goroutine of its own that ends after it.
func (p *Pool) Close() { p.stop.Do(func() { close(p.done) }) }

func (p *Pool) run(fn func()) {
	if p.exited != nil {
		defer p.exited()
	}
	// Reset before each park; since Go 1.23 a Reset timer never delivers
	// a stale expiry.
	idle := time.NewTimer(p.linger)
	defer idle.Stop()
	for {
		fn()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		if p.parked != nil {
			p.parked()
		}
		idle.Reset(p.linger)
		select {
		case fn = <-p.work:
			p.idle.Add(-1)
		case <-idle.C:
			p.idle.Add(-1)
			return
		case <-p.done:
			p.idle.Add(-1)
			return
		}
	}
}
