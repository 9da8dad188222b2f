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
// flushes its writer at the end of every frame, and the spec sends one
// message per text frame (§2), so a batch of N records would be N write
// syscalls, each waking the peer. While corked, corkConn keeps what is
// written and uncork sends it in one write: wsTransport.Write corks for
// the frames of one batch. Reads, deadlines and Close pass through (Close
// is never held behind a corked write).
type corkConn struct {
	net.Conn

	// mu protects the following and serializes writes to Conn.
	mu     sync.Mutex
	corked bool
	buf    []byte
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

// cork starts keeping writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
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
	if cap(c.buf) > 64<<10 {
		c.buf = nil // a burst's buffer is not kept for an idle connection
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// corkWriter is the http.ResponseWriter websocket.Accept is given: its
// Hijack hands over the connection wrapped in a corkConn, with a fresh
// buffered writer on top of it (net/http's writes to the bare socket).
type corkWriter struct {
	http.ResponseWriter
	conn *corkConn // set by Hijack
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
	w.conn = &corkConn{Conn: nc}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, brw.Writer.Size())), nil
}
