//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
)

// rawConn is a client connection below the Go client: it writes arbitrary
// bytes or frames and reads records as they come, so tests can send what
// no well-behaved client would and see exactly what the daemon answers.
type rawConn interface {
	// send writes one record: a JSONL line (the newline is added) or a
	// WebSocket text frame.
	send(rec []byte) error
	// next returns the next record from the daemon.
	next(timeout time.Duration) ([]byte, error)
	close()
}

// rawUnix is JSONL over the unix socket.
type rawUnix struct {
	c    *net.UnixConn
	recs chan []byte
	err  chan error
}

func dialRawUnix(t testing.TB, d *daemon) *rawUnix {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.socket(), Net: "unix"})
	if err != nil {
		t.Fatalf("dial %s: %v", d.socket(), err)
	}
	r := &rawUnix{c: c, recs: make(chan []byte, 1024), err: make(chan error, 1)}
	t.Cleanup(r.close)
	go func() {
		rd := protocol.NewReader(c, 64<<20)
		for {
			rec, err := rd.Next()
			if err != nil {
				r.err <- err
				close(r.recs)
				return
			}
			r.recs <- append([]byte(nil), rec...)
		}
	}()
	return r
}

func (r *rawUnix) send(rec []byte) error { return r.write(append(append([]byte(nil), rec...), '\n')) }

// write writes b as is.
func (r *rawUnix) write(b []byte) error {
	_ = r.c.SetWriteDeadline(time.Now().Add(callTimeout))
	_, err := r.c.Write(b)
	return err
}

func (r *rawUnix) next(timeout time.Duration) ([]byte, error) {
	select {
	case rec, ok := <-r.recs:
		if !ok {
			return nil, <-r.err
		}
		return rec, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no record within %s", timeout)
	}
}

func (r *rawUnix) close() { r.c.Close() }

// rawWS is one JSON message per WebSocket frame.
type rawWS struct {
	c *websocket.Conn
}

func dialRawWS(t testing.TB, d *daemon, tk string) *rawWS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, _, err := websocket.Dial(ctx, d.wsURL(), &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TicketProtocolPrefix + tk},
	})
	if err != nil {
		t.Fatalf("websocket dial: %v", err)
	}
	c.SetReadLimit(64 << 20)
	r := &rawWS{c: c}
	t.Cleanup(r.close)
	return r
}

func (r *rawWS) send(rec []byte) error { return r.frame(websocket.MessageText, rec) }

func (r *rawWS) frame(typ websocket.MessageType, b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return r.c.Write(ctx, typ, b)
}

func (r *rawWS) next(timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, b, err := r.c.Read(ctx)
	return b, err
}

func (r *rawWS) close() { r.c.CloseNow() }

// expectHello reads the first record and checks it is hello.
func expectHello(t testing.TB, r rawConn) {
	t.Helper()
	rec, err := r.next(callTimeout)
	if err != nil {
		t.Fatalf("read hello: %v", err)
	}
	if protocol.PeekType(rec) != protocol.TypeHello {
		t.Fatalf("first record is not hello: %.200s", rec)
	}
}

// nextResponse reads records until a response and returns it (events the
// connection may get meanwhile, such as agent_activity, are skipped).
func nextResponse(t testing.TB, r rawConn) protocol.Response {
	t.Helper()
	for {
		rec, err := r.next(callTimeout)
		if err != nil {
			t.Fatalf("waiting for a response: %v", err)
		}
		if !validRecord(rec) {
			t.Fatalf("daemon sent an invalid record: %.200q", rec)
		}
		if protocol.PeekType(rec) != protocol.TypeResponse {
			continue
		}
		var resp protocol.Response
		if err := json.Unmarshal(rec, &resp); err != nil {
			t.Fatalf("response undecodable: %v: %.200s", err, rec)
		}
		return resp
	}
}

// isEOF reports whether err means the peer closed the stream.
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}
