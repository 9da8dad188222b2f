package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain: no test reads the developer's home.
func TestMain(m *testing.M) { goleak.VerifyTestMain(testhost.WithHome(m)) }

// testTimeout bounds every wait on a signal in these tests; they normally
// finish in milliseconds.
const testTimeout = 30 * time.Second

// startServer runs a NATS server on 127.0.0.1 with a random port until the
// test ends; with cluster set it also listens for routes (random port) and
// routes to the given servers.
func startServer(t testing.TB, cluster bool, routes ...*server.Server) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	if cluster {
		opts.Cluster = server.ClusterOpts{Name: "tunnel", Host: "127.0.0.1", Port: -1}
		for _, r := range routes {
			opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats-route", Host: r.ClusterAddr().String()})
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(testTimeout) {
		t.Fatal("nats server not ready")
	}
	return s
}

// connect opens a NATS connection to s until the test ends. It does not
// reconnect: a test that stops the server wants the connection gone.
func connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testOptions are quick timers for tests: a lost frame costs 50 ms, a dead
// peer is noticed within two seconds.
func testOptions() Options {
	return Options{RetransmitTimeout: 50 * time.Millisecond, KeepAlive: 100 * time.Millisecond, PeerTimeout: 2 * time.Second}
}

// pair dials ln's subject from dnc and returns both ends, closed when the
// test ends.
func pair(t testing.TB, ln *Listener, dnc *nats.Conn, opts Options) (dialed, accepted *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type result struct {
		c   *Conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- result{c: c.(*Conn)}
	}()
	d, err := dialRetry(ctx, dnc, ln.subject, opts)
	if err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() {
		_ = d.Close()
		_ = a.c.Close()
		waitReleased(t, d, a.c)
	})
	return d, a.c
}

// dialRetry dials until the listener's interest has reached the dialer's
// server (routes propagate it asynchronously) or ctx ends.
func dialRetry(ctx context.Context, nc *nats.Conn, subject string, opts Options) (*Conn, error) {
	for {
		c, err := Dial(ctx, nc, subject, opts)
		if !errors.Is(err, ErrNoListener) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: %w", subject, err)
		case <-time.After(10 * time.Millisecond): // polling a condition, not a timed assertion
		}
	}
}

// waitReleased waits until each Conn's goroutine and subscription are
// gone.
func waitReleased(t testing.TB, cs ...*Conn) {
	t.Helper()
	for _, c := range cs {
		select {
		case <-c.done:
		case <-time.After(testTimeout):
			t.Errorf("conn %s not released", c.local)
		}
	}
}

// listen serves a fresh subject on nc until the test ends.
func listen(t testing.TB, nc *nats.Conn, opts Options) *Listener {
	t.Helper()
	ln, err := Listen(nc, "tunnel.test."+nats.NewInbox()[len("_INBOX."):], opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}
