package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/cluster/clustertest"
)

// waitLimit bounds every wait of these tests: generous, because the
// machine running them may be loaded; a wait ends at its signal.
const waitLimit = 30 * time.Second

// testLease is short so that deaths are seen quickly, and long enough
// for a heartbeat (an fsynced R3 write) every third of it on a busy
// 2-core machine under the race detector (2s saw a live node declared
// dead there).
const testLease = 3 * time.Second

// harness is a cluster of n nodes on loopback: node i listens on port
// -1 behind the relays of a clustertest.Mesh.
type harness struct {
	t     *testing.T
	n     int
	token string
	mesh  *clustertest.Mesh
	dirs  []string
	// modify, when set, changes node i's configuration.
	modify func(i int, c *Config)

	mu sync.Mutex
	// mu protects the following.
	nodes   []*Node
	deaths  []death  // every OnNodeDead, on whichever node
	rejoins []rejoin // every OnRejoin
	failed  map[string]int
	change  chan struct{}
}

// rejoin is one OnRejoin call, on node.
type rejoin struct {
	node string
	Rejoin
}

// death is one OnNodeDead call.
type death struct {
	by, node    string
	incarnation uint64
}

func newHarness(t *testing.T, n int) *harness {
	h := &harness{t: t, n: n, token: "test-token-0123456789", nodes: make([]*Node, n), failed: map[string]int{}, change: make(chan struct{})}
	h.mesh = clustertest.NewMesh(t, n)
	for range n {
		h.dirs = append(h.dirs, t.TempDir())
	}
	t.Cleanup(h.closeAll)
	return h
}

func (h *harness) name(i int) string { return fmt.Sprintf("n%d", i+1) }

// config is node i's configuration; the hooks record into h.
func (h *harness) config(i int) Config {
	name := h.name(i)
	return Config{
		Node: name, Listen: "127.0.0.1:-1", Advertise: h.mesh.Advertise(i), Routes: h.mesh.Routes(i),
		Token: h.token, StoreDir: h.dirs[i], Lease: testLease, ReadyTimeout: waitLimit,
		Version: "test",
		Hooks: Hooks{
			OnNodeDead: func(node string, inc uint64) {
				h.record(func() { h.deaths = append(h.deaths, death{by: name, node: node, incarnation: inc}) })
			},
			OnRejoin:   func(r Rejoin) { h.record(func() { h.rejoins = append(h.rejoins, rejoin{name, r}) }) },
			RouteBound: func(a *net.TCPAddr) { h.mesh.Bound(i, a) },
		},
		declareFailed: func(string, uint64) { h.record(func() { h.failed[name]++ }) },
	}
}

func (h *harness) record(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
	close(h.change)
	h.change = make(chan struct{})
}

// startAll starts every node at once: the first ones wait in Start for
// a quorum of the others.
func (h *harness) startAll() {
	h.t.Helper()
	errs := make([]error, h.n)
	var wg sync.WaitGroup
	for i := range h.n {
		wg.Go(func() { errs[i] = h.start(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			h.t.Fatalf("start %s: %v", h.name(i), err)
		}
	}
}

func (h *harness) start(i int) error {
	cfg := h.config(i)
	if h.modify != nil {
		h.modify(i, &cfg)
	}
	n, err := Start(context.Background(), cfg, testLogger(h.t, h.name(i)))
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.nodes[i] = n
	h.mu.Unlock()
	return nil
}

func (h *harness) node(i int) *Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[i]
}

// crash stops node i without a goodbye: its server goes first, so its
// connection cannot flush or drain anything, then the rest.
func (h *harness) crash(i int) {
	n := h.node(i)
	n.srv.Shutdown()
	n.Close()
}

func (h *harness) closeAll() {
	for i := range h.n {
		if n := h.node(i); n != nil {
			n.Close()
		}
	}
}

// waitFor waits until cond holds on what one node sees, waking at each
// change of its membership table.
func waitFor(t *testing.T, n *Node, what string, cond func([]Member) bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		ch := n.members.changes()
		ms := n.Members()
		if cond(ms) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%s: waited %s for %s; members: %+v", n.Name(), waitLimit, what, ms)
		}
	}
}

// waitHarness waits until cond holds on what the hooks recorded.
func (h *harness) wait(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		ch, ok := h.change, cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			h.t.Fatalf("waited %s for %s", waitLimit, what)
		}
	}
}

// health is the health of node in ms ("" when absent), and its
// incarnation.
func health(ms []Member, node string) (Health, uint64) {
	for _, m := range ms {
		if m.Node == node {
			return m.Health, m.Incarnation
		}
	}
	return "", 0
}

// testLogger sends a node's log to t.Log when -v asks for it.
func testLogger(t *testing.T, name string) *slog.Logger {
	if !testing.Verbose() || os.Getenv("CLUSTER_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_node", name)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// rejoinsOf is what OnRejoin said on node.
func (h *harness) rejoinsOf(node string) []Rejoin {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Rejoin
	for _, r := range h.rejoins {
		if r.node == node {
			out = append(out, r.Rejoin)
		}
	}
	return out
}
