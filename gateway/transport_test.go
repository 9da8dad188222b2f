package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/internal/outbox"
)

// unixPair returns the two ends of a connected unix socket: the server end
// as the gateway's transport, and the client end.
func unixPair(t *testing.T) (*unixTransport, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	cl, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	tr := newUnixTransport(srv)
	t.Cleanup(func() { tr.Close("", false); cl.Close() })
	return tr, cl
}

// readLines reads n newline-terminated lines from r.
func readLines(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d lines: %v", len(out), err)
		}
		out = append(out, strings.TrimSuffix(l, "\n"))
	}
	return out
}

// TestUnixWriteCoalesces checks Write's framing: small records copied into
// one buffer, large ones written in place (writev), in order, each followed
// by exactly one newline; a record larger than the socket buffer and the
// write buffer still goes out whole.
func TestUnixWriteCoalesces(t *testing.T) {
	tr, cl := unixPair(t)
	big := bytes.Repeat([]byte("x"), 3<<20) // past copyMax, directMax and the socket buffer
	mid := bytes.Repeat([]byte("m"), copyMax+1)
	recs := [][]byte{[]byte(`{"a":1}`), big, []byte(`{"b":2}`), []byte(`{"c":3}`), mid, []byte(``), []byte(`{"d":4}`)}
	errc := make(chan error, 1)
	go func() { errc <- tr.Write(context.Background(), recs) }()
	r := bufio.NewReaderSize(cl, 64<<10)
	got := readLines(t, r, len(recs))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if got[i] != string(recs[i]) {
			t.Fatalf("line %d: %d bytes %.20q, want %d bytes %.20q", i, len(got[i]), got[i], len(recs[i]), recs[i])
		}
	}
	// The scratch buffers keep no record alive.
	for _, p := range tr.iov[:cap(tr.iov)] {
		if p != nil {
			t.Fatal("iov still references a record")
		}
	}
}

// TestDirectWritesInOrder drives an Outbox with the unix transport's
// direct writer and a writer goroutine, while the peer reads slowly at
// first so that direct writes fill the socket, fall short (partial writes,
// EAGAIN) and the writer takes over: every record arrives once, whole and
// in order.
func TestDirectWritesInOrder(t *testing.T) {
	tr, cl := unixPair(t)
	w := tr.direct()
	if w == nil {
		t.Fatal("no direct writer for a unix socket")
	}
	o := outbox.New(outbox.Limits{MaxMessages: 1 << 20, MaxBytes: 1 << 30})
	o.SetDirect(w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { // the connection's writer
		for {
			recs, ok := o.Next(ctx)
			if !ok {
				return
			}
			if err := tr.Write(ctx, recs); err != nil {
				t.Error(err)
				return
			}
		}
	})
	const n = 20000
	want := make([]string, n)
	for i := range n {
		// Sizes vary so that partial writes cut records anywhere.
		want[i] = fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", i%700))
	}
	pushers := make(chan struct{})
	go func() {
		defer close(pushers)
		for i := range n {
			switch i % 5 {
			case 0:
				o.PushDirect([]byte(want[i]))
			case 1:
				o.Hold([]byte(want[i]))
			case 2:
				o.Hold([]byte(want[i]))
				o.FlushDirect()
			case 3:
				o.Push([]byte(want[i])) // through the writer goroutine
			default:
				o.Hold([]byte(want[i]))
				o.Flush()
			}
		}
		o.FlushDirect()
	}()
	// The peer reads nothing until every record has been pushed: pushes
	// never block (the limits are far away), and the stream (~7 MB) is
	// larger than the socket buffer, so the socket filled up on the way.
	<-pushers
	r := bufio.NewReaderSize(cl, 4<<10)
	got := readLines(t, r, n)
	for i := range n {
		if got[i] != want[i] {
			t.Fatalf("record %d = %.40q, want %.40q", i, got[i], want[i])
		}
	}
	o.Close()
	wg.Wait()
}

// TestDirectWriteIdlePeer: with a peer that keeps up, PushDirect writes
// the record at once; the writer goroutine is never needed.
func TestDirectWriteIdlePeer(t *testing.T) {
	tr, cl := unixPair(t)
	o := outbox.New(outbox.Limits{})
	o.SetDirect(tr.direct())
	r := bufio.NewReader(cl)
	for i := range 100 {
		rec := fmt.Sprintf(`{"n":%d}`, i)
		if !o.PushDirect([]byte(rec)) {
			t.Fatal("PushDirect refused")
		}
		if got := readLines(t, r, 1)[0]; got != rec {
			t.Fatalf("got %q, want %q", got, rec)
		}
		if o.Len() != 0 {
			t.Fatalf("Len = %d after a direct write, want 0", o.Len())
		}
	}
	// A held record waits for a Flush (or a later Push) and the writer.
	o.Hold([]byte(`{"n":"held"}`))
	if o.Len() != 1 {
		t.Fatalf("Len = %d, want the held record", o.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	recs, ok := o.Next(ctx)
	if !ok || len(recs) != 1 || string(recs[0]) != `{"n":"held"}` {
		t.Fatalf("Next = %q, %v", recs, ok)
	}
	// Nothing is written once the writer has taken records and until it
	// asks for more: they stay queued behind what it writes.
	o.PushDirect([]byte(`{"n":"after"}`))
	if o.Len() != 1 {
		t.Fatalf("Len = %d while the writer writes, want 1", o.Len())
	}
	if err := tr.Write(ctx, recs); err != nil {
		t.Fatal(err)
	}
	recs, ok = o.Next(ctx)
	if !ok || len(recs) != 1 || string(recs[0]) != `{"n":"after"}` {
		t.Fatalf("Next = %q, %v", recs, ok)
	}
	if err := tr.Write(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, r, 2); got[0] != `{"n":"held"}` || got[1] != `{"n":"after"}` {
		t.Fatalf("got %q", got)
	}
}

// TestDirectWriteAllocatesNothing: the direct write runs once per client
// for every relayed batch, so it must not allocate (a closure handed to
// RawConn.Write per call did, twice) — what it wrote still arrives whole.
func TestDirectWriteAllocatesNothing(t *testing.T) {
	tr, cl := unixPair(t)
	recs := [][]byte{[]byte(`{"type":"message_delta","text_delta":"a"}`), []byte(`{"type":"message_delta","text_delta":"b"}`)}
	want := len(recs[0]) + len(recs[1]) + 2
	tr.writeNow(recs) // the scratch buffer is allocated once
	const runs = 50
	allocs := testing.AllocsPerRun(runs, func() {
		if n := tr.writeNow(recs); n != want {
			t.Fatalf("writeNow wrote %d bytes, want %d", n, want)
		}
	})
	if allocs != 0 {
		t.Errorf("writeNow allocates %.1f times per call, want 0", allocs)
	}
	rd := bufio.NewReader(cl)
	lines := readLines(t, rd, 2*(runs+2)) // AllocsPerRun runs f once more to warm up
	for i, l := range lines {
		if l != string(recs[i%2]) {
			t.Fatalf("line %d = %q, want %q", i, l, recs[i%2])
		}
	}
}
