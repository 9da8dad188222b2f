package gateway

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/internal/outbox"
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
	// kind is "unix", or "tunnel" for another node's stream (ServeTunnel).
	kind  string
	conn  net.Conn
	rd    *protocol.Reader
	close sync.Once

	// The writer's scratch (Write is called by one goroutine): wbuf holds
	// copied small records, iov the pieces of one vectored write.
	wbuf []byte
	iov  net.Buffers

	// raw is the socket for writeNow, the Outbox's direct writer, and dbuf
	// its scratch (it runs under the Outbox's lock). writeFD is bound once
	// and passes its input and result through dout and dn: a closure built
	// per call escapes to the heap (RawConn.Write is an interface method),
	// two allocations per client per relayed batch.
	raw     syscall.RawConn
	dbuf    []byte
	dout    []byte
	dn      int
	writeFD func(fd uintptr) bool
}

const (
	// copyMax is the largest record Write copies into its buffer; a larger
	// one goes to the socket in place, as its own piece of a vectored
	// write (writev), so a multi-megabyte record is never copied again.
	copyMax = 16 << 10
	// keepWriteBuf bounds the write buffer kept from one Write to the next.
	keepWriteBuf = 256 << 10
	// directMax bounds what writeNow writes in one go; a larger burst is
	// left to the writer goroutine.
	directMax = 64 << 10
)

var newline = []byte{'\n'}

func newUnixTransport(c net.Conn) *unixTransport {
	t := &unixTransport{kind: "unix", conn: c, rd: protocol.NewReader(c, protocol.DefaultMaxRecord)}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			t.raw = raw
			t.writeFD = t.writeOnce
		}
	}
	return t
}

// direct returns the Outbox's direct writer for this connection, or nil.
func (t *unixTransport) direct() outbox.DirectWriter {
	if t.raw == nil {
		return nil
	}
	return t.writeNow
}

// writeNow is the Outbox's direct writer: recs, each followed by '\n', in
// one non-blocking write(2) on the socket (Go keeps it non-blocking). It
// returns the bytes the kernel took: all of them while the peer keeps up,
// fewer or none when its buffer is full, and 0 for a burst over directMax,
// which the writer goroutine handles. The Outbox calls it only while the
// writer goroutine is not writing, so the socket has no other writer.
func (t *unixTransport) writeNow(recs [][]byte) int {
	size := 0
	for _, r := range recs {
		size += len(r) + 1
	}
	if size > directMax {
		return 0
	}
	if cap(t.dbuf) < size {
		t.dbuf = make([]byte, 0, max(size, 4<<10))
	}
	buf := t.dbuf[:0]
	for _, r := range recs {
		buf = append(append(buf, r...), '\n')
	}
	t.dout, t.dn = buf, 0
	err := t.raw.Write(t.writeFD)
	n := t.dn
	t.dout = nil
	if err != nil {
		return 0 // closed: the writer finds out
	}
	return n
}

// writeOnce is writeNow's one write(2) of dout, its result in dn.
func (t *unixTransport) writeOnce(fd uintptr) bool {
	for {
		m, err := syscall.Write(int(fd), t.dout)
		if err == syscall.EINTR {
			continue
		}
		t.dn = max(m, 0) // EAGAIN (peer's buffer full) or a dead socket: 0
		return true      // never wait: what is left goes to the writer
	}
}

func (t *unixTransport) Kind() string { return t.kind }

func (t *unixTransport) Read(context.Context) ([]byte, error) {
	rec, err := t.rd.Next()
	if err != nil {
		return nil, err
	}
	if t.rd.Owned() {
		return rec, nil // a large record is handed over, not copied
	}
	return append([]byte(nil), rec...), nil
}

