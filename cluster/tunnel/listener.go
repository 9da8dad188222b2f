package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// queueGroup is the queue group of every listener's open subscription: two
// listeners on one subject (a misconfiguration, or a service spread on
// purpose) share the opens instead of both answering each.
const queueGroup = "tunnel"

// Listener accepts tunnel connections dialed to its subject.
//
// Accept and Close are safe for concurrent use. Close stops accepting:
// opens are no longer answered (a dialer then gets ErrNoListener, or
// ErrRefused while the subscription is going), connections opened but not
// accepted yet are closed, and Accept returns net.ErrClosed. Connections
// already accepted are left alone: they live until they are closed
// themselves or their peer goes.
type Listener struct {
	nc      *nats.Conn
	subject string
	opts    Options
	sub     *nats.Subscription
	backlog chan *Conn
	closing chan struct{}

	// mu protects the following.
	mu     sync.Mutex
	closed bool
	conns  map[string]*Conn // by the dialer's inbox: a repeated open finds its Conn
}

// Listen serves subject on nc: it answers opens on subject+".open". nc
// stays the caller's; closing it ends every connection on it.
func Listen(nc *nats.Conn, subject string, opts Options) (*Listener, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if !validInbox(subject) {
		return nil, fmt.Errorf("tunnel: listen on %q: not a literal subject", subject)
	}
	l := &Listener{
		nc:      nc,
		subject: subject,
		opts:    opts,
		backlog: make(chan *Conn, opts.Backlog),
		closing: make(chan struct{}),
		conns:   map[string]*Conn{},
	}
	sub, err := nc.QueueSubscribe(subject+".open", queueGroup, l.onOpen)
	if err != nil {
		return nil, fmt.Errorf("tunnel: listen on %q: %w", subject, err)
	}
	l.sub = sub
	// The subscription ends with the NATS connection: so does accepting.
	sub.SetClosedHandler(func(string) { l.shut() })
	// Once Listen returns, a dialer on the same server finds the listener
	// (on others, once the routes carried the interest).
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("tunnel: listen on %q: %w", subject, err)
	}
	return l, nil
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case <-l.closing:
	default:
		select {
		case c := <-l.backlog:
			return c, nil
		case <-l.closing:
		}
	}
	return nil, &net.OpError{Op: "accept", Net: "nats", Addr: l.Addr(), Err: net.ErrClosed}
}

// Close stops accepting; see Listener. A Listener whose NATS connection
// closed is closed already.
func (l *Listener) Close() error {
	if !l.shut() {
		return &net.OpError{Op: "close", Net: "nats", Addr: l.Addr(), Err: net.ErrClosed}
	}
	if err := l.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("tunnel: close listener %q: %w", l.subject, err)
	}
	return nil
}

// shut stops accepting and closes the connections not accepted yet; it
// reports whether it did (the first call).
func (l *Listener) shut() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	close(l.closing)
	l.mu.Unlock()
	for {
		select {
		case c := <-l.backlog:
			_ = c.Close() // a second Close is its only error
		default:
			return true
		}
	}
}

// Addr is the listener's subject.
func (l *Listener) Addr() net.Addr { return Addr{Subject: l.subject} }

var _ net.Listener = (*Listener)(nil)

// onOpen answers one open request: a new Conn with an inbox of its own, or
// the same one again when the dialer repeats its request.
func (l *Listener) onOpen(m *nats.Msg) {
	req, err := decodeOpen(m.Data)
	if err != nil {
		l.reply(m, openReply{Error: err.Error()})
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.conns[req.Inbox]; ok {
		l.reply(m, openReply{Inbox: c.inbox, Window: uint64(l.opts.Window)})
		return
	}
	if l.closed || len(l.backlog) == cap(l.backlog) {
		l.reply(m, openReply{Error: ErrRefused.Error()})
		return
	}
	c := newConn(l.nc, l.opts, l.nc.NewInbox())
	c.ln = l
	c.local = Addr{Subject: l.subject, Inbox: c.inbox}
	c.peer = req.Inbox
	c.peerLimit, c.peerWindow = req.Window, req.Window
	sub, err := l.nc.Subscribe(c.inbox, c.handle)
	if err != nil {
		l.reply(m, openReply{Error: fmt.Sprintf("subscribe: %v", err)})
		return
	}
	c.watch(sub)
	l.conns[req.Inbox] = c
	go c.run()
	l.backlog <- c // room was checked under l.mu
	l.reply(m, openReply{Inbox: c.inbox, Window: uint64(l.opts.Window)})
}

// reply answers an open; a lost answer is the dialer's to retry.
func (l *Listener) reply(m *nats.Msg, r openReply) {
	b, err := json.Marshal(r)
	if err != nil {
		return // cannot happen: strings and numbers
	}
	_ = m.Respond(b)
}

// forget drops a released Conn from the open index.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[c.peer] == c {
		delete(l.conns, c.peer)
	}
}

// Dial opens a connection to the Listener on subject. ctx bounds the open
// only. The open request is repeated (the listener answers a repeat with
// the same connection) until it is answered or ctx ends.
func Dial(ctx context.Context, nc *nats.Conn, subject string, opts Options) (*Conn, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if !validInbox(subject) {
		return nil, fmt.Errorf("tunnel: dial %q: not a literal subject", subject)
	}
	c := newConn(nc, opts, nc.NewInbox())
	c.local = Addr{Inbox: c.inbox}
	c.remote = Addr{Subject: subject}
	// Subscribe before the open goes out: the listener may send before its
	// answer arrives.
	sub, err := nc.Subscribe(c.inbox, c.handle)
	if err != nil {
		return nil, fmt.Errorf("tunnel: dial %q: %w", subject, err)
	}
	c.watch(sub)
	rep, err := open(ctx, nc, subject, openRequest{Version: openVersion, Inbox: c.inbox, Window: uint64(opts.Window)}, opts.openAttempt())
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("tunnel: dial %q: %w", subject, err)
	}
	c.mu.Lock()
	c.peer = rep.Inbox
	c.peerLimit, c.peerWindow = rep.Window, rep.Window
	c.heard = time.Now()
	c.sendLocked(frame{kind: frameAck}) // what arrived before the answer is acknowledged
	c.mu.Unlock()
	go c.run()
	return c, nil
}

// open sends the open request until it is answered.
func open(ctx context.Context, nc *nats.Conn, subject string, req openRequest, attempt time.Duration) (openReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return openReply{}, err
	}
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		m, err := nc.RequestWithContext(actx, subject+".open", body)
		cancel()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return openReply{}, fmt.Errorf("%w: %w", ErrNoListener, err)
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			continue // this attempt timed out: ask again
		case err != nil:
			return openReply{}, err
		}
		rep, err := decodeReply(m.Data)
		if err != nil {
			return openReply{}, err
		}
		if rep.Error != "" {
			if rep.Error == ErrRefused.Error() {
				return openReply{}, ErrRefused
			}
			return openReply{}, fmt.Errorf("%w: %s", ErrRefused, rep.Error)
		}
		return rep, nil
	}
}
