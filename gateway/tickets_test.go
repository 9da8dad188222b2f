package gateway

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/clock"
)

// fakeClock is a settable clock.Clock for NewTickets and newLimiter; safe
// for concurrent use. Unlike clock.Manual it can be set back, to check that
// a clock going back revives nothing.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements clock.Clock. Tickets and limiters only read the
// time, so a timer armed here is a bug of the code under test.
func (c *fakeClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("gateway: fakeClock: unexpected timer")
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func newTestTickets(ttl time.Duration) (*Tickets, *fakeClock) {
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return NewTickets(ttl, clk), clk
}

func TestTicketMintConsumeOnce(t *testing.T) {
	t.Parallel()
	tk, clk := newTestTickets(time.Minute)
	ticket, exp := tk.Mint()
	if want := clk.Now().Add(time.Minute); !exp.Equal(want) {
		t.Errorf("expiry = %v, want now+ttl = %v", exp, want)
	}
	if !tk.Consume(ticket) {
		t.Fatal("Consume of a fresh ticket = false")
	}
	if tk.Consume(ticket) {
		t.Fatal("replayed ticket accepted")
	}
}

func TestTicketIndependent(t *testing.T) {
	t.Parallel()
	tk, _ := newTestTickets(time.Minute)
	a, _ := tk.Mint()
	b, _ := tk.Mint()
	if a == b {
		t.Fatal("two mints returned the same ticket")
	}
	// Consuming one leaves the other valid, in any order.
	if !tk.Consume(b) || !tk.Consume(a) {
		t.Fatal("Consume of two fresh tickets failed")
	}
}

func TestTicketExpiry(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	tests := []struct {
		name  string
		after time.Duration
		want  bool
	}{
		{"immediately", 0, true},
		{"just before expiry", ttl - time.Nanosecond, true},
		{"at expiry", ttl, false},
		{"after expiry", ttl + time.Second, false},
		{"long after", 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk, clk := newTestTickets(ttl)
			t0 := clk.Now()
			ticket, _ := tk.Mint()
			clk.Set(t0.Add(tt.after))
			if got := tk.Consume(ticket); got != tt.want {
				t.Fatalf("Consume %v after minting = %v, want %v", tt.after, got, tt.want)
			}
			// Whatever the outcome, the ticket is spent: even a clock that
			// goes back does not revive it.
			clk.Set(t0)
			if tk.Consume(ticket) {
				t.Fatal("ticket accepted a second time")
			}
		})
	}
}

func TestTicketZeroTTL(t *testing.T) {
	t.Parallel()
	tk, _ := newTestTickets(0)
	ticket, _ := tk.Mint()
	if tk.Consume(ticket) {
		t.Fatal("a ticket with a zero TTL was accepted")
	}
}

func TestTicketRejects(t *testing.T) {
	t.Parallel()
	tk, _ := newTestTickets(time.Minute)
	other, _ := newTestTickets(time.Minute)
	ticket, _ := tk.Mint()
	foreign, _ := other.Mint()
	flip := []byte(ticket)
	if flip[0] == 'A' {
		flip[0] = 'B'
	} else {
		flip[0] = 'A'
	}
	for name, bad := range map[string]string{
		"empty":            "",
		"garbage":          "not-a-ticket",
		"one char off":     string(flip),
		"prefix":           ticket[:len(ticket)-1],
		"extended":         ticket + "A",
		"upper-cased":      strings.ToUpper(ticket),
		"padded":           ticket + "=",
		"surrounded":       " " + ticket + " ",
		"from other store": foreign,
	} {
		if bad == ticket {
			continue // ToUpper of an all-upper ticket; astronomically unlikely
		}
		if tk.Consume(bad) {
			t.Errorf("%s: Consume(%q) = true", name, bad)
		}
	}
	// Failed attempts do not spend the real ticket.
	if !tk.Consume(ticket) {
		t.Fatal("the real ticket was spent by wrong guesses")
	}
}

