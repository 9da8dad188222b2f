package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestRawWSAgainstARealServer: the probe's client upgrades to a real
// coder/websocket server with the subprotocols it offers, reads messages
// of every length encoding in order (one longer than the server's write
// buffer arrives fragmented), answers a ping the server waits on, and its
// masked frame reaches the server intact; a close frame ends the reads.
func TestRawWSAgainstARealServer(t *testing.T) {
	long := bytes.Repeat([]byte("0123456789"), 7000) // 64-bit length, several frames
	msgs := [][]byte{[]byte("short"), bytes.Repeat([]byte("m"), 300), long}
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"shard.v1"}})
		if err != nil {
			errc <- err
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		_, p, err := c.Read(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- p
		go func() { // reads answer the client's pong for Ping below
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		for _, m := range msgs[:2] {
			if err := c.Write(ctx, websocket.MessageText, m); err != nil {
				errc <- err
				return
			}
		}
		wr, err := c.Writer(ctx, websocket.MessageText)
		if err == nil {
			for chunk := range slices.Chunk(long, 10000) {
				if _, err = wr.Write(chunk); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = wr.Close()
		}
		if err != nil {
			errc <- err
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.Ping(pctx); err != nil {
			errc <- err
			return
		}
		errc <- c.Close(websocket.StatusNormalClosure, "")
	}))
	defer srv.Close()

	w, err := dialRawWS("ws"+strings.TrimPrefix(srv.URL, "http"), []string{"shard.v1", "shard.ticket.x"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	attach := []byte(`{"type":"agent.attach","id":"a"}`)
	if err := w.writeText(attach); err != nil {
		t.Fatal(err)
	}
	if p := <-got; !bytes.Equal(p, attach) {
		t.Fatalf("server read %q, want %q", p, attach)
	}
	for i, want := range msgs {
		p, err := w.next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(p, want) {
			t.Fatalf("message %d: %d bytes, want %d", i, len(p), len(want))
		}
	}
	if _, err := w.next(); !errors.Is(err, errWSClosed) {
		t.Fatalf("after the messages: %v, want the server's close", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// TestRawWSRefusesAFailedUpgrade: a server that does not switch protocols
// is an error, not a connection.
func TestRawWSRefusesAFailedUpgrade(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	if _, err := dialRawWS("ws"+strings.TrimPrefix(srv.URL, "http"), nil, 5*time.Second); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("dial = %v, want a 403 error", err)
	}
}
