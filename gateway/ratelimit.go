package gateway

import (
	"net/netip"
	"sync"
	"time"

	"github.com/shard-dev/shard/internal/clock"
)

// RateLimit is a token bucket: Burst attempts at once, then one more every
// Every. The zero value means the gateway's default for the endpoint.
type RateLimit struct {
	Burst int
	Every time.Duration
}

// maxLimiterPeers bounds the peers a limiter remembers; past it, peers it
// has no bucket for share one.
const maxLimiterPeers = 1024

// limiter rate-limits attempts per peer address and Origin. X-Forwarded-For
// is never consulted, so behind a reverse proxy every browser shares the
// proxy's bucket.
//
// The web handlers charge it only after the Origin check passed (if
// charged before, any web page the user visits could spend the loopback
// bucket with requests that were then refused for their Origin, and lock
// the real page out). The bucket is keyed by the origin too, so that, in
// remote mode with several allowed origins behind one proxy, one origin's
// attempts never spend another's. Only allowed origins reach it, so the
// key space stays the peers times the allowlist. It is safe for
// concurrent use.
type limiter struct {
	burst float64
	every time.Duration
	clk   clock.Clock

	// mu protects buckets.
	mu      sync.Mutex
	buckets map[bucketKey]*tokenBucket
}

// bucketKey names one bucket: a peer address and the (allowed) origin its
// request carried.
type bucketKey struct {
	peer   netip.Addr
	origin string
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

// newLimiter returns a limiter that refills on clk (nil: the wall clock).
func newLimiter(rl RateLimit, clk clock.Clock) *limiter {
	return &limiter{burst: float64(rl.Burst), every: rl.Every, clk: clock.Or(clk), buckets: make(map[bucketKey]*tokenBucket)}
}

// allow takes one token from the bucket of peer and origin. When there is
// none it returns false and how long until there will be.
func (l *limiter) allow(peer netip.Addr, origin string) (bool, time.Duration) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(bucketKey{peer, origin}, now)
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.last))/float64(l.every))
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(l.every))
}

// bucketLocked returns key's bucket, creating a full one. mu must be held.
func (l *limiter) bucketLocked(key bucketKey, now time.Time) *tokenBucket {
	if b, ok := l.buckets[key]; ok {
		return b
	}
	if len(l.buckets) >= maxLimiterPeers {
		for p, b := range l.buckets { // full buckets carry no state worth keeping
			if b.tokens+float64(now.Sub(b.last))/float64(l.every) >= l.burst {
				delete(l.buckets, p)
			}
		}
		if len(l.buckets) >= maxLimiterPeers {
			key = bucketKey{} // the shared overflow bucket
			if b, ok := l.buckets[key]; ok {
				return b
			}
		}
	}
	b := &tokenBucket{tokens: l.burst, last: now}
	l.buckets[key] = b
	return b
}
