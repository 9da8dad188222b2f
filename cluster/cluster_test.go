package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/testhost"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testhost.WithHome(m)) // nothing reads the developer's home
}

// allAlive is a condition: every named node is alive.
func allAlive(nodes ...string) func([]Member) bool {
	return func(ms []Member) bool {
		for _, n := range nodes {
			if h, _ := health(ms, n); h != HealthAlive {
				return false
			}
		}
		return true
	}
}

// TestThreeNodesFormACluster: three nodes on loopback with port -1 form
// one JetStream cluster, every node sees the three alive with the load
// and capacity each reports and the client addresses set on it, the
// bucket is replicated three times and written with sync always.
func TestThreeNodesFormACluster(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.modify = func(i int, c *Config) {
		if i == 0 {
			c.Hooks.Load = func() Load { return Load{ActiveAgents: 4, ActiveRuns: 2} }
			c.Capacity = Capacity{MaxActiveRuns: 8}
		}
	}
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}
	waitFor(t, h.node(2), "n1's load and capacity", func(ms []Member) bool {
		for _, m := range ms {
			if m.Node == "n1" {
				return m.Load == Load{ActiveAgents: 4, ActiveRuns: 2} && m.Capacity.MaxActiveRuns == 8
			}
		}
		return false
	})
	// Addresses set after Start reach the others with the next
	// heartbeat, which SetAddrs brings forward.
	addrs := Addrs{Socket: "/run/n1/daemon.sock", Web: "http://127.0.0.1:7421"}
	h.node(0).SetAddrs(addrs)
	waitFor(t, h.node(2), "n1's addresses", func(ms []Member) bool {
		for _, m := range ms {
			if m.Node == "n1" {
				return m.Addrs == addrs
			}
		}
		return false
	})
	n1 := h.node(0)
	if got := n1.Incarnation(); got != 1 {
		t.Errorf("first incarnation = %d, want 1", got)
	}
	kv, err := n1.JetStream().KeyValue(context.Background(), NodesBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; r != 3 {
		t.Errorf("bucket replicas = %d, want 3", r)
	}
	if !n1.srv.JetStreamConfig().SyncAlways {
		t.Error("JetStream does not sync always: an acked write could be lost")
	}
	for _, m := range n1.Members() {
		if m.Version != "test" || m.LeaseMS != testLease.Milliseconds() || m.StartedAt.IsZero() {
			t.Errorf("record %+v: want version, lease and start time", m.Record)
		}
	}
}

// TestURLModeJoinsExistingCluster: a node that embeds no server joins
// through a cluster node's client port with the token, heartbeats like
// the others, and closes cleanly.
func TestURLModeJoinsExistingCluster(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.modify = func(i int, c *Config) {
		if i == 0 {
			c.ClientListen = "127.0.0.1:-1"
		}
	}
	h.startAll()
	url := h.node(0).ClientURL()
	if url == "" {
		t.Fatal("n1 has no client URL")
	}
	cfg := Config{Node: "ext", URL: url, Token: h.token, Lease: testLease, ReadyTimeout: waitLimit}
	cfg.Token = "wrong-token-9876543210"
	cfg.ReadyTimeout = testLease
	if n, err := Start(context.Background(), cfg, testLogger(t, "ext")); err == nil {
		n.Close()
		t.Fatal("joined through the client port with a wrong token")
	}
	cfg.Token, cfg.ReadyTimeout = h.token, waitLimit
	ext, err := Start(context.Background(), cfg, testLogger(t, "ext"))
	if err != nil {
		t.Fatalf("start in URL mode: %v", err)
	}
	if ext.RouteAddr() != nil || ext.srv != nil {
		t.Error("a URL-mode node embeds a server")
	}
	for i := range 3 {
		waitFor(t, h.node(i), "ext alive", allAlive("n1", "n2", "n3", "ext"))
	}
	waitFor(t, ext, "everyone alive", allAlive("n1", "n2", "n3", "ext"))
	ext.Close()
	ext.Close()
	select {
	case <-ext.Done():
	default:
		t.Error("Done is open after Close")
	}
}

// TestDeadNodeDeclaredOnceAndRejoins: node 3 crashes; exactly one of
// nodes 1 and 2 declares its incarnation dead, once across the cluster;
// node 3 restarted on its store comes back as incarnation 2, finds
// incarnation 1 declared, and is alive everywhere.
func TestDeadNodeDeclaredOnceAndRejoins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}

	h.crash(2)
	// Both survivors see the declaration (whoever made it): after that,
	// neither can declare incarnation 1 again (the key exists), so the
	// count below is final.
	declared := func(ms []Member) bool {
		for _, m := range ms {
			if m.Node == "n3" && m.Incarnation == 1 {
				return m.Health == HealthDead && m.DeclaredBy != ""
			}
		}
		return false
	}
	waitFor(t, h.node(0), "n3 declared dead", declared)
	waitFor(t, h.node(1), "n3 declared dead", declared)
	h.mu.Lock()
	deaths := append([]death(nil), h.deaths...)
	h.mu.Unlock()
	var n3 []death
	for _, d := range deaths {
		if d.node == "n3" {
			n3 = append(n3, d)
		}
	}
	if len(n3) != 1 || n3[0].incarnation != 1 || (n3[0].by != "n1" && n3[0].by != "n2") {
		t.Fatalf("OnNodeDead for n3 = %+v, want once, incarnation 1, by n1 or n2", n3)
	}
	declarer := n3[0].by

	if err := h.start(2); err != nil {
		t.Fatalf("restart n3: %v", err)
	}
	if got := h.node(2).Incarnation(); got != 2 {
		t.Errorf("restarted incarnation = %d, want 2", got)
	}
	rejoins := h.rejoinsOf("n3")
	if want := (Rejoin{Previous: 1, Incarnation: 2, DeclaredBy: declarer}); len(rejoins) != 1 || rejoins[0] != want {
		t.Errorf("OnRejoin = %+v, want [%+v]", rejoins, want)
	}
	for i := range 3 {
		waitFor(t, h.node(i), "n3 alive as incarnation 2", func(ms []Member) bool {
			hl, inc := health(ms, "n3")
			return hl == HealthAlive && inc == 2 && allAlive("n1", "n2")(ms)
		})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.deaths {
		if d.node == "n3" && d.incarnation == 1 && d != n3[0] {
			t.Errorf("another OnNodeDead for n3: %+v", d)
		}
	}
}

