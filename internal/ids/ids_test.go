package ids

import (
	"regexp"
	"sync"
	"testing"
	"time"
)

// idPattern is a prefix, a dash and a 26-character lowercase Crockford
// base32 ULID.
var idPattern = regexp.MustCompile(`^([a-z]+)-[0-9a-hjkmnp-tv-z]{26}$`)

func TestNewFormat(t *testing.T) {
	for _, prefix := range []string{Agent, Session, Job, Run} {
		id := New(prefix)
		m := idPattern.FindStringSubmatch(id)
		if m == nil {
			t.Fatalf("New(%q) = %q, want %q + \"-\" + lowercase ULID", prefix, id, prefix)
		}
		if m[1] != prefix {
			t.Errorf("New(%q) = %q: prefix %q", prefix, id, m[1])
		}
		if !HasPrefix(id, prefix) {
			t.Errorf("HasPrefix(%q, %q) = false", id, prefix)
		}
	}
}

func TestNewSortsByTime(t *testing.T) {
	first := New(Job)
	time.Sleep(2 * time.Millisecond)
	second := New(Job)
	if first >= second {
		t.Fatalf("id minted later sorts first: %q >= %q", first, second)
	}
}

func TestNewConcurrentUnique(t *testing.T) {
	const workers, each = 8, 500
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		all = make(map[string]bool, workers*each)
	)
	for range workers {
		wg.Go(func() {
			local := make([]string, 0, each)
			for range each {
				local = append(local, New(Run))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				all[id] = true
			}
		})
	}
	wg.Wait()
	if len(all) != workers*each {
		t.Fatalf("got %d distinct ids, want %d", len(all), workers*each)
	}
}

func TestHasPrefix(t *testing.T) {
	tests := []struct {
		id, prefix string
		want       bool
	}{
		{"agent-01j9z7k3m2x4q8r6t0v5w1y3b7", "agent", true},
		{"sess-01j9z7k3m2x4q8r6t0v5w1y3b7", "agent", false},
		{"agentx-01j9z7k3m2x4q8r6t0v5w1y3b7", "agent", false},
		{"agent01j9z7k3m2x4q8r6t0v5w1y3b7", "agent", false},
		{"agent-", "agent", false},
		{"", "agent", false},
	}
	for _, tt := range tests {
		if got := HasPrefix(tt.id, tt.prefix); got != tt.want {
			t.Errorf("HasPrefix(%q, %q) = %v, want %v", tt.id, tt.prefix, got, tt.want)
		}
	}
}
