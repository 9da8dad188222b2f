package natstest

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/cluster/clustertest"
)

// Bound is how long a wait may take before the test fails: long, because
// a loaded 2-core machine elects slowly, and a passing test never waits
// it out.
const Bound = 60 * time.Second

// Cluster is a running set of servers forming one JetStream cluster.
// Not safe for concurrent use: one test goroutine drives it.
type Cluster struct {
	t       testing.TB
	name    string
	Servers []*server.Server // index i is server "S-<i+1>"; nil while stopped
	opts    []*server.Options
	mesh    *clustertest.Mesh // nil with one server
}

// Start starts n servers (1 runs JetStream alone, without clustering),
// waits until a meta-leader knows every peer, and shuts them down when
// the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, name: "shard-test", Servers: make([]*server.Server, n), opts: make([]*server.Options, n)}
	if n > 1 {
		c.mesh = clustertest.NewMesh(t, n)
	}
	// The stores are made before the shutdown is registered: cleanups run
	// last-registered first, and the servers must be down before their
	// directories are removed.
	stores := make([]string, n)
	for i := range stores {
		stores[i] = t.TempDir()
	}
	t.Cleanup(c.Shutdown)
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("S-%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   stores[i],
			SyncAlways: true,
			NoLog:      true,
			NoSigs:     true,
		}
		if c.mesh != nil {
			o.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: -1, Advertise: c.mesh.Advertise(i)}
			for _, r := range c.mesh.Routes(i) {
				u, err := url.Parse(r)
				if err != nil {
					t.Fatalf("natstest: route url: %v", err)
				}
				o.Routes = append(o.Routes, u)
			}
		}
		c.opts[i] = o
		c.start(i)
	}
	c.WaitMetaLeader()
	return c
}

// start starts server i with its options and points the relays leading
// to it at the route port it bound (a new one after a restart).
//
// Every server's routes are fixed before it starts and never reloaded:
// nats-server's reload sorts the running options' route list in place
// while its route goroutines read it, a data race the detector reports.
func (c *Cluster) start(i int) {
	c.t.Helper()
	s, err := server.NewServer(c.opts[i].Clone())
	if err != nil {
		c.t.Fatalf("natstest: new server %s: %v", c.opts[i].ServerName, err)
	}
	s.Start()
	if !s.ReadyForConnections(Bound) {
		c.t.Fatalf("natstest: server %s not ready", c.opts[i].ServerName)
	}
	if c.mesh != nil {
		addr := s.ClusterAddr()
		if addr == nil {
			c.t.Fatalf("natstest: server %s has no route listener", c.opts[i].ServerName)
		}
		c.mesh.Bound(i, addr)
	}
	c.Servers[i] = s
}

// Shutdown stops every running server. It may be called more than once.
func (c *Cluster) Shutdown() {
	for i, s := range c.Servers {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
			c.Servers[i] = nil
		}
	}
}

// Stop shuts server i down (as a crash would leave its store: the files
// stay, and a Restart reads them).
func (c *Cluster) Stop(i int) {
	s := c.Servers[i]
	s.Shutdown()
	s.WaitForShutdown()
	c.Servers[i] = nil
}

// Restart starts a stopped server i again on its store, with the same
// name (its JetStream peer identity) and a new route port.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.start(i)
}

// Isolate cuts server i off the others while it keeps running and keeps
// its clients: every relay into or out of it closes its connections and
// refuses new ones. Its side has no quorum, so it can elect no leader
// and commit nothing.
func (c *Cluster) Isolate(i int) {
	c.t.Helper()
	c.mesh.Isolate(i)
	c.Wait(fmt.Sprintf("%s has no routes", c.opts[i].ServerName), func() bool { return c.Servers[i].NumRoutes() == 0 })
}

// Heal undoes Isolate: the relays let server i's routes through again,
// and the wait is for a meta-leader that knows every peer.
func (c *Cluster) Heal(i int) {
	c.t.Helper()
	c.mesh.Heal(i)
	c.WaitMetaLeader()
}

// Wait polls cond until it holds, failing the test after Bound.
func (c *Cluster) Wait(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(Bound)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: waited %s for: %s", Bound, what)
		}
		<-tick.C
	}
}

// running lists the servers up now.
func (c *Cluster) running() []*server.Server {
	var out []*server.Server
	for _, s := range c.Servers {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// WaitMetaLeader waits until one running server is the JetStream
// meta-leader and it counts every running server as a peer (with one
// server, until JetStream is up).
func (c *Cluster) WaitMetaLeader() {
	c.t.Helper()
	c.Wait("a JetStream meta-leader with every peer", func() bool {
		up := c.running()
		if len(c.Servers) == 1 {
			return len(up) == 1 && up[0].JetStreamEnabled()
		}
		for _, s := range up {
			if s.JetStreamIsLeader() {
				return len(s.JetStreamClusterPeers()) >= len(up) && s.JetStreamIsCurrent()
			}
		}
		return false
	})
}

// StreamLeader returns the index of the server leading stream (account
// $G), waiting until one does.
func (c *Cluster) StreamLeader(stream string) int {
	c.t.Helper()
	leader := -1
	c.Wait("a leader of stream "+stream, func() bool {
		for i, s := range c.Servers {
			if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// WaitStreamCurrent waits until exactly one running server leads stream
// and every running server is current with it. Right after a partition
// heals, the server that was cut off may still take itself for the
// stream's leader (it has not yet heard of the election it missed) and
// answer a read from its stale state; once this holds it has stepped
// down and caught up.
func (c *Cluster) WaitStreamCurrent(stream string) {
	c.t.Helper()
	c.Wait("one leader of "+stream+" and every server current", func() bool {
		leaders := 0
		for _, s := range c.running() {
			if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				leaders++
			}
			if !s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return false
			}
		}
		return leaders == 1
	})
}

// Connect returns a JetStream client of server i alone (no other server
// to fail over to: a test chooses which side of a partition it talks
// through), closed when the test ends.
func (c *Cluster) Connect(i int) (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, err := nats.Connect(c.Servers[i].ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		c.t.Fatalf("natstest: connect to %s: %v", c.Servers[i].Name(), err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}
