package store

import (
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit.
//
// Every write goes through update, which queues the operation and waits
// until it is durable. One writer goroutine, alive while there is work,
// applies the queued operations in arrival order inside one bbolt write
// transaction and commits it (one fsync pair for all of them); operations
// queued while that commit is in flight form the next transaction. Nothing
// waits for a batch to fill: an operation that finds the writer idle is
// committed at once, alone.
//
// An operation sees the writes of the operations before it in its
// transaction, exactly as if they had committed one by one in that order,
// so a compare-and-set stays a compare-and-set. When an operation fails
// (returns an error or panics), the transaction is rolled back and the
// others are applied again in a fresh one; after that committed, the
// failed operation runs again alone, and that run's outcome is its answer
// (as bbolt's DB.Batch does). An operation's function may therefore run
// more than once, and must be a function of the transaction alone: it
// resets whatever it fills in at its start. When the commit itself fails,
// every operation of that transaction gets the error and none of them is
// stored.

// maxBatch bounds the operations of one transaction, so that one commit
// stays short however deep the queue.
const maxBatch = 256

// errOpFailed rolls a batch back after one of its operations failed.
var errOpFailed = errors.New("store: operation failed")

// writeOp is one queued write: fn, then its outcome.
type writeOp struct {
	fn       func(*bolt.Tx) error
	err      error
	panicked any // a panic of fn, re-raised in the caller's goroutine
	// done is closed with the outcome (update); or then is called with it
	// instead (updateThen).
	done chan struct{}
	then func(error)
}

// finish answers op.
func (op *writeOp) finish() {
	if op.then != nil {
		op.then(op.err) // a panic of fn is in op.err (apply)
		return
	}
	close(op.done)
}

// committer queues writes and runs the writer goroutine.
type committer struct {
	mu      sync.Mutex
	queue   []*writeOp
	writing bool           // a writer goroutine runs
	idle    sync.WaitGroup // the writer goroutine, for Close
}

// update runs fn in a write transaction, shared with the writes queued
// alongside it, and returns once that transaction committed (and, unless
// NoSync, was fsynced), or with fn's error and nothing of fn written. See
// Group commit above: fn may run more than once.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	op := &writeOp{fn: fn, done: make(chan struct{})}
	s.enqueue(op)
	<-op.done
	if op.panicked != nil {
		panic(op.panicked)
	}
	return op.err
}

// updateThen is update without waiting: then is called with the outcome,
// on the writer goroutine, once the transaction committed (or failed).
// then must not block (an actor's Send): the next batch waits for it. An
// actor writes this way so that neither a goroutine of its own waits for
// the commit nor one per write is woken after it; the writer answers them
// all. A panic of fn reaches then as an error.
func (s *Store) updateThen(fn func(*bolt.Tx) error, then func(error)) {
	s.enqueue(&writeOp{fn: fn, then: then})
}

func (s *Store) enqueue(op *writeOp) {
	c := &s.commits
	c.mu.Lock()
	c.queue = append(c.queue, op)
	if !c.writing {
		c.writing = true
		c.idle.Add(1)
		go s.writeLoop()
	}
	c.mu.Unlock()
}

// writeLoop commits batches until the queue is empty.
func (s *Store) writeLoop() {
	c := &s.commits
	defer c.idle.Done()
	for {
		c.mu.Lock()
		n := min(len(c.queue), maxBatch)
		if n == 0 {
			c.writing = false
			c.queue = nil
			c.mu.Unlock()
			return
		}
		batch := make([]*writeOp, n)
		copy(batch, c.queue)
		c.queue = c.queue[n:]
		c.mu.Unlock()
		s.spare.Touch()
		s.commitBatch(batch)
	}
}

// commitBatch applies batch in one transaction and answers every
// operation. An operation that fails is taken out and the rest are applied
// again; once they committed, each failed one runs again in a transaction
// of its own, whose outcome is its answer. So a failure is never decided
// by writes that did not become durable.
func (s *Store) commitBatch(batch []*writeOp) {
	var failed []*writeOp
	for len(batch) > 0 {
		bad := -1
		start := time.Now()
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, op := range batch {
				if !apply(op, tx) {
					bad = i
					return errOpFailed
				}
			}
			if s.beforeCommit != nil {
				return s.beforeCommit(len(batch))
			}
			return nil
		})
		if bad >= 0 {
			if len(batch) == 1 && len(failed) == 0 {
				batch[0].finish() // failed alone: that is its answer
				return
			}
			failed = append(failed, batch[bad])
			batch = append(batch[:bad:bad], batch[bad+1:]...)
			continue
		}
		if err == nil && s.onCommit != nil {
			s.onCommit(time.Since(start))
		}
		for _, op := range batch {
			op.err = err
			op.finish()
		}
		break
	}
	for _, op := range failed {
		op.err, op.panicked = nil, nil
		s.commitBatch([]*writeOp{op})
	}
}

// apply runs op in tx and reports whether it succeeded; a panic counts as
// a failure and is kept for the caller.
func apply(op *writeOp, tx *bolt.Tx) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			op.panicked, ok = p, false
			op.err = fmt.Errorf("store: write panicked: %v", p)
		}
	}()
	op.err = op.fn(tx)
	return op.err == nil
}
