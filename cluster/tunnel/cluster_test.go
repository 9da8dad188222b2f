package tunnel

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startCluster runs two NATS servers routed to each other on loopback and
// waits until the route is up both ways.
func startCluster(t *testing.T) (a, b *server.Server) {
	t.Helper()
	a = startServer(t, true)
	b = startServer(t, true, a)
	deadline := time.Now().Add(testTimeout)
	for a.NumRoutes() == 0 || b.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the two servers never routed to each other")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not a timed assertion
	}
	return a, b
}

// TestAcrossServers: the dialer on one server of a cluster, the listener
// on the other; the stream crosses the route both ways.
func TestAcrossServers(t *testing.T) {
	a, b := startCluster(t)
	ln := listen(t, connect(t, b), testOptions())
	d, acc := pair(t, ln, connect(t, a), testOptions())
	go echo(t, acc)
	roundTrip(t, d, randomBytes(4<<20, 7))
}

// TestNodeDeath: the listener's server shuts down (its node died); the
// dialer on the surviving server notices within the peer timeout.
func TestNodeDeath(t *testing.T) {
	a, b := startCluster(t)
	opts := testOptions()
	ln := listen(t, connect(t, b), opts)
	d, _ := pair(t, ln, connect(t, a), opts)
	if _, err := d.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	b.Shutdown()
	b.WaitForShutdown()
	expectSilent(t, d, opts.PeerTimeout)
}
