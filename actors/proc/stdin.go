package proc

import (
	"io"
	"sync"

	"github.com/shard-dev/shard/internal/xsync"
)

// stdinQueue holds the records waiting for a child's stdin and writes them
// from a writer goroutine that runs only while there is something to write.
// A live but idle runtime thus costs neither a parked goroutine nor the
// ~24 KiB a channel of stdinQueueMax slots would reserve: daemon overhead
// per idle agent is a budgeted figure (BENCHMARKS.md). Commands are
// low-rate, so starting a goroutine per burst is cheap. The actor pushes
// and closes without ever blocking.
type stdinQueue struct {
	w io.WriteCloser
	// goroutines runs the writer goroutine.
	goroutines *xsync.Group

	mu      sync.Mutex
	lines   [][]byte
	writing bool // a writer goroutine is running
	closed  bool // no more pushes; w is closed once the queue drains
	failed  bool // a write failed: later records are dropped
}

func newStdinQueue(w io.WriteCloser, goroutines *xsync.Group) *stdinQueue {
	return &stdinQueue{w: w, goroutines: goroutines}
}

// push queues line; it reports false when the queue already holds
// stdinQueueMax records (a child that stopped reading), is closed, or the
// writer goroutine was refused (the daemon is stopping).
func (q *stdinQueue) push(line []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.lines) >= stdinQueueMax {
		return false
	}
	if q.failed {
		return true // the child's stdin is gone; the record is dropped
	}
	if !q.writing {
		if !q.goroutines.Go(q.write) {
			return false
		}
		q.writing = true // the writer waits for mu: it sees the line below
	}
	q.lines = append(q.lines, line)
	return true
}

// close closes stdin once what is queued has been written.
func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	if !q.writing {
		q.w.Close() // a pipe's Close does not block
	}
}

// write is the writer goroutine: it writes queued records in order until
// the queue is empty, then exits (closing stdin if the queue was closed
// meanwhile).
func (q *stdinQueue) write() {
	for {
		q.mu.Lock()
		lines := q.lines
		q.lines = nil
		if len(lines) == 0 {
			q.writing = false
			if q.closed {
				q.w.Close()
			}
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for _, line := range lines {
			if _, err := q.w.Write(append(line, '\n')); err != nil {
				q.mu.Lock()
				q.failed, q.lines = true, nil
				q.mu.Unlock()
				break
			}
		}
	}
}
