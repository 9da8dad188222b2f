package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// TestNetConn runs the standard net.Conn conformance suite on a dialed and
// an accepted Conn.
func TestNetConn(t *testing.T) {
	s := startServer(t, false)
	lnc, dnc := connect(t, s), connect(t, s)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		ln, err := Listen(lnc, "tunnel.nettest."+randomToken(), testOptions())
		if err != nil {
			return nil, nil, nil, err
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		d, err := Dial(ctx, dnc, ln.subject, testOptions())
		if err != nil {
			_ = ln.Close()
			return nil, nil, nil, err
		}
		a := <-accepted
		stop = func() {
			_ = d.Close()
			_ = a.Close()
			_ = ln.Close()
			waitReleased(t, d, a.(*Conn))
		}
		return d, a, stop, nil
	})
}

func randomToken() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 16)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}

// randomBytes is n bytes from a seeded source.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// echo copies everything c reads back to it, then half-closes.
func echo(t testing.TB, c *Conn) {
	if _, err := io.Copy(c, c); err != nil {
		t.Errorf("echo: %v", err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Errorf("echo CloseWrite: %v", err)
	}
}

// roundTrip writes data to c, half-closes, and checks that what comes back
// (through an echo) has the same checksum.
func roundTrip(t testing.TB, c *Conn, data []byte) {
	t.Helper()
	werr := make(chan error, 1)
	go func() {
		// Odd-sized writes, so frames and writes do not line up.
		rest := data
		for len(rest) > 0 {
			k := min(len(rest), 100_003)
			if _, err := c.Write(rest[:k]); err != nil {
				werr <- err
				return
			}
			rest = rest[k:]
		}
		werr <- c.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		t.Fatalf("read back: %v after %d bytes", err, n)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if want := sha256.Sum256(data); n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("read back %d bytes, checksum %x; want %d bytes, %x", n, h.Sum(nil), len(data), want)
	}
}

// TestTransferBothWays: 20 MiB of random bytes go through an echo and come
// back intact, once from the dialer's side and once from the listener's.
func TestTransferBothWays(t *testing.T) {
	s := startServer(t, false)
	nc1, nc2 := connect(t, s), connect(t, s)
	ln := listen(t, nc1, testOptions())
	data := randomBytes(20<<20, 1)
	t.Run("dialer sends", func(t *testing.T) {
		d, a := pair(t, ln, nc2, testOptions())
		go echo(t, a)
		roundTrip(t, d, data)
	})
	t.Run("listener sends", func(t *testing.T) {
		d, a := pair(t, ln, nc2, testOptions())
		go echo(t, d)
		roundTrip(t, a, data)
	})
}

// TestLossRecovery: every 7th data frame on each side is dropped on
// publish, and the transfer still completes intact.
func TestLossRecovery(t *testing.T) {
	s := startServer(t, false)
	nc1, nc2 := connect(t, s), connect(t, s)
	opts := testOptions()
	opts.dropData = 7
	ln := listen(t, nc1, opts)
	d, a := pair(t, ln, nc2, opts)
	go echo(t, a)
	roundTrip(t, d, randomBytes(4<<20, 2))
	// Small writes too: a lost last frame has no later frame to reveal
	// it, so the retransmit timer does.
	d2, a2 := pair(t, ln, nc2, opts)
	go echo(t, a2)
	roundTrip(t, d2, randomBytes(7*100, 3)[:1])
}

// TestBackpressure: a reader that does not read holds its writer after
// one window; nothing more than a window is unacknowledged or buffered,
// and the writer finishes once the reader reads.
func TestBackpressure(t *testing.T) {
	s := startServer(t, false)
	nc1, nc2 := connect(t, s), connect(t, s)
	const window = 64 << 10
	var mu sync.Mutex
	var maxUnacked, maxUnread uint64
	blocked := make(chan struct{}, 1)
	opts := testOptions()
	opts.Window = window
	opts.writeBlocked = func(unacked, unread uint64) {
		mu.Lock()
		maxUnacked, maxUnread = max(maxUnacked, unacked), max(maxUnread, unread)
		mu.Unlock()
		select {
		case blocked <- struct{}{}:
		default:
		}
	}
	ln := listen(t, nc1, opts)
	d, a := pair(t, ln, nc2, opts)
	data := randomBytes(1<<20, 4)
	wrote := make(chan error, 1)
	go func() {
		_, err := d.Write(data)
		wrote <- err
	}()
	select {
	case <-blocked:
	case err := <-wrote:
		t.Fatalf("Write of 1 MiB to a reader that does not read returned (%v)", err)
	case <-time.After(testTimeout):
		t.Fatal("Write never blocked")
	}
	select {
	case err := <-wrote:
		t.Fatalf("Write returned (%v) while the reader did not read", err)
	default:
	}
	a.mu.Lock()
	buffered := a.rbufLen
	a.mu.Unlock()
	mu.Lock()
	if maxUnacked > window || maxUnread != window || buffered > window {
		t.Errorf("blocked with %d unacknowledged, %d unread (want %d), %d buffered by the reader", maxUnacked, maxUnread, window, buffered)
	}
	mu.Unlock()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(a, got); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs")
	}
	mu.Lock()
	defer mu.Unlock()
	if maxUnacked > window || maxUnread > window {
		t.Errorf("%d unacknowledged, %d unread at most; window %d", maxUnacked, maxUnread, window)
	}
}

