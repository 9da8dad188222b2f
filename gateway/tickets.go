package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/shard-dev/shard/internal/clock"
)

// TicketBinding is what a WS ticket was minted for (docs/protocol.md §4.1). A
// ticket minted by /bootstrap is bound to the browser's principal, session
// and exact serialized Origin; one minted by ws.ticket over the unix socket
// binds nothing, and so is valid only on an upgrade that carries no Origin (a
// non-browser local client).
type TicketBinding struct {
	// Origin is the exact Origin header the upgrade must carry; "" means
	// none.
	Origin      string
	PrincipalID string
	SessionID   string
}

// Tickets issues and consumes single-use WebSocket upgrade tickets. Only a
// SHA-256 of each ticket is kept, and tickets are never logged. It is safe
// for concurrent use.
type Tickets struct {
	oneTime[TicketBinding]
}

// NewTickets returns a ticket store whose tickets live for ttl, read on
// clk (nil: the wall clock; tests pass a manual one to expire tickets
// without waiting).
func NewTickets(ttl time.Duration, clk clock.Clock) *Tickets {
	return &Tickets{newOneTime[TicketBinding](ttl, clk)}
}

// Mint returns a fresh ticket bound to nothing (ws.ticket) and its expiry.
func (t *Tickets) Mint() (string, time.Time) { return t.mint(TicketBinding{}) }

// MintBound returns a fresh ticket bound to b and its expiry.
func (t *Tickets) MintBound(b TicketBinding) (string, time.Time) { return t.mint(b) }

// Consume reports whether ticket is valid, and invalidates it: a ticket
// works once, before its expiry.
func (t *Tickets) Consume(ticket string) bool {
	_, ok := t.take(ticket)
	return ok
}

// Take is Consume that also returns what the ticket is bound to. A ticket
// presented is spent whatever the caller decides next, so one presented
// with the wrong Origin cannot be retried with the right one.
func (t *Tickets) Take(ticket string) (TicketBinding, bool) { return t.take(ticket) }

// oneTime holds single-use random secrets, each with a value of type T,
// by the SHA-256 of the secret. It is safe for concurrent use.
type oneTime[T any] struct {
	ttl time.Duration
	clk clock.Clock

	// mu protects issued.
	mu     sync.Mutex
	issued map[[sha256.Size]byte]grant[T] // hash → expiry and value
}

type grant[T any] struct {
	exp time.Time
	val T
}

// newOneTime returns an empty set whose secrets live for ttl on clk (nil:
// the wall clock).
func newOneTime[T any](ttl time.Duration, clk clock.Clock) oneTime[T] {
	return oneTime[T]{ttl: ttl, clk: clock.Or(clk), issued: make(map[[sha256.Size]byte]grant[T])}
}

// randomSecret returns 32 random bytes, base64url without padding.
func randomSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("gateway: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (o *oneTime[T]) mint(v T) (string, time.Time) {
	secret := randomSecret()
	now := o.clk.Now()
	exp := now.Add(o.ttl)
	o.mu.Lock()
	defer o.mu.Unlock()
	for h, g := range o.issued { // expired secrets are forgotten as new ones are minted
		if !now.Before(g.exp) {
			delete(o.issued, h)
		}
	}
	o.issued[sha256.Sum256([]byte(secret))] = grant[T]{exp: exp, val: v}
	return secret, exp
}

func (o *oneTime[T]) take(secret string) (T, bool) {
	var zero T
	if secret == "" {
		return zero, false
	}
	h := sha256.Sum256([]byte(secret))
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.issued[h]
	if !ok {
		return zero, false
	}
	delete(o.issued, h)
	if !o.clk.Now().Before(g.exp) {
		return zero, false
	}
	return g.val, true
}
