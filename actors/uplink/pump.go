package uplink

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
)

// dialTimeout bounds opening a link to another node.
const dialTimeout = 15 * time.Second

// Messages a pump sends its link actor, tagged with the link's
// generation so that a stale pump's are ignored.
type (
	// inbound is a frame read.
	inbound struct {
		gen int
		f   frame
	}
	// lost: the link ended (it could not be dialed, its peer went silent
	// or closed, or it sent a bad frame).
	lost struct {
		gen int
		err error
	}
)

// pump is one link's I/O: a writer goroutine that dials first when the
// link is the dialer's, then writes the queued lines in order, and a
// reader goroutine that sends each frame read to the owner actor. Neither
// blocks the actor: send queues and returns.
type pump struct {
	gen   int
	go_   func(func()) bool
	sys   *actor.ActorSystem
	owner *actor.PID
	wake  chan struct{}

	mu     sync.Mutex // protects queue, conn, closed
	queue  [][]byte
	conn   net.Conn
	closed bool
	cancel context.CancelFunc
}

// startPump starts the goroutines of a link (go_ runs them, false when
// the daemon is stopping: the link is lost at once). conn is the accepted
// connection, or nil and dial opens it.
func startPump(go_ func(func()) bool, sys *actor.ActorSystem, owner *actor.PID, gen int, conn net.Conn, dial func(context.Context) (net.Conn, error)) *pump {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pump{gen: gen, go_: go_, sys: sys, owner: owner, wake: make(chan struct{}, 1), conn: conn, cancel: cancel}
	if !go_(func() { p.write(ctx, dial) }) {
		cancel()
		sys.Root.Send(owner, &lost{gen: gen, err: errors.New("uplink: the daemon is stopping")})
		p.closed = true
	}
	return p
}

// send queues one line.
func (p *pump) send(line []byte) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.queue = append(p.queue, line)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close ends the link: the connection closes and both goroutines return.
func (p *pump) close() {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.mu.Unlock()
	p.cancel()
	if c != nil {
		c.Close()
	}
}

func (p *pump) write(ctx context.Context, dial func(context.Context) (net.Conn, error)) {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c == nil {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		nc, err := dial(dctx)
		cancel()
		if err != nil {
			p.sys.Root.Send(p.owner, &lost{gen: p.gen, err: err})
			p.close()
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.conn, c = nc, nc
		p.mu.Unlock()
	}
	if !p.go_(func() { p.read(c) }) {
		p.sys.Root.Send(p.owner, &lost{gen: p.gen, err: errors.New("uplink: the daemon is stopping")})
		p.close()
		return
	}
	for {
		p.mu.Lock()
		q := p.queue
		p.queue = nil
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		for _, line := range q {
			if _, err := c.Write(line); err != nil {
				p.sys.Root.Send(p.owner, &lost{gen: p.gen, err: err})
				p.close()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
	}
}

func (p *pump) read(c net.Conn) {
	rd := protocol.NewReader(c, maxLine)
	for {
		line, err := rd.Next()
		if err == nil {
			var f frame
			if f, err = decodeFrame(line); err == nil {
				p.sys.Root.Send(p.owner, &inbound{gen: p.gen, f: f})
				continue
			}
		}
		p.sys.Root.Send(p.owner, &lost{gen: p.gen, err: err})
		p.close()
		return
	}
}