var urlSafe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func TestTicketFormat(t *testing.T) {
	t.Parallel()
	tk, _ := newTestTickets(time.Minute)
	seen := make(map[string]bool)
	for range 1000 {
		ticket, _ := tk.Mint()
		if !urlSafe.MatchString(ticket) || url.QueryEscape(ticket) != ticket {
			t.Fatalf("ticket %q is not URL-safe", ticket)
		}
		raw, err := base64.RawURLEncoding.DecodeString(ticket)
		if err != nil {
			t.Fatalf("ticket %q is not unpadded base64url: %v", ticket, err)
		}
		if len(raw) < 32 {
			t.Fatalf("ticket carries %d random bytes, want at least 32", len(raw))
		}
		if seen[ticket] {
			t.Fatalf("ticket %q minted twice", ticket)
		}
		seen[ticket] = true
	}
}

// TestTicketsForgetExpired checks that the store does not grow without
// bound with tickets nobody consumes.
func TestTicketsForgetExpired(t *testing.T) {
	t.Parallel()
	tk, clk := newTestTickets(time.Minute)
	t0 := clk.Now()
	for range 100 {
		tk.Mint()
	}
	clk.Set(t0.Add(time.Minute))
	live, _ := tk.Mint()
	tk.mu.Lock()
	n := len(tk.issued)
	tk.mu.Unlock()
	if n != 1 {
		t.Errorf("store holds %d tickets after the others expired, want 1", n)
	}
	if !tk.Consume(live) {
		t.Error("the live ticket was dropped")
	}
}

func TestTicketsDefaultClock(t *testing.T) {
	t.Parallel()
	tk := NewTickets(time.Hour, nil)
	before := time.Now()
	ticket, exp := tk.Mint()
	if exp.Before(before.Add(time.Hour)) || exp.After(time.Now().Add(time.Hour)) {
		t.Errorf("expiry %v is not about an hour from now", exp)
	}
	if !tk.Consume(ticket) {
		t.Error("Consume with the real clock = false")
	}
}

// TestTicketsConcurrent mints and consumes from many goroutines at once:
// every ticket is accepted exactly once.
func TestTicketsConcurrent(t *testing.T) {
	t.Parallel()
	tk, _ := newTestTickets(time.Minute)
	const minters, perMinter, consumers = 8, 200, 4
	tickets := make(chan string)
	var minted sync.WaitGroup
	for range minters {
		minted.Go(func() {
			for range perMinter {
				ticket, _ := tk.Mint()
				tickets <- ticket
			}
		})
	}
	go func() { minted.Wait(); close(tickets) }()

	var mu sync.Mutex
	accepted := make(map[string]bool)
	var consumed sync.WaitGroup
	for range consumers {
		consumed.Go(func() {
			for ticket := range tickets {
				first, second := tk.Consume(ticket), tk.Consume(ticket)
				mu.Lock()
				if !first || second || accepted[ticket] {
					t.Errorf("ticket %q: first Consume %v, second %v, seen before %v", ticket, first, second, accepted[ticket])
				}
				accepted[ticket] = true
				mu.Unlock()
			}
		})
	}
	consumed.Wait()
	if len(accepted) != minters*perMinter {
		t.Errorf("%d distinct tickets accepted, want %d", len(accepted), minters*perMinter)
	}
}

// TestTicketsConsumeRace has two consumers race for every ticket: exactly
// one wins each.
func TestTicketsConsumeRace(t *testing.T) {
	t.Parallel()
	tk, _ := newTestTickets(time.Minute)
	all := make([]string, 500)
	for i := range all {
		all[i], _ = tk.Mint()
	}
	wins := make([][]bool, 2)
	var wg sync.WaitGroup
	for c := range wins {
		wins[c] = make([]bool, len(all))
		wg.Go(func() {
			for i, ticket := range all {
				wins[c][i] = tk.Consume(ticket)
			}
		})
	}
	wg.Wait()
	for i := range all {
		if wins[0][i] == wins[1][i] {
			t.Fatalf("ticket %d: consumer wins %v and %v, want exactly one", i, wins[0][i], wins[1][i])
		}
	}
}
