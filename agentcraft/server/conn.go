package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/agentcraft/wire"
)

// conn is one WebSocket client. Its reader (run) carries the client's
// messages out one at a time; its writer drains out, a bounded queue, so
// that the server never waits on a slow client: one that falls
// OutboxMessages behind is disconnected.
type conn struct {
	s  *Server
	ws *websocket.Conn

	out  chan []byte             // frames to write (done ends the writer)
	in   chan wire.ClientMessage // messages to handle (done ends the worker)
	done chan struct{}           // closed by kill
	once sync.Once
	// code and reason are kill's, written before done is closed.
	code   websocket.StatusCode
	reason string
}

// inboxMessages bounds a client's messages waiting to be handled; past
// it a message is refused (errBusy), not queued.
const inboxMessages = 64

func newConn(s *Server, ws *websocket.Conn) *conn {
	return &conn{s: s, ws: ws, out: make(chan []byte, s.cfg.OutboxMessages), in: make(chan wire.ClientMessage, inboxMessages), done: make(chan struct{})}
}

// send queues one message; a full queue disconnects the client. It never
// blocks, so it may be called under the server's mu.
func (c *conn) send(msg wire.ServerMessage) {
	b, err := wire.Encode(msg)
	if err != nil {
		c.s.log.Error("agentcraft: encode", "type", msg.MessageType(), "err", err)
		return
	}
	select {
	case <-c.done:
	case c.out <- b:
	default:
		c.kill(websocket.StatusPolicyViolation, "client too slow")
	}
}

// kill ends the connection once, with code and reason: it never blocks
// (send calls it under the server's mu); the writer performs the close
// handshake.
func (c *conn) kill(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		c.code, c.reason = code, reason
		close(c.done)
	})
}

// run serves the connection until it ends: the writer and heartbeat in
// goroutines of their own, the reader here.
func (c *conn) run() {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		c.write()
	}()
	go func() {
		defer wg.Done()
		c.work()
	}()
	go func() {
		defer wg.Done()
		c.heartbeat()
	}()
	c.read()
	c.kill(websocket.StatusNormalClosure, "")
	wg.Wait()
	// After the worker ended, so that a hello it was handling cannot
	// register the connection again.
	c.s.drop(c)
}

// write writes queued frames until the connection ends, then closes it
// with kill's code and reason (the reader's Read then returns).
func (c *conn) write() {
	for {
		select {
		case <-c.done:
			_ = c.ws.Close(c.code, c.reason)
			return
		case b := <-c.out:
			ctx, cancel := context.WithTimeout(c.s.ctx, 10*time.Second)
			err := c.ws.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				c.kill(websocket.StatusInternalError, "write failed")
				_ = c.ws.CloseNow()
				return
			}
		}
	}
}

// heartbeat pings every Heartbeat; a ping not answered within one more
// interval ends the connection.
func (c *conn) heartbeat() {
	t := time.NewTicker(c.s.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.Heartbeat+5*time.Second)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil {
				c.kill(websocket.StatusPolicyViolation, "heartbeat not answered")
				return
			}
		}
	}
}

// read reads the client's frames and handles each in turn.
func (c *conn) read() {
	for {
		typ, b, err := c.ws.Read(c.s.ctx)
		if err != nil {
			return
		}
		select {
		case <-c.done:
			return
		default:
		}
		if typ != websocket.MessageText {
			c.fail("", errors.New("agentcraft: binary frames are not part of the dialect; send one JSON object per text frame"))
			continue
		}
		msg, err := wire.DecodeClient(b)
		if err != nil {
			var de *wire.DecodeError
			if errors.As(err, &de) {
				for _, r := range de.Replies() {
					c.send(r)
				}
			} else {
				c.fail("", err)
			}
			continue
		}
		select {
		case c.in <- msg:
		default:
			c.fail(msg.CorrelationID(), errBusy)
		}
	}
}

// work handles the client's messages in the order they came, apart from
// the reader, so that the reader keeps answering pings while a message
// waits on the daemon.
func (c *conn) work() {
	for {
		select {
		case <-c.done:
			return
		case msg := <-c.in:
			c.s.handle(c, msg)
		}
	}
}

// fail sends the replies of a failed message.
func (c *conn) fail(id string, err error) {
	for _, r := range wire.Failure(id, err) {
		c.send(r)
	}
}
