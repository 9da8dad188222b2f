package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDuplicateNameRefused: another process started with the name of a
// node that is alive refuses to start with ErrDuplicateNode, whether it
// embeds a server (its route is refused by the live server of that
// name) or joins through a client port (the live node's heartbeats show
// on its record within a lease); the live node stays alive as its first
// incarnation. A node of the same name from another home whose previous
// process is dead takes the name over as the next incarnation.
func TestDuplicateNameRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.modify = func(i int, c *Config) {
		if i == 0 {
			c.ClientListen = "127.0.0.1:-1"
		}
	}
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}
	stillN2 := func() {
		t.Helper()
		for i := range 3 {
			waitFor(t, h.node(i), "n2 alive as incarnation 1", func(ms []Member) bool {
				hl, inc := health(ms, "n2")
				return hl == HealthAlive && inc == 1
			})
		}
	}

	embedded := Config{
		Node: "n2", Listen: "127.0.0.1:-1",
		Routes: []string{h.mesh.Front(0).URL(), h.mesh.Front(2).URL()},
		Token:  h.token, StoreDir: t.TempDir(), Lease: testLease, ReadyTimeout: waitLimit,
	}
	n, err := Start(context.Background(), embedded, testLogger(t, "n2-dup"))
	if err == nil {
		n.Close()
		t.Fatal("a second n2 embedding a server started")
	}
	if !errors.Is(err, ErrDuplicateNode) || !strings.Contains(err.Error(), `cluster.node "n2"`) {
		t.Errorf("embedded duplicate: err = %v, want ErrDuplicateNode naming cluster.node \"n2\"", err)
	}
	stillN2()

	ext := Config{Node: "n2", URL: h.node(0).ClientURL(), Token: h.token, Home: t.TempDir(), Lease: testLease, ReadyTimeout: waitLimit}
	n, err = Start(context.Background(), ext, testLogger(t, "n2-ext"))
	if err == nil {
		n.Close()
		t.Fatal("a second n2 through a client port started")
	}
	if !errors.Is(err, ErrDuplicateNode) || !strings.Contains(err.Error(), "another process heartbeats it") {
		t.Errorf("URL-mode duplicate: err = %v, want ErrDuplicateNode (heartbeats seen)", err)
	}
	if _, err := os.Stat(filepath.Join(ext.Home, "cluster", instanceFile)); err != nil {
		t.Errorf("URL-mode node keeps no instance under its home: %v", err)
	}
	stillN2()

	// n3 dies and comes back from another home at once, before anyone
	// declared it: its old record is silent, so the name is taken over.
	h.crash(2)
	h.dirs[2] = t.TempDir()
	if err := h.start(2); err != nil {
		t.Fatalf("n3 from a new home: %v", err)
	}
	if got := h.node(2).Incarnation(); got != 2 {
		t.Errorf("n3 from a new home: incarnation %d, want 2", got)
	}
	for i := range 3 {
		waitFor(t, h.node(i), "n3 alive as incarnation 2", func(ms []Member) bool {
			hl, inc := health(ms, "n3")
			return hl == HealthAlive && inc == 2
		})
	}
}

// TestInstanceKept: a node's instance is made once and read back at the
// next start from the same directory; another directory has another.
func TestInstanceKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := loadInstance(dir)
	if err != nil || len(a) != 32 {
		t.Fatalf("first instance %q, %v", a, err)
	}
	b, err := loadInstance(dir)
	if err != nil || b != a {
		t.Fatalf("second start: instance %q, %v; want %q", b, err, a)
	}
	c, err := loadInstance(t.TempDir())
	if err != nil || c == a {
		t.Fatalf("another home: instance %q, %v; want one of its own", c, err)
	}
	if d, _ := loadInstance(""); d == "" || d == a {
		t.Fatalf("no directory: instance %q", d)
	}
}