// TestHalfClose: after CloseWrite the peer reads EOF after the data and
// can still answer; Close then ends the other direction.
func TestHalfClose(t *testing.T) {
	s := startServer(t, false)
	nc := connect(t, s)
	ln := listen(t, nc, testOptions())
	d, a := pair(t, ln, nc, testOptions())
	if _, err := d.Write([]byte("question")); err != nil {
		t.Fatal(err)
	}
	if err := d.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after CloseWrite: %v, want net.ErrClosed", err)
	}
	got, err := io.ReadAll(a)
	if err != nil || string(got) != "question" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := a.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(d)
	if err != nil || string(got) != "answer" {
		t.Fatalf("read %q, %v", got, err)
	}
	waitReleased(t, d, a)
	if _, err := d.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read after release: %v, want io.EOF", err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseDelivers: what was written before Close still arrives, then
// EOF; the closed side's peer then fails to write with ErrPeerClosed.
func TestCloseDelivers(t *testing.T) {
	s := startServer(t, false)
	nc := connect(t, s)
	opts := testOptions()
	opts.dropData = 5 // the tail must be retransmitted after Close
	ln := listen(t, nc, opts)
	d, a := pair(t, ln, nc, opts)
	data := randomBytes(1<<20, 5)
	go func() {
		if _, err := d.Write(data); err != nil {
			t.Errorf("write: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	got, err := io.ReadAll(a)
	if err != nil || !bytes.Equal(got, data) {
		d.mu.Lock()
		t.Logf("dialer: released %v err %v sendNext %d unacked %d peerAck %d peerLimit %d finAcked %v closed %v peerFin %v heard %v", d.released, d.err, d.sendNext, len(d.unacked), d.peerAck, d.peerLimit, d.finAcked, d.closed, d.peerFin, time.Since(d.heard))
		d.mu.Unlock()
		t.Fatalf("read %d bytes (equal %v), %v", len(got), bytes.Equal(got, data), err)
	}
	// ReadAll saw the FIN, which says the reading half is closed too.
	if _, err := a.Write([]byte("late")); !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("Write to a closed peer: %v, want ErrPeerClosed", err)
	}
	waitReleased(t, d, a)
}

// TestListenerClose: Accept returns net.ErrClosed, connections not accepted
// are closed, accepted ones go on, and a new Dial finds no listener.
func TestListenerClose(t *testing.T) {
	s := startServer(t, false)
	nc := connect(t, s)
	ln := listen(t, nc, testOptions())
	d, a := pair(t, ln, nc, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pending, err := Dial(ctx, nc, ln.subject, testOptions()) // never accepted
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := io.ReadAll(pending); err != nil {
		t.Fatalf("the connection never accepted: %v, want EOF", err)
	}
	go echo(t, a)
	roundTrip(t, d, []byte("still here"))
	if _, err := Dial(ctx, nc, ln.subject, testOptions()); !errors.Is(err, ErrNoListener) {
		t.Fatalf("Dial after Close: %v, want ErrNoListener", err)
	}
	if got := d.RemoteAddr().String(); got != ln.subject+"#"+a.inbox {
		t.Errorf("RemoteAddr %q", got)
	}
	if got := a.LocalAddr(); got.Network() != "nats" || got.String() != ln.subject+"#"+a.inbox {
		t.Errorf("LocalAddr %q", got)
	}
	if got := a.RemoteAddr().String(); got != d.inbox {
		t.Errorf("accepted RemoteAddr %q, want %q", got, d.inbox)
	}
}

// TestConcurrentConns: 200 connections at once, each through its own echo.
func TestConcurrentConns(t *testing.T) {
	s := startServer(t, false)
	nc1, nc2 := connect(t, s), connect(t, s)
	opts := testOptions()
	opts.Backlog = 256
	// 400 conns on a loaded machine: timers at a gentler pace.
	opts.RetransmitTimeout, opts.KeepAlive, opts.PeerTimeout = 200*time.Millisecond, time.Second, 10*time.Second
	ln := listen(t, nc1, opts)
	var served sync.WaitGroup
	defer served.Wait()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				echo(t, c.(*Conn))
				_ = c.Close()
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	conns := make([]*Conn, 200)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Dial(ctx, nc2, ln.subject, opts)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			conns[i] = c
			roundTrip(t, c, randomBytes(64<<10+i, uint64(i)))
			_ = c.Close()
		}()
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			waitReleased(t, c)
		}
	}
}

