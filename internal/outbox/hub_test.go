package outbox_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/shard-dev/shard/internal/outbox"
)

func TestHubBroadcast(t *testing.T) {
	t.Parallel()
	h := outbox.NewHub()
	if h.Len() != 0 {
		t.Fatalf("new Hub Len = %d", h.Len())
	}
	a, b, c := outbox.New(outbox.Limits{}), outbox.New(outbox.Limits{}), outbox.New(outbox.Limits{})
	h.Add(a)
	h.Add(b)
	h.Add(c)
	h.Add(c) // adding twice registers once
	if h.Len() != 3 {
		t.Fatalf("Len = %d, want 3", h.Len())
	}
	h.Broadcast([]byte("one"))
	for i, o := range []*outbox.Outbox{a, b, c} {
		if recs, ok := next(t, o); !ok || !reflect.DeepEqual(recs, []string{"one"}) {
			t.Errorf("outbox %d: Next = %q, %v; want [one]", i, recs, ok)
		}
	}

	h.Remove(b)
	h.Remove(b) // removing twice is harmless
	if h.Len() != 2 {
		t.Fatalf("Len after Remove = %d, want 2", h.Len())
	}
	h.Broadcast([]byte("two"))
	if b.Len() != 0 {
		t.Errorf("removed outbox received %d records", b.Len())
	}
	for i, o := range []*outbox.Outbox{a, c} {
		if recs, ok := next(t, o); !ok || !reflect.DeepEqual(recs, []string{"two"}) {
			t.Errorf("outbox %d: Next = %q, %v; want [two]", i, recs, ok)
		}
	}
}

// TestHubSlowConsumer checks that a stalled connection is cut off by its
// own Outbox while broadcasts keep reaching everyone else.
func TestHubSlowConsumer(t *testing.T) {
	t.Parallel()
	h := outbox.NewHub()
	slow := outbox.New(outbox.Limits{MaxMessages: 2})
	fast := outbox.New(outbox.Limits{MaxMessages: 2})
	h.Add(slow)
	h.Add(fast)
	const n = 100
	for i := range n {
		h.Broadcast(fmt.Appendf(nil, "%d", i)) // never blocks, even on the stalled one
		if recs, ok := next(t, fast); !ok || !reflect.DeepEqual(recs, []string{fmt.Sprint(i)}) {
			t.Fatalf("fast outbox: Next = %q, %v; want [%d]", recs, ok, i)
		}
	}
	assertSlowConsumer(t, slow)
	if fast.Overflowed() {
		t.Error("the fast consumer overflowed")
	}
}

// TestHubConcurrent exercises Add, Remove and Broadcast together under the
// race detector; a member that stays registered throughout receives every
// broadcast in order.
func TestHubConcurrent(t *testing.T) {
	t.Parallel()
	h := outbox.NewHub()
	stable := outbox.New(outbox.Limits{})
	h.Add(stable)
	const n = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			h.Broadcast(fmt.Appendf(nil, "%d", i))
		}
	})
	wg.Go(func() {
		for range n {
			o := outbox.New(outbox.Limits{MaxMessages: 1})
			h.Add(o)
			_ = h.Len()
			h.Remove(o)
		}
	})
	wg.Wait()
	stable.Close()
	var got []string
	for {
		recs, ok := stable.Next(context.Background())
		if !ok {
			break
		}
		got = append(got, strs(recs)...)
	}
	if len(got) != n {
		t.Fatalf("stable member received %d broadcasts, want %d", len(got), n)
	}
	for i, r := range got {
		if r != fmt.Sprint(i) {
			t.Fatalf("broadcast %d = %q, out of order", i, r)
		}
	}
}
