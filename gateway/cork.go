package gateway

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
)

// corkMax bounds what a corked connection buffers; past it the bytes go to
// the socket at once (a batch of large records gains nothing from one
// syscall, and the buffer must not hold megabytes).
const corkMax = 256 << 10

// corkConn is the socket under a WebSocket connection. coder/websocket
// flushes its writer at the end of every frame, and the protocol sends one
// message per text frame (docs/protocol.md §2.2), so a batch of N records
// would be N write syscalls, each waking the peer. While corked, corkConn
// keeps what is written and uncork sends it in one write: wsTransport.Write
// corks for the frames of one batch. Reads, deadlines and Close pass through
// (Close is never held behind a corked write).
type corkConn struct {
	net.Conn
	// bufs lends the buffers of large batches (the gateway's, shared by
	// its connections): a batch of frames is kept in one buffer sized for
	// it, and an idle connection keeps no large buffer.
	bufs *sync.Pool

	// mu protects the following and serializes writes to Conn.
	mu     sync.Mutex
	corked bool
	buf    []byte
	lent   *[]byte // buf's pooled backing, while borrowed
}

// corkSmall is the buffer a connection keeps for itself; a batch larger
// than it borrows one of corkMax from the pool.
const corkSmall = 16 << 10

// newCorkPool returns the pool of corkMax buffers for corkConn.bufs.
func newCorkPool() *sync.Pool {
	return &sync.Pool{New: func() any {
		b := make([]byte, 0, corkMax)
		return &b
	}}
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= corkMax {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// cork starts keeping writes; about size bytes are to come.
func (c *corkConn) cork(size int) {
	c.mu.Lock()
	c.corked = true
	if size > cap(c.buf) && size > corkSmall && c.bufs != nil && c.lent == nil {
		c.lent = c.bufs.Get().(*[]byte)
		c.buf = (*c.lent)[:0]
	}
	c.mu.Unlock()
}

// uncork writes what was kept, in one write, and stops keeping writes.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	switch {
	case c.lent != nil:
		*c.lent = c.buf[:0]
		c.bufs.Put(c.lent)
		c.lent, c.buf = nil, nil
	case cap(c.buf) > corkSmall:
		c.buf = nil // a burst's buffer is not kept for an idle connection
	default:
		c.buf = c.buf[:0]
	}
	return err
}

// corkWriter is the http.ResponseWriter websocket.Accept is given: its
// Hijack hands over the connection wrapped in a corkConn, with a fresh
// buffered writer on top of it (net/http's writes to the bare socket).
type corkWriter struct {
	http.ResponseWriter
	bufs *sync.Pool // for corkConn.bufs
	conn *corkConn  // set by Hijack
}

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("gateway: http.ResponseWriter does not implement http.Hijacker")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// The 101 response is written before Hijack returns; anything still
	// buffered goes out first, on the bare socket.
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc, bufs: w.bufs}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, brw.Writer.Size())), nil
}
