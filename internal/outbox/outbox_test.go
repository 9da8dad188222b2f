package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/internal/outbox"
)

// next calls Next with a context that is already cancelled, so it never
// blocks: it returns what is queued, or ok=false.
func next(t *testing.T, o *outbox.Outbox) ([]string, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	recs, ok := o.Next(ctx)
	return strs(recs), ok
}

func strs(recs [][]byte) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r))
	}
	return out
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// assertSlowConsumer checks the state of an Outbox that overflowed: it
// holds exactly the fatal slow-consumer error event, then ends.
func assertSlowConsumer(t *testing.T, o *outbox.Outbox) {
	t.Helper()
	if !o.Overflowed() || !o.Closed() {
		t.Errorf("Overflowed = %v, Closed = %v, want both true", o.Overflowed(), o.Closed())
	}
	if !isClosed(o.Slow()) {
		t.Error("Slow() is not closed after an overflow")
	}
	if o.Len() != 1 {
		t.Errorf("Len = %d, want 1 (the error event only)", o.Len())
	}
	if o.Push([]byte(`{"type":"late"}`)) {
		t.Error("Push after an overflow returned true")
	}
	recs, ok := next(t, o)
	if !ok || len(recs) != 1 {
		t.Fatalf("Next = %q, %v; want exactly the error event", recs, ok)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(recs[0]), &got); err != nil {
		t.Fatalf("error event %q: %v", recs[0], err)
	}
	want := map[string]any{"type": "error", "code": "INTERNAL_ERROR", "message": outbox.SlowConsumerMessage, "fatal": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("error event = %v, want %v", got, want)
	}
	if want := `{"type":"error","code":"INTERNAL_ERROR","message":"slow consumer","fatal":true}`; recs[0] != want {
		t.Errorf("error event = %s, want %s", recs[0], want)
	}
	if recs, ok := next(t, o); ok || recs != nil {
		t.Errorf("Next after the error event = %q, %v; want nil, false", recs, ok)
	}
}

func TestPushNextOrder(t *testing.T) {
	t.Parallel()
	o := outbox.New(outbox.Limits{})
	for _, r := range []string{"a", "b", "c"} {
		if !o.Push([]byte(r)) {
			t.Fatalf("Push(%s) = false", r)
		}
	}
	if o.Len() != 3 {
		t.Errorf("Len = %d, want 3", o.Len())
	}
	// Next returns the whole batch, oldest first.
	if recs, ok := o.Next(context.Background()); !ok || !reflect.DeepEqual(strs(recs), []string{"a", "b", "c"}) {
		t.Fatalf("Next = %q, %v; want [a b c], true", recs, ok)
	}
	if o.Len() != 0 {
		t.Errorf("Len after Next = %d, want 0", o.Len())
	}
	o.Push([]byte("d"))
	o.Push([]byte("e"))
	if recs, ok := next(t, o); !ok || !reflect.DeepEqual(recs, []string{"d", "e"}) {
		t.Fatalf("second Next = %q, %v; want [d e], true", recs, ok)
	}
	if recs, ok := next(t, o); ok || recs != nil {
		t.Errorf("Next on an empty Outbox with a done context = %q, %v; want nil, false", recs, ok)
	}
	if o.Closed() || o.Overflowed() || isClosed(o.Slow()) {
		t.Error("a healthy Outbox reports closed, overflowed or slow")
	}
}