// TestPeerDeath: when the peer's NATS connection closes, Read and Write
// fail with ErrPeerSilent within the peer timeout, after the data that
// arrived before.
func TestPeerDeath(t *testing.T) {
	s := startServer(t, false)
	lnc, dnc := connect(t, s), connect(t, s)
	opts := testOptions()
	ln := listen(t, lnc, opts)
	d, a := pair(t, ln, dnc, opts)
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(d, buf); err != nil {
		t.Fatal(err)
	}
	lnc.Close()
	expectSilent(t, d, opts.PeerTimeout)
	// The side whose NATS connection closed fails at once, and its
	// listener stops accepting.
	if _, err := a.Read(buf); !errors.Is(err, ErrNATSClosed) {
		t.Fatalf("Read on a conn whose NATS connection closed: %v, want ErrNATSClosed", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after the NATS connection closed: %v, want net.ErrClosed", err)
	}
}

// expectSilent waits, with a bound of a few peer timeouts, for c's Read to
// fail with ErrPeerSilent; Write then fails the same way.
func expectSilent(t *testing.T, c *Conn, peerTimeout time.Duration) {
	t.Helper()
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Read(make([]byte, 1))
		got <- err
	}()
	select {
	case err := <-got:
		if !errors.Is(err, ErrPeerSilent) {
			t.Fatalf("Read: %v, want ErrPeerSilent", err)
		}
		t.Logf("peer silence noticed after %s (peer timeout %s)", time.Since(start).Round(time.Millisecond), peerTimeout)
	case <-time.After(5 * peerTimeout):
		t.Fatalf("Read still blocked %s after the peer died", 5*peerTimeout)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, ErrPeerSilent) {
		t.Fatalf("Write: %v, want ErrPeerSilent", err)
	}
}

// TestOptions: the defaults, and options that cannot work are refused.
func TestOptions(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil || o.Window != 256<<10 || o.Linger != o.PeerTimeout || o.Backlog != 128 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	for _, bad := range []Options{
		{Window: 10},
		{KeepAlive: time.Second, PeerTimeout: time.Second},
		{RetransmitTimeout: -1},
		{Backlog: -1},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
