package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// Tickets issues and consumes single-use WebSocket upgrade tickets. Only a
// SHA-256 of each ticket is kept, and tickets are never logged. It is safe
// for concurrent use.
type Tickets struct {
	ttl time.Duration
	now func() time.Time

	// mu protects issued.
	mu     sync.Mutex
	issued map[[sha256.Size]byte]time.Time // hash → expiry
}

// NewTickets returns a ticket store whose tickets live for ttl. now may be
// nil (time.Now).
func NewTickets(ttl time.Duration, now func() time.Time) *Tickets {
	if now == nil {
		now = time.Now
	}
	return &Tickets{ttl: ttl, now: now, issued: make(map[[sha256.Size]byte]time.Time)}
}

// Mint returns a fresh ticket and its expiry.
func (t *Tickets) Mint() (string, time.Time) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("gateway: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	ticket := base64.RawURLEncoding.EncodeToString(b[:])
	now := t.now()
	exp := now.Add(t.ttl)
	t.mu.Lock()
	defer t.mu.Unlock()
	for h, e := range t.issued { // expired tickets are forgotten as new ones are minted
		if !now.Before(e) {
			delete(t.issued, h)
		}
	}
	t.issued[sha256.Sum256([]byte(ticket))] = exp
	return ticket, exp
}

// Consume reports whether ticket is valid, and invalidates it: a ticket
// works once, before its expiry.
func (t *Tickets) Consume(ticket string) bool {
	if ticket == "" {
		return false
	}
	h := sha256.Sum256([]byte(ticket))
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.issued[h]
	if !ok {
		return false
	}
	delete(t.issued, h)
	return t.now().Before(exp)
}