// Write sends recs, in order and each followed by '\n', with as few
// syscalls as it can: consecutive small records are copied into one buffer
// and written together; large records are written in place with writev.
func (t *unixTransport) Write(_ context.Context, recs [][]byte) error {
	small, large := 0, 0
	for _, r := range recs {
		if len(r) <= copyMax {
			small += len(r) + 1
		} else {
			large++
		}
	}
	if cap(t.wbuf) < small {
		t.wbuf = make([]byte, 0, small)
	}
	// buf never grows past its capacity: the pieces already taken from it
	// stay valid.
	buf := t.wbuf[:0]
	defer func() {
		if cap(t.wbuf) > keepWriteBuf {
			t.wbuf = nil
		}
	}()
	if large == 0 {
		for _, r := range recs {
			buf = append(append(buf, r...), '\n')
		}
		_, err := t.conn.Write(buf)
		return err
	}
	iov := t.iov[:0]
	start := 0
	for _, r := range recs {
		if len(r) <= copyMax {
			buf = append(append(buf, r...), '\n')
			continue
		}
		if start < len(buf) {
			iov = append(iov, buf[start:])
			start = len(buf)
		}
		iov = append(iov, r, newline)
	}
	if start < len(buf) {
		iov = append(iov, buf[start:])
	}
	pieces := iov
	_, err := iov.WriteTo(t.conn) // consumes iov; writev on a unix socket
	clear(pieces)                 // keep no record alive
	t.iov = pieces[:0]
	return err
}

func (t *unixTransport) Close(string, bool) { t.close.Do(func() { t.conn.Close() }) }

// maxFrameHeader is the largest header of a frame the server sends
// (unmasked, 64-bit length).
const maxFrameHeader = 10

// wsTransport is one JSON message per WebSocket text frame.
type wsTransport struct {
	conn *websocket.Conn
	// cork is the socket under conn, or nil when the upgrade did not go
	// through corkWriter.
	cork  *corkConn
	close sync.Once
	// closed is closed when Close (or closeWith) runs, so that the
	// connection's keepalive ends with it rather than at its next ping.
	closed chan struct{}
}

func newWSTransport(c *websocket.Conn, cork *corkConn) *wsTransport {
	return &wsTransport{conn: c, cork: cork, closed: make(chan struct{})}
}

func (t *wsTransport) Kind() string { return "websocket" }

// errBinaryFrame marks a binary frame, which v0.1 does not use
// (docs/protocol.md §2.2).
var errBinaryFrame = errors.New("gateway: binary frames are not used")

// errInvalidUTF8 marks a text frame that is not UTF-8: RFC 6455 §8.1 makes
// it fatal to the connection (close 1007), and coder/websocket does not
// check it.
var errInvalidUTF8 = errors.New("gateway: text frame is not valid UTF-8")

// Read returns the next text frame. One that is not UTF-8 closes the
// connection with 1007 (invalid frame payload data) rather than being
// decoded with its bad bytes replaced, which would execute another command
// than the one sent (docs/protocol.md §2.3, strict input).
func (t *wsTransport) Read(ctx context.Context) ([]byte, error) {
	typ, data, err := t.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errBinaryFrame
	}
	if !utf8.Valid(data) {
		t.closeWith(websocket.StatusInvalidFramePayloadData, "text frame is not valid UTF-8")
		return nil, errInvalidUTF8
	}
	return bytes.TrimSpace(data), nil
}

// Write sends each record as its own text frame (docs/protocol.md §2), the
// frames of one batch in one write syscall (corkConn).
//
// The frames are written under context.Background, not the writer's ctx:
// coder/websocket registers a context.AfterFunc per frame for a ctx that
// can end, a cost on every event of every connection, and the writer
// needs none: the gateway's Close and the slow-consumer watchdog end a
// blocked write by closing the transport.
func (t *wsTransport) Write(_ context.Context, recs [][]byte) (err error) {
	if t.cork != nil && len(recs) > 1 {
		size := 0
		for _, r := range recs {
			size += len(r) + maxFrameHeader
		}
		t.cork.cork(size)
		defer func() {
			if uerr := t.cork.uncork(); err == nil {
				err = uerr
			}
		}()
	}
	for _, r := range recs {
		if err := t.conn.Write(context.Background(), websocket.MessageText, r); err != nil {
			return err
		}
	}
	return nil
}

func (t *wsTransport) Close(reason string, slow bool) {
	if slow {
		// The peer is not reading: a close handshake would only wait.
		t.close.Do(func() {
			close(t.closed)
			t.conn.CloseNow()
		})
		return
	}
	t.closeWith(websocket.StatusGoingAway, reason)
}

// closeWith closes with a status code of its own (a revoked credential
// is StatusPolicyViolation); it is part of Close's once.
func (t *wsTransport) closeWith(code websocket.StatusCode, reason string) {
	t.close.Do(func() {
		close(t.closed)
		if err := t.conn.Close(code, reason); err != nil {
			t.conn.CloseNow()
		}
	})
}
