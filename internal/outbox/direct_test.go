package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/outbox"
)

// wire is a fake connection: what the direct writer and the writer
// goroutine wrote, in order. budget is how many bytes the next direct write
// may take (the peer's free buffer), -1 for all.
type wire struct {
	buf     bytes.Buffer
	budget  int
	calls   int
	writing bool // the test's writer holds records from Next
}

func (w *wire) direct(t *testing.T) outbox.DirectWriter {
	return func(recs [][]byte) int {
		w.calls++
		if w.writing {
			t.Fatal("direct write while the writer goroutine is writing")
		}
		var all []byte
		for _, r := range recs {
			all = append(append(all, r...), '\n')
		}
		n := len(all)
		if w.budget >= 0 {
			n = min(n, w.budget)
		}
		w.buf.Write(all[:n])
		return n
	}
}

// take is the writer goroutine's turn: Next, then write what it returned.
func (w *wire) take(t *testing.T, o *outbox.Outbox) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // never block
	recs, ok := o.Next(ctx)
	if !ok {
		return false
	}
	w.writing = true
	for _, r := range recs {
		w.buf.Write(r)
		w.buf.WriteByte('\n')
	}
	return true
}

// done tells the outbox the writer finished (its next Next would).
func (w *wire) done() { w.writing = false }

// TestDirectPartialWrites runs random sequences of pushes, holds, flushes,
// direct writes that the peer takes in part or not at all, and writer
// turns: the wire always ends up with every record once, whole, in order.
func TestDirectPartialWrites(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		o := outbox.New(outbox.Limits{MaxMessages: 1 << 20, MaxBytes: 1 << 30})
		w := &wire{}
		o.SetDirect(w.direct(t))
		var want bytes.Buffer
		for i := range 300 {
			rec := fmt.Appendf(nil, `{"i":%d,"s":"%s"}`, i, strings.Repeat("x", r.IntN(40)))
			want.Write(rec)
			want.WriteByte('\n')
			switch w.budget = r.IntN(60) - 5; r.IntN(6) {
			case 0:
				o.PushDirect(rec)
			case 1:
				o.Push(rec)
			case 2:
				o.Hold(rec)
			case 3:
				o.Hold(rec)
				o.FlushDirect()
			case 4:
				o.Hold(rec)
				o.Flush()
			case 5:
				o.PushDirect(rec)
				if w.writing {
					w.done()
				} else if r.IntN(2) == 0 {
					w.take(t, o)
				}
			}
		}
		w.done()
		w.budget = -1
		o.FlushDirect()
		for w.take(t, o) {
			w.done()
		}
		if got := w.buf.String(); got != want.String() {
			t.Fatalf("seed %d: wire differs\n got %q\nwant %q", seed, got, want.String())
		}
		if o.Len() != 0 {
			t.Fatalf("seed %d: %d records left", seed, o.Len())
		}
	}
}

// TestDirectOverflowKeepsFraming: a slow consumer overflows while a
// record is half on the wire: its rest still goes first, so the fatal
// error event starts a line of its own.
func TestDirectOverflowKeepsFraming(t *testing.T) {
	o := outbox.New(outbox.Limits{MaxMessages: 3})
	w := &wire{budget: 5}
	o.SetDirect(w.direct(t))
	first := []byte(`{"n":"first record"}`)
	o.PushDirect(first) // 5 bytes go out, the rest waits
	if o.Len() != 1 || w.buf.Len() != 5 {
		t.Fatalf("Len %d, wire %q", o.Len(), w.buf.String())
	}
	w.budget = 0 // the peer stops reading
	for i := 0; o.PushDirect(fmt.Appendf(nil, `{"n":%d}`, i)); i++ {
	}
	if !o.Overflowed() {
		t.Fatal("no overflow")
	}
	w.budget = -1
	for w.take(t, o) {
		w.done()
	}
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines) != 2 || lines[0] != string(first) || !strings.Contains(lines[1], outbox.SlowConsumerMessage) {
		t.Fatalf("wire = %q, want the first record whole, then the error event", w.buf.String())
	}
}

// TestDirectNotWhileWriting: records the writer took are being written:
// nothing is written directly until it asks for more.
func TestDirectNotWhileWriting(t *testing.T) {
	o := outbox.New(outbox.Limits{})
	w := &wire{budget: -1}
	o.SetDirect(w.direct(t))
	o.Hold([]byte("a"))
	if w.calls != 0 || o.Len() != 1 {
		t.Fatalf("Hold wrote: calls %d, Len %d", w.calls, o.Len())
	}
	w.take(t, o) // the writer has "a" and is writing it
	o.PushDirect([]byte("b"))
	o.FlushDirect()
	if w.calls != 0 || o.Len() != 1 {
		t.Fatalf("direct write while the writer writes: calls %d, Len %d", w.calls, o.Len())
	}
	w.done()
	w.take(t, o) // the writer's next turn: "b"
	w.done()
	if w.take(t, o) { // it asks for more: nothing (it would wait in Next)
		t.Fatal("records left")
	}
	o.PushDirect([]byte("c")) // idle writer, empty queue: written at once
	if w.calls != 1 || o.Len() != 0 {
		t.Fatalf("calls %d, Len %d", w.calls, o.Len())
	}
	if w.buf.String() != "a\nb\nc\n" {
		t.Fatalf("wire %q", w.buf.String())
	}
	// Closed: nothing is written directly any more, what is queued is
	// the writer's.
	o.Hold([]byte("d"))
	o.Close()
	o.FlushDirect()
	if w.calls != 1 {
		t.Fatal("direct write after Close")
	}
	w.take(t, o)
	if w.buf.String() != "a\nb\nc\nd\n" {
		t.Fatalf("wire %q", w.buf.String())
	}
}

// BenchmarkPushFlush: a burst of 16 records held then flushed, to a writer
// that is never needed (direct) or woken (Flush).
func BenchmarkPushFlush(b *testing.B) {
	rec := []byte(strings.Repeat("r", 300))
	for _, direct := range []bool{false, true} {
		b.Run(fmt.Sprint("direct=", direct), func(b *testing.B) {
			o := outbox.New(outbox.Limits{})
			o.SetDirect(func(recs [][]byte) int {
				n := 0
				for _, r := range recs {
					n += len(r) + 1
				}
				return n
			})
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for b.Loop() {
				for range 16 {
					o.Hold(rec)
				}
				if direct {
					o.FlushDirect()
				} else {
					o.Flush()
					o.Next(ctx)
				}
			}
		})
	}
}
