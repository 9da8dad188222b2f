package gateway

import (
	"net/netip"
	"testing"
	"time"
)

// origin is the allowed origin the limiter tests charge.
const origin = "http://127.0.0.1:7420"

func TestLimiterBurstThenRate(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := newLimiter(RateLimit{Burst: 3, Every: 10 * time.Second}, clk)
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	for i := range 3 {
		if ok, _ := l.allow(a, origin); !ok {
			t.Fatalf("attempt %d refused within the burst", i+1)
		}
	}
	ok, wait := l.allow(a, origin)
	if ok || wait <= 0 || wait > 10*time.Second {
		t.Fatalf("fourth attempt: ok %v, wait %v; want refused with a wait of at most 10s", ok, wait)
	}
	if ok, _ := l.allow(b, origin); !ok {
		t.Fatal("another peer was refused: buckets are per peer")
	}
	clk.Set(clk.Now().Add(10 * time.Second))
	if ok, _ := l.allow(a, origin); !ok {
		t.Fatal("a token did not come back after one interval")
	}
	if ok, _ := l.allow(a, origin); ok {
		t.Fatal("two tokens came back after one interval")
	}
	clk.Set(clk.Now().Add(time.Hour))
	for i := range 3 {
		if ok, _ := l.allow(a, origin); !ok {
			t.Fatalf("after a long pause, attempt %d refused: the bucket refills to the burst", i+1)
		}
	}
	if ok, _ := l.allow(a, origin); ok {
		t.Fatal("the bucket refilled beyond its burst")
	}
}

// TestLimiterBounded: many peers cannot grow the limiter without bound;
// past the cap, unknown peers share one bucket.
func TestLimiterBounded(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := newLimiter(RateLimit{Burst: 1, Every: time.Hour}, clk)
	for i := range maxLimiterPeers {
		l.allow(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), origin)
	}
	extra := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 9, 0, byte(i)}) }
	if ok, _ := l.allow(extra(1), origin); !ok {
		t.Fatal("the first peer past the cap was refused: it gets the shared bucket's token")
	}
	if ok, _ := l.allow(extra(2), origin); ok {
		t.Fatal("a second peer past the cap got its own bucket")
	}
	if n := len(l.buckets); n > maxLimiterPeers+1 {
		t.Fatalf("limiter holds %d buckets", n)
	}
	// Once the buckets are full again they are forgotten to make room.
	clk.Set(clk.Now().Add(2 * time.Hour))
	if ok, _ := l.allow(extra(3), origin); !ok {
		t.Fatal("a new peer was refused after every bucket refilled")
	}
	if n := len(l.buckets); n > 2 {
		t.Fatalf("full buckets were not pruned: %d left", n)
	}
}

// TestLimiterKeyedByOrigin: one peer's attempts from one origin never spend
// its bucket for another origin (remote mode, several allowed origins
// behind one proxy).
func TestLimiterKeyedByOrigin(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := newLimiter(RateLimit{Burst: 2, Every: time.Hour}, clk)
	peer := netip.MustParseAddr("127.0.0.1")
	for range 2 {
		l.allow(peer, "https://other.example")
	}
	if ok, _ := l.allow(peer, "https://other.example"); ok {
		t.Fatal("the other origin's bucket was not spent")
	}
	for i := range 2 {
		if ok, _ := l.allow(peer, origin); !ok {
			t.Fatalf("attempt %d from the right origin refused: another origin spent its bucket", i+1)
		}
	}
}
