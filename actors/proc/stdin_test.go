package proc

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/xsync"
)

// recorder is a stdin that records what is written, failing after failAt
// writes when failAt > 0, and blocking every write while hold is locked.
type recorder struct {
	hold   sync.Mutex
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	failAt int
	closed chan struct{}
}

func newRecorder() *recorder { return &recorder{closed: make(chan struct{})} }

func (r *recorder) Write(p []byte) (int, error) {
	r.hold.Lock()
	r.hold.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.failAt > 0 && r.writes > r.failAt {
		return 0, errors.New("broken pipe")
	}
	return r.buf.Write(p)
}

func (r *recorder) Close() error { close(r.closed); return nil }

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

func TestStdinQueueWritesInOrderAndDrainsOnClose(t *testing.T) {
	w := newRecorder()
	q := newStdinQueue(w, group(t))
	var want bytes.Buffer
	for i := range 500 {
		line := fmt.Appendf(nil, `{"n":%d}`, i)
		if !q.push(line) {
			t.Fatalf("push %d refused", i)
		}
		want.Write(line)
		want.WriteByte('\n')
	}
	q.close()
	<-w.closed
	if got := w.String(); got != want.String() {
		t.Fatalf("stdin got %d bytes, want %d (order or loss)", len(got), want.Len())
	}
	if q.push([]byte("{}")) {
		t.Error("push after close accepted")
	}
}

// TestStdinQueueWriterComesAndGoes: the writer goroutine exits once the
// queue is empty and a later push starts another; close with nothing
// queued closes stdin at once.
func TestStdinQueueWriterComesAndGoes(t *testing.T) {
	w := newRecorder()
	q := newStdinQueue(w, group(t))
	for i := range 3 {
		q.push(fmt.Appendf(nil, "%d", i))
		deadline := time.Now().Add(5 * time.Second)
		for {
			q.mu.Lock()
			idle := !q.writing
			q.mu.Unlock()
			if idle {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the writer never finished")
			}
			time.Sleep(time.Millisecond)
		}
	}
	q.close()
	<-w.closed
	if got := w.String(); got != "0\n1\n2\n" {
		t.Errorf("stdin got %q", got)
	}
}

func TestStdinQueueBoundsAStuckChild(t *testing.T) {
	w := newRecorder()
	w.hold.Lock() // the child never reads
	q := newStdinQueue(w, group(t))
	// The writer holds the batch it took (blocked on its first write);
	// stdinQueueMax more may wait behind it, and no more.
	accepted := 0
	for q.push([]byte("{}")) {
		if accepted++; accepted > 2*stdinQueueMax {
			t.Fatalf("%d records queued for a child that never reads", accepted)
		}
	}
	if accepted < stdinQueueMax {
		t.Fatalf("refused after %d records, below the bound", accepted)
	}
	if q.push([]byte("{}")) {
		t.Fatal("push accepted again while the child still does not read")
	}
	q.close()
	w.hold.Unlock()
	<-w.closed
}

func TestStdinQueueAfterWriteErrorDrops(t *testing.T) {
	w := newRecorder()
	w.failAt = 3
	q := newStdinQueue(w, group(t))
	for range 3 * stdinQueueMax { // pushes never back up behind a dead child
		q.push([]byte("{}"))
	}
	q.close()
	<-w.closed
	if got := w.String(); got != "{}\n{}\n{}\n" {
		t.Errorf("wrote %q before the error", got)
	}
}

// group returns a goroutine group closed when the test ends: every
// goroutine the code under test started must have ended by then.
func group(t *testing.T) *xsync.Group {
	g := &xsync.Group{}
	t.Cleanup(g.Close)
	return g
}
