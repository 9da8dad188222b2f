package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait of these tests: generous, because the
// machine running them may be loaded; a wait ends at its signal.
const waitLimit = 30 * time.Second

// testLease is short so that deaths are seen quickly, and long enough
// for a heartbeat (an fsynced R3 write) every third of it on a busy
// machine.
const testLease = 2 * time.Second

// relay is a TCP forwarder on a loopback port the test owns for its
// whole life: the nodes listen on port -1 and their routes point at
// relays, which forward to wherever the node bound. Cutting relays
// partitions a node.
type relay struct {
	ln   net.Listener
	wg   sync.WaitGroup
	quit chan struct{} // closed by stop

	mu sync.Mutex
	// mu protects the following.
	target  string
	ready   chan struct{} // closed when target is set
	cut     bool
	conns   map[net.Conn]struct{}
	stopped bool
}

func newRelay(t *testing.T) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, quit: make(chan struct{}), ready: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.acceptLoop()
	t.Cleanup(r.stop)
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }
func (r *relay) url() string  { return "nats://" + r.addr() }

// setTarget points the relay at a node's route address (again after a
// restart).
func (r *relay) setTarget(a *net.TCPAddr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == "" {
		close(r.ready)
	}
	r.target = a.String()
}

// setCut closes every forwarded connection and, while cut, refuses new
// ones: a partition.
func (r *relay) setCut(cut bool) {
	r.mu.Lock()
	r.cut = cut
	conns := r.conns
	if cut {
		r.conns = map[net.Conn]struct{}{}
	}
	r.mu.Unlock()
	if cut {
		for c := range conns {
			c.Close()
		}
	}
}

// dropAll closes the forwarded connections once; their dialers may
// come again.
func (r *relay) dropAll() {
	r.mu.Lock()
	conns := r.conns
	r.conns = map[net.Conn]struct{}{}
	r.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (r *relay) stop() {
	r.mu.Lock()
	if !r.stopped {
		close(r.quit)
	}
	r.stopped = true
	r.mu.Unlock()
	r.ln.Close()
	r.dropAll()
	r.wg.Wait()
}

func (r *relay) acceptLoop() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.forward(c)
		}()
	}
}

// track adds c to the live connections, unless the relay is cut or
// stopped.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut || r.stopped {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) forward(c net.Conn) {
	if !r.track(c) {
		c.Close()
		return
	}
	r.mu.Lock()
	ready := r.ready
	r.mu.Unlock()
	select { // a node dials its routes before the others bound theirs
	case <-ready:
	case <-r.quit:
		c.Close()
		return
	}
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	d, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	if !r.track(d) {
		c.Close()
		d.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(d, c)
	go pipe(c, d)
	<-done
	<-done
}

// harness is a cluster of n nodes on loopback: node i listens on port
// -1; front[i] is the address it advertises (gossiped routes reach it
// there), pair[i][j] the route node i dials to reach node j.
type harness struct {
	t     *testing.T
	n     int
	token string
	front []*relay
	pair  [][]*relay
	dirs  []string

	mu sync.Mutex
	// mu protects the following.
	nodes   []*Node
	deaths  []death  // every OnNodeDead, on whichever node
	rejoins []Rejoin // every OnRejoin
	failed  map[string]int
	change  chan struct{}
}

// death is one OnNodeDead call.
type death struct {
	by, node    string
	incarnation uint64
}

func newHarness(t *testing.T, n int) *harness {
	h := &harness{t: t, n: n, token: "test-token-0123456789", nodes: make([]*Node, n), failed: map[string]int{}, change: make(chan struct{})}
	for i := range n {
		h.front = append(h.front, newRelay(t))
		h.dirs = append(h.dirs, t.TempDir())
		row := make([]*relay, n)
		for j := range n {
			if j != i {
				row[j] = newRelay(t)
			}
		}
		h.pair = append(h.pair, row)
	}
	t.Cleanup(h.closeAll)
	return h
}

func (h *harness) name(i int) string { return fmt.Sprintf("n%d", i+1) }

// config is node i's configuration; the hooks record into h.
func (h *harness) config(i int) Config {
	var routes []string
	for j := range h.n {
		if j != i {
			routes = append(routes, h.pair[i][j].url())
		}
	}
	name := h.name(i)
	return Config{
		Node: name, Listen: "127.0.0.1:-1", Advertise: h.front[i].addr(), Routes: routes,
		Token: h.token, StoreDir: h.dirs[i], Lease: testLease, ReadyTimeout: waitLimit,
		Version: "test",
		Hooks: Hooks{
			OnNodeDead: func(node string, inc uint64) {
				h.record(func() { h.deaths = append(h.deaths, death{by: name, node: node, incarnation: inc}) })
			},
			OnRejoin: func(r Rejoin) { h.record(func() { h.rejoins = append(h.rejoins, r) }) },
		},
		routeListening: func(a *net.TCPAddr) {
			h.front[i].setTarget(a)
			for j := range h.n {
				if j != i {
					h.pair[j][i].setTarget(a)
				}
			}
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
	n, err := Start(context.Background(), h.config(i), testLogger(h.t, h.name(i)))
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

// isolate cuts every route into and out of node i, as a network
// partition would.
func (h *harness) isolate(i int) {
	h.front[i].setCut(true)
	for j := range h.n {
		if j == i {
			continue
		}
		h.pair[i][j].setCut(true)
		h.pair[j][i].setCut(true)
		// Node i may have reached j through j's advertised front: drop
		// those once; the others come back through their own routes.
		h.front[j].dropAll()
	}
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
