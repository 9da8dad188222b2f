package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// TestIdleKeepAlive: an idle connection outlives several peer timeouts,
// because keepalives are heard: a Read with a deadline times out rather
// than failing with ErrPeerSilent.
func TestIdleKeepAlive(t *testing.T) {
	s := startServer(t, false)
	opts := Options{RetransmitTimeout: 50 * time.Millisecond, KeepAlive: 50 * time.Millisecond, PeerTimeout: 250 * time.Millisecond}
	ln := listen(t, connect(t, s), opts)
	d, a := pair(t, ln, connect(t, s), opts)
	for _, c := range []*Conn{d, a} {
		if err := c.SetReadDeadline(time.Now().Add(5 * opts.PeerTimeout)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("idle Read: %v, want the deadline", err)
		}
	}
	for _, c := range []*Conn{d, a} {
		if err := c.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	go echo(t, a)
	roundTrip(t, d, []byte("still alive"))
}

// TestBacklogFull: opens beyond the backlog are refused, and the refused
// dialer leaves nothing behind.
func TestBacklogFull(t *testing.T) {
	s := startServer(t, false)
	nc := connect(t, s)
	opts := testOptions()
	opts.Backlog = 1
	ln := listen(t, nc, opts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	first, err := Dial(ctx, nc, ln.subject, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := Dial(ctx, nc, ln.subject, opts); !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial past the backlog: %v, want ErrRefused", err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	second, err := Dial(ctx, nc, ln.subject, opts)
	if err != nil {
		t.Fatalf("Dial once the backlog has room: %v", err)
	}
	defer second.Close()
}

// TestOpenRepeated: a repeated open (its answer was lost) gets the same
// connection, not a second one.
func TestOpenRepeated(t *testing.T) {
	s := startServer(t, false)
	nc := connect(t, s)
	ln := listen(t, nc, testOptions())
	req, err := json.Marshal(openRequest{Version: openVersion, Inbox: nc.NewInbox(), Window: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var inboxes []string
	for range 2 {
		m, err := nc.Request(ln.subject+".open", req, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := decodeReply(m.Data)
		if err != nil || rep.Error != "" {
			t.Fatalf("reply %+v, %v", rep, err)
		}
		inboxes = append(inboxes, rep.Inbox)
	}
	if inboxes[0] != inboxes[1] {
		t.Fatalf("two opens with one inbox made two connections: %q", inboxes)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// Nobody dialed for real: the accepted end hears nothing and fails.
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrPeerSilent) {
		t.Fatalf("Read: %v, want ErrPeerSilent", err)
	}
	_ = c.Close()
	waitReleased(t, c.(*Conn))
	if len(ln.backlog) != 0 {
		t.Fatalf("%d connections still waiting", len(ln.backlog))
	}
	// A malformed open is answered with an error, not a connection.
	m, err := nc.Request(ln.subject+".open", []byte(`{"v":1}`), testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := decodeReply(m.Data); err != nil || rep.Error == "" {
		t.Fatalf("malformed open answered %+v, %v", rep, err)
	}
}
