package cluster

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestOutageDeclaresNoLiveNode: while the membership bucket's stream has
// no leader (its node crashed or was cut off) no node can heartbeat, and
// this node's view is stale. When its own heartbeat comes back first, a
// live node whose retry has not landed yet must not be judged silent by
// the outage: its silence counts from when the view became current again.
// A node that stays silent a lease after that is dead.
func TestOutageDeclaresNoLiveNode(t *testing.T) {
	const lease = 3 * time.Second
	m := &membership{self: "n2", lease: lease, log: slog.New(slog.DiscardHandler),
		seen: map[string]*observed{}, dead: map[string]DeadRecord{}, fired: map[string]bool{}, changed: make(chan struct{})}
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	rev := uint64(0)
	put := func(node string, at time.Time) {
		rev++
		b, err := json.Marshal(Record{Node: node, Incarnation: 1, HeartbeatAt: at, LeaseMS: lease.Milliseconds()})
		if err != nil {
			t.Fatal(err)
		}
		m.applyNode(nodeKey(node), true, b, rev, at)
	}
	health := func(node string, now time.Time) Health {
		for _, mb := range m.list(now) {
			if mb.Node == node {
				return mb.Health
			}
		}
		t.Fatalf("%s not listed", node)
		return ""
	}
	put("n2", t0)
	put("n1", t0)
	m.loaded(t0)

	// The stream is down for five seconds: no heartbeat lands. The view
	// is stale, so nobody is dead.
	if h := health("n1", t0.Add(5*time.Second)); h == HealthDead {
		t.Fatalf("n1 dead on a stale view")
	}
	// This node's heartbeat lands first: the view is current, n1's retry
	// has not landed yet; n1 is not dead, and a sweep would not declare it.
	back := t0.Add(5 * time.Second)
	put("n2", back)
	now := back.Add(100 * time.Millisecond)
	if h := health("n1", now); h == HealthDead {
		t.Fatalf("n1, silent through the outage, is dead %s after the view came back", now.Sub(back))
	}
	m.mu.Lock()
	silent := m.silentLocked(m.seen["n1"], now)
	m.mu.Unlock()
	if silent {
		t.Fatal("a sweep would declare n1 dead")
	}
	// n1 stays silent past a lease after the view came back: dead.
	put("n2", back.Add(lease/3))
	put("n2", back.Add(2*lease/3))
	put("n2", back.Add(lease))
	if h := health("n1", back.Add(lease+200*time.Millisecond)); h != HealthDead {
		t.Fatalf("n1 silent a lease after the outage: %s, want dead", h)
	}
	// A node heard from after the outage is judged from that heartbeat.
	put("n3", back.Add(lease))
	if h := health("n3", back.Add(lease+lease/4)); h != HealthAlive {
		t.Fatalf("n3 just heard from: %s", h)
	}
}
