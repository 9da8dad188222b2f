package gateway

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
)

// transport is one client connection's byte stream, record-framed.
type transport interface {
	// Read returns the next inbound record (a copy the caller owns).
	Read(ctx context.Context) ([]byte, error)
	// Write sends records in order.
	Write(ctx context.Context, recs [][]byte) error
	// Close ends the connection, telling the peer why where the transport
	// can; slow marks a dropped slow consumer. It is idempotent and may
	// block briefly (a WebSocket close handshake).
	Close(reason string, slow bool)
	// Kind names the transport for hello and permission sources.
	Kind() string
}

// unixTransport is JSONL over a unix socket.
type unixTransport struct {
	conn  net.Conn
	rd    *protocol.Reader
	close sync.Once
}

func newUnixTransport(c net.Conn) *unixTransport {
	return &unixTransport{conn: c, rd: protocol.NewReader(c, protocol.DefaultMaxRecord)}
}

func (t *unixTransport) Kind() string { return "unix" }

func (t *unixTransport) Read(context.Context) ([]byte, error) {
	rec, err := t.rd.Next()
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), rec...), nil
}

func (t *unixTransport) Write(_ context.Context, recs [][]byte) error {
	n := 0
	for _, r := range recs {
		n += len(r) + 1
	}
	buf := make([]byte, 0, n)
	for _, r := range recs {
		buf = append(append(buf, r...), '\n')
	}
	_, err := t.conn.Write(buf)
	return err
}

func (t *unixTransport) Close(string, bool) { t.close.Do(func() { t.conn.Close() }) }

// wsTransport is one JSON message per WebSocket text frame.
type wsTransport struct {
	conn  *websocket.Conn
	close sync.Once
}

func (t *wsTransport) Kind() string { return "websocket" }

// errBinaryFrame marks a binary frame, which v0.1 does not use (spec §2.2).
var errBinaryFrame = errors.New("gateway: binary frames are not used")

func (t *wsTransport) Read(ctx context.Context) ([]byte, error) {
	typ, data, err := t.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errBinaryFrame
	}
	return bytes.TrimSpace(data), nil
}

func (t *wsTransport) Write(ctx context.Context, recs [][]byte) error {
	for _, r := range recs {
		if err := t.conn.Write(ctx, websocket.MessageText, r); err != nil {
			return err
		}
	}
	return nil
}

func (t *wsTransport) Close(reason string, slow bool) {
	if slow {
		// The peer is not reading: a close handshake would only wait.
		t.close.Do(func() { t.conn.CloseNow() })
		return
	}
	t.closeWith(websocket.StatusGoingAway, reason)
}

// closeWith closes with a status code of its own (a revoked credential
// is StatusPolicyViolation); it is part of Close's once.
func (t *wsTransport) closeWith(code websocket.StatusCode, reason string) {
	t.close.Do(func() {
		if err := t.conn.Close(code, reason); err != nil {
			t.conn.CloseNow()
		}
	})
}