// TestRestartBeforeDeclaredClaimsItsOwnIncarnation: a node that comes
// back before anyone declared it settles its previous incarnation
// itself, so no survivor declares it later and it is reconciled once.
func TestRestartBeforeDeclaredClaimsItsOwnIncarnation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}
	h.node(2).Close()
	if err := h.start(2); err != nil {
		t.Fatalf("restart n3: %v", err)
	}
	rejoins := h.rejoinsOf("n3")
	if len(rejoins) != 1 || rejoins[0].Previous != 1 || rejoins[0].DeclaredBy == "" {
		t.Fatalf("OnRejoin = %+v, want previous 1 declared by someone", rejoins)
	}
	// Unless a survivor was quicker than the restart, n3 declared
	// itself; either way the declaration is one key, read back here.
	e, err := h.node(0).members.kv.Get(context.Background(), deadKey("n3", 1))
	if err != nil {
		t.Fatalf("dead.n3.1: %v", err)
	}
	if len(e.Value()) == 0 {
		t.Fatal("dead.n3.1 is empty")
	}
	for i := range 3 {
		waitFor(t, h.node(i), "n3 alive as incarnation 2", func(ms []Member) bool {
			hl, inc := health(ms, "n3")
			return hl == HealthAlive && inc == 2
		})
	}
}

// TestWrongTokenCannotJoin: a node whose token differs from the
// cluster's is refused on every route, never sees a meta-leader, and
// never appears among the members.
func TestWrongTokenCannotJoin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2)
	h.startAll()
	waitFor(t, h.node(0), "two alive members", allAlive("n1", "n2"))

	cfg := Config{
		Node: "n3", Listen: "127.0.0.1:-1", Routes: []string{h.mesh.Front(0).URL(), h.mesh.Front(1).URL()},
		Token: "wrong-token-9876543210", StoreDir: t.TempDir(), Lease: testLease,
		ReadyTimeout: 4 * testLease,
	}
	n, err := Start(context.Background(), cfg, testLogger(t, "n3"))
	if err == nil {
		n.Close()
		t.Fatal("a node with a wrong token started")
	}
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("err = %v, want ErrNotReady", err)
	}
	for _, m := range h.node(0).Members() {
		if m.Node == "n3" {
			t.Errorf("n3 is a member: %+v", m)
		}
	}
	if got := h.node(0).srv.NumRoutes(); got == 0 {
		t.Error("n1 has no route to n2")
	}
}

// TestIsolatedNodeDeclaredDeadByMajority: cut all of node 3's routes;
// nodes 1 and 2 (a quorum) declare it dead once, while node 3, alone,
// tries and fails to declare them: no quorum, no declaration. Healed,
// node 3 finds itself declared and rejoins as its next incarnation.
func TestIsolatedNodeDeclaredDeadByMajority(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}
	h.mesh.Isolate(2)
	declared := func(ms []Member) bool {
		hl, _ := health(ms, "n3")
		for _, m := range ms {
			if m.Node == "n3" {
				return hl == HealthDead && m.DeclaredBy != ""
			}
		}
		return false
	}
	waitFor(t, h.node(0), "n3 declared dead", declared)
	waitFor(t, h.node(1), "n3 declared dead", declared)
	// n3 sees both others silent and tries to declare each; wait for a
	// failed attempt of its own after they went silent.
	h.wait("n3 failing to declare", func() bool { return h.failed["n3"] >= 2 })

	h.mu.Lock()
	var n3 []death
	for _, d := range h.deaths {
		switch {
		case d.by == "n3":
			t.Errorf("the isolated node declared %s dead", d.node)
		case d.node == "n3":
			n3 = append(n3, d)
		}
	}
	h.mu.Unlock()
	if len(n3) != 1 {
		t.Fatalf("n3 declared dead %d times, want 1: %+v", len(n3), n3)
	}

	// Healed, n3 learns it was declared dead while it ran: it does not
	// carry on as incarnation 1 but rejoins as 2, like a restart.
	h.mesh.Heal(2)
	h.wait("n3 rejoining", func() bool {
		for _, r := range h.rejoins {
			if r.node == "n3" {
				return true
			}
		}
		return false
	})
	if got, want := h.rejoinsOf("n3"), (Rejoin{Previous: 1, Incarnation: 2, DeclaredBy: n3[0].by}); len(got) != 1 || got[0] != want {
		t.Errorf("OnRejoin on n3 = %+v, want [%+v]", got, want)
	}
	for i := range 3 {
		waitFor(t, h.node(i), "n3 alive as incarnation 2", func(ms []Member) bool {
			hl, inc := health(ms, "n3")
			return hl == HealthAlive && inc == 2
		})
	}
}