func TestCaps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limits outbox.Limits
		fit    []string // pushes that fit
		over   string   // the push that overflows
	}{
		{"messages", outbox.Limits{MaxMessages: 3, MaxBytes: 1 << 20}, []string{"a", "b", "c"}, "d"},
		{"one message cap", outbox.Limits{MaxMessages: 1, MaxBytes: 100}, []string{"a"}, "b"},
		{"default message cap", outbox.Limits{}, repeat("m", 10000), "m"},
		{"negative limits take defaults", outbox.Limits{MaxMessages: -1, MaxBytes: -1}, repeat("m", 10000), "m"},
		// MaxBytes bounds what waits behind the head record: the head is
		// free, then exactly MaxBytes fits.
		{"bytes", outbox.Limits{MaxMessages: 100, MaxBytes: 10}, []string{"head", "1234", "5678", "90"}, "x"},
		{"bytes, partial fit", outbox.Limits{MaxMessages: 100, MaxBytes: 10}, []string{"h", "1234", "5678"}, "abc"},
		{"bytes, one record over the cap behind the head", outbox.Limits{MaxMessages: 100, MaxBytes: 10}, []string{"h"}, "12345678901"},
		{"bytes, oversized head is accepted", outbox.Limits{MaxMessages: 100, MaxBytes: 10}, []string{strings.Repeat("H", 100), "1234567890"}, "x"},
		{"default byte cap", outbox.Limits{}, []string{"h", strings.Repeat("x", 8<<20)}, "y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := outbox.New(tt.limits)
			for i, r := range tt.fit {
				if !o.Push([]byte(r)) {
					t.Fatalf("push %d of %d bytes = false, want true", i, len(r))
				}
			}
			if o.Overflowed() || isClosed(o.Slow()) {
				t.Fatal("overflowed before the cap")
			}
			if o.Push([]byte(tt.over)) {
				t.Fatal("push over the cap = true, want false")
			}
			assertSlowConsumer(t, o)
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestCapsCountQueuedOnly checks that records taken by Next no longer count
// against the caps.
func TestCapsCountQueuedOnly(t *testing.T) {
	t.Parallel()
	o := outbox.New(outbox.Limits{MaxMessages: 2, MaxBytes: 4})
	for round := range 5 {
		for _, r := range []string{"ab", "cd"} {
			if !o.Push([]byte(r)) {
				t.Fatalf("round %d: Push(%s) = false", round, r)
			}
		}
		if recs, ok := next(t, o); !ok || len(recs) != 2 {
			t.Fatalf("round %d: Next = %q, %v", round, recs, ok)
		}
	}
	if o.Overflowed() {
		t.Error("overflowed although the writer kept up")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	o := outbox.New(outbox.Limits{})
	o.Push([]byte("a"))
	o.Push([]byte("b"))
	o.Close()
	o.Close() // idempotent
	if !o.Closed() {
		t.Error("Closed = false after Close")
	}
	if o.Push([]byte("c")) {
		t.Error("Push after Close = true")
	}
	// Close drains: what was queued is still delivered, then Next ends.
	if recs, ok := o.Next(context.Background()); !ok || !reflect.DeepEqual(strs(recs), []string{"a", "b"}) {
		t.Fatalf("Next after Close = %q, %v; want [a b], true", recs, ok)
	}
	if recs, ok := o.Next(context.Background()); ok || recs != nil {
		t.Fatalf("Next on a drained, closed Outbox = %q, %v; want nil, false", recs, ok)
	}
	if o.Overflowed() || isClosed(o.Slow()) {
		t.Error("Close marked the Outbox as a slow consumer")
	}
}

func TestCloseAfterOverflow(t *testing.T) {
	t.Parallel()
	o := outbox.New(outbox.Limits{MaxMessages: 1})
	o.Push([]byte("a"))
	o.Push([]byte("b"))
	o.Close()
	assertSlowConsumer(t, o)
}

// TestNextWakes checks that a blocked Next returns on Push, on Close and on
// context cancellation. Whether Next is already blocked when the event
// happens does not change the outcome, so the test needs no sleeps.
func TestNextWakes(t *testing.T) {
	t.Parallel()
	type result struct {
		recs []string
		ok   bool
	}
	start := func(ctx context.Context, o *outbox.Outbox) <-chan result {
		ch := make(chan result, 1)
		go func() {
			recs, ok := o.Next(ctx)
			ch <- result{strs(recs), ok}
		}()
		return ch
	}
	t.Run("push", func(t *testing.T) {
		t.Parallel()
		o := outbox.New(outbox.Limits{})
		ch := start(context.Background(), o)
		o.Push([]byte("x"))
		if r := <-ch; !r.ok || !reflect.DeepEqual(r.recs, []string{"x"}) {
			t.Errorf("Next = %q, %v; want [x], true", r.recs, r.ok)
		}
	})
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		o := outbox.New(outbox.Limits{})
		ch := start(context.Background(), o)
		o.Close()
		if r := <-ch; r.ok || r.recs != nil {
			t.Errorf("Next = %q, %v; want nil, false", r.recs, r.ok)
		}
	})
	t.Run("context", func(t *testing.T) {
		t.Parallel()
		o := outbox.New(outbox.Limits{})
		ctx, cancel := context.WithCancel(context.Background())
		ch := start(ctx, o)
		cancel()
		if r := <-ch; r.ok || r.recs != nil {
			t.Errorf("Next = %q, %v; want nil, false", r.recs, r.ok)
		}
		// The Outbox itself is still usable.
		if !o.Push([]byte("y")) {
			t.Fatal("Push after a cancelled Next = false")
		}
		if recs, ok := next(t, o); !ok || !reflect.DeepEqual(recs, []string{"y"}) {
			t.Errorf("Next = %q, %v; want [y], true", recs, ok)
		}
	})
}

// TestConcurrentPushers runs many producers against one consumer under the
// cap: nothing is lost and each producer's records stay in order.
func TestConcurrentPushers(t *testing.T) {
	t.Parallel()
	const producers, perProducer = 8, 500
	o := outbox.New(outbox.Limits{MaxMessages: producers * perProducer})
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				if !o.Push(fmt.Appendf(nil, "%d/%d", p, i)) {
					t.Errorf("producer %d: Push %d = false", p, i)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); o.Close(); close(done) }()

	nextIdx := make([]int, producers)
	total := 0
	for {
		recs, ok := o.Next(context.Background())
		if !ok {
			break
		}
		for _, r := range recs {
			var p, i int
			if _, err := fmt.Sscanf(string(r), "%d/%d", &p, &i); err != nil {
				t.Fatalf("bad record %q", r)
			}
			if i != nextIdx[p] {
				t.Fatalf("producer %d: got record %d, want %d", p, i, nextIdx[p])
			}
			nextIdx[p]++
			total++
		}
	}
	<-done
	if total != producers*perProducer {
		t.Errorf("received %d records, want %d", total, producers*perProducer)
	}
	if o.Overflowed() {
		t.Error("overflowed under the cap")
	}
}

// TestConcurrentOverflow makes many producers overflow a stalled Outbox at
// once: exactly one overflow happens and the queue ends with one event.
func TestConcurrentOverflow(t *testing.T) {
	t.Parallel()
	const producers, perProducer, limit = 8, 100, 50
	o := outbox.New(outbox.Limits{MaxMessages: limit})
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for range producers {
		wg.Go(func() {
			for range perProducer {
				if o.Push([]byte("r")) {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if accepted != limit {
		t.Errorf("accepted %d pushes, want exactly the cap %d", accepted, limit)
	}
	assertSlowConsumer(t, o)
}
