package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/shard-dev/shard/protocol"
)

// EventBuffer is the capacity of the Events channel.
const EventBuffer = 4096

// Event is one inbound record that no Request claimed: an event, or a
// response whose id nobody is waiting for.
type Event struct {
	// Raw is the record exactly as received (without the JSONL newline).
	// It is owned by the receiver.
	Raw []byte
	// Msg is Raw decoded with protocol.DecodeEvent. It is never nil: an
	// event of a type this build does not know, or a record that fails to
	// decode, arrives as *protocol.Unknown carrying whatever envelope could
	// be read.
	Msg protocol.Typed
}

// result is what the reader hands to a waiting Request.
type result struct {
	resp *protocol.Response
	err  error
}

// Conn is one client connection to the daemon.
//
// A Conn is safe for concurrent use: any number of goroutines may call
// Request, Call and Send at once (writes are serialized), while one goroutine
// owned by the Conn reads. Close releases that goroutine; every Conn must be
// closed.
//
// Backpressure: the reader delivers every unclaimed record to Events, in
// arrival order, and blocks when the channel's buffer (EventBuffer records)
// is full. While it is blocked it reads nothing more — including responses —
// so a Request can stall until Events is drained. Whoever holds a Conn must
// keep draining Events (or Close the Conn) for as long as it issues
// requests; the buffer only absorbs bursts.
type Conn struct {
	tr    transport
	hello protocol.Hello

	helloReady chan struct{} // closed once hello is stored
	events     chan Event    // sent to and closed by the reader only
	closing    chan struct{} // closed by Close: unblocks the reader
	done       chan struct{} // closed when the reader has exited
	wsem       chan struct{} // write semaphore (a mutex that honours ctx)
	closeOnce  sync.Once
	closeErr   error

	// mu protects the following.
	mu      sync.Mutex
	pending map[string]chan result
	nextID  uint64
	err     error // why the connection ended; first cause wins
}

// Dial connects to the daemon's unix socket at socketPath and waits for its
// hello. ctx bounds the dial and the wait for hello only; cancelling it later
// does not affect the returned Conn.
func Dial(ctx context.Context, socketPath string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", socketPath, err)
	}
	return start(ctx, newUnixTransport(nc))
}

// DialWebSocket connects to the daemon's WebSocket endpoint (for example
// ws://127.0.0.1:7420/ws) with a ticket minted by ws.ticket over the unix
// socket, and waits for hello. The upgrade offers the subprotocols
// "shard.v1" and "ticket.<ticket>" and, as a non-browser client, sends no
// Origin header: a ws.ticket ticket is bound to no origin and the daemon
// refuses it on an upgrade that carries one. ctx bounds the handshake and
// the wait for hello only.
func DialWebSocket(ctx context.Context, url, ticket string) (*Conn, error) {
	tr, err := dialWebSocket(ctx, url, ticket, "")
	if err != nil {
		return nil, err
	}
	return start(ctx, tr)
}

// DialWebSocketToken is DialWebSocket with an API token (shardctl token
// create) instead of a ticket: it is sent as "Authorization: Bearer
// <token>", without Origin. Revoking the token closes the connection.
func DialWebSocketToken(ctx context.Context, url, token string) (*Conn, error) {
	tr, err := dialWebSocket(ctx, url, "", token)
	if err != nil {
		return nil, err
	}
	return start(ctx, tr)
}

// NewConn speaks the wire protocol over nc, an open byte stream to a
// gateway that is not a unix socket the client dialed itself: JSONL, as on
// the unix socket (docs/protocol.md §2.1). A node of a cluster forwards its
// clients' commands to another node's gateway this way, over a
// cluster/tunnel connection. It waits for hello; ctx bounds that wait only.
// The Conn owns nc from then on (Close closes it), also when NewConn fails.
func NewConn(ctx context.Context, nc net.Conn) (*Conn, error) {
	return start(ctx, newUnixTransport(nc))
}

func start(ctx context.Context, tr transport) (*Conn, error) {
	c := &Conn{
		tr:         tr,
		helloReady: make(chan struct{}),
		events:     make(chan Event, EventBuffer),
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
		wsem:       make(chan struct{}, 1),
		pending:    make(map[string]chan result),
	}
	go c.readLoop()
	select {
	case <-c.helloReady:
		return c, nil
	case <-c.done:
		_ = c.Close()
		return nil, c.Err()
	case <-ctx.Done():
		_ = c.Close()
		return nil, fmt.Errorf("client: wait for hello: %w", ctx.Err())
	}
}

// Hello returns the hello the server sent on connect. It is not delivered
// on Events.
func (c *Conn) Hello() protocol.Hello { return c.hello }

// Events returns the channel of inbound records not claimed by a Request,
// in arrival order. It is closed when the connection ends, after which Err
// says why. See Conn for the backpressure contract.
func (c *Conn) Events() <-chan Event { return c.events }

// Err returns why the connection ended: ErrClosed after Close, an error
// wrapping io.EOF when the server closed it cleanly, or the read or write
// error otherwise. It returns nil while the connection is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection and waits for the reader goroutine to exit.
// Pending Requests fail with ErrClosed and Events is closed. Calling Close
// more than once is safe. On a WebSocket, Close first performs the close
// handshake, which coder/websocket bounds at 5 s per direction.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.setErr(ErrClosed)
		close(c.closing)
		c.closeErr = c.tr.close()
	})
	<-c.done
	return c.closeErr
}

// Send writes one message as-is: []byte, json.RawMessage and string are
// written verbatim (a JSONL newline is appended when missing), anything else
// is encoded with protocol.Marshal. Send does not wait for a reply; a
// response to a sent command arrives on Events.
func (c *Conn) Send(msg any) error {
	var rec []byte
	switch m := msg.(type) {
	case []byte:
		rec = m
	case json.RawMessage:
		rec = m
	case string:
		rec = []byte(m)
	default:
		b, err := protocol.Marshal(msg)
		if err != nil {
			return fmt.Errorf("client: send: %w", err)
		}
		rec = b
	}
	return c.write(context.Background(), rec)
}

// Request sends msg and waits for the response carrying its id. When
// msg.Head().ID is empty, Request assigns an id unique within this Conn (it
// modifies msg). msg.Head().Type must be set.
//
// If the response has success false, Request returns it together with its
// *protocol.Error (unwrapped, so errors.As and protocol.CodeOf work). Other
// errors mean no response was received: ctx ended, or the connection did
// (then the error is Err()). A response that arrives after ctx ended is
// delivered on Events.
func (c *Conn) Request(ctx context.Context, msg protocol.Typed) (*protocol.Response, error) {
	h := msg.Head()
	if h.Type == "" {
		return nil, errNoType
	}
	ch := make(chan result, 1)
	if err := c.register(h, ch); err != nil {
		return nil, err
	}
	rec, err := protocol.Marshal(msg)
	if err != nil {
		c.unregister(h.ID, ch)
		return nil, fmt.Errorf("client: %s: %w", h.Type, err)
	}
	if err := c.write(ctx, rec); err != nil {
		c.unregister(h.ID, ch)
		if cerr := c.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("client: %s %s: %w", h.Type, h.ID, err)
	}
	select {
	case r := <-ch:
		return finish(h, r)
	case <-ctx.Done():
		if r, ok := c.unregister(h.ID, ch); ok {
			return finish(h, r)
		}
		return nil, fmt.Errorf("client: %s %s: %w", h.Type, h.ID, ctx.Err())
	case <-c.done:
		if r, ok := c.unregister(h.ID, ch); ok {
			return finish(h, r)
		}
		return nil, c.Err()
	}
}

// Call is Request followed by decoding the response data into data (when
// data is non-nil and the response carries data).
func (c *Conn) Call(ctx context.Context, msg protocol.Typed, data any) error {
	resp, err := c.Request(ctx, msg)
	if err != nil {
		return err
	}
	if data == nil || len(resp.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.Data, data); err != nil {
		return fmt.Errorf("client: %s: decode response data: %w", resp.Command, err)
	}
	return nil
}

func finish(h *protocol.Header, r result) (*protocol.Response, error) {
	if r.err != nil {
		return nil, fmt.Errorf("client: %s %s: decode response: %w", h.Type, h.ID, r.err)
	}
	if !r.resp.Success {
		if r.resp.Error == nil {
			return r.resp, protocol.Errorf(protocol.CodeProtocolError, "response to %s %s failed without an error", h.Type, h.ID)
		}
		return r.resp, r.resp.Error
	}
	return r.resp, nil
}

// register assigns an id when h has none and records ch as its waiter.
func (c *Conn) register(h *protocol.Header, ch chan result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if h.ID == "" {
		for {
			c.nextID++
			id := "c-" + strconv.FormatUint(c.nextID, 10)
			if _, busy := c.pending[id]; !busy {
				h.ID = id
				break
			}
		}
	} else if _, busy := c.pending[h.ID]; busy {
		return fmt.Errorf("client: %s: id %q is already waiting for a response", h.Type, h.ID)
	}
	c.pending[h.ID] = ch
	return nil
}

// unregister removes ch as the waiter of id. If the reader had already
// claimed it, the result it delivered is returned.
func (c *Conn) unregister(id string, ch chan result) (result, bool) {
	c.mu.Lock()
	if c.pending[id] == ch {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r, true
	default:
		return result{}, false
	}
}

// write sends one record; writes are serialized. It returns ctx.Err() when
// ctx ended before anything was written, and otherwise Err() of the ended
// connection: a write that may have left a partial record on the stream
// ends the connection.
func (c *Conn) write(ctx context.Context, rec []byte) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.Err()
	}
	defer func() { <-c.wsem }()
	if err := c.Err(); err != nil {
		return err
	}
	fatal, err := c.tr.write(ctx, rec)
	if err != nil && fatal {
		c.fail(fmt.Errorf("client: write: %w", err))
		return c.Err()
	}
	return err
}

func (c *Conn) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// fail ends the connection because of err (unless it already ended).
func (c *Conn) fail(err error) {
	c.setErr(err)
	_ = c.tr.close()
}

// readLoop is the Conn's one reader. It exits when the transport fails or is
// closed, or when Close is called while it waits on a full Events.
func (c *Conn) readLoop() {
	defer close(c.done)
	defer close(c.events)
	defer func() {
		c.mu.Lock()
		clear(c.pending) // waiters see done and read Err
		c.mu.Unlock()
	}()

	rec, err := c.tr.read()
	if err != nil {
		c.fail(fmt.Errorf("client: read hello: %w", err))
		return
	}
	if err := c.storeHello(rec); err != nil {
		c.fail(err)
		return
	}
	close(c.helloReady)

	for {
		rec, err := c.tr.read()
		if err != nil {
			c.fail(fmt.Errorf("client: read: %w", err))
			return
		}
		if !c.dispatch(rec) {
			return
		}
	}
}

func (c *Conn) storeHello(rec []byte) error {
	msg, err := protocol.DecodeEvent(rec)
	if err != nil {
		return fmt.Errorf("client: decode hello: %w", err)
	}
	if ev, ok := msg.(*protocol.ErrorEvent); ok && ev.Fatal {
		// A refusal instead of hello (the daemon is at
		// gateway.max_connections): its code and message, not a protocol
		// error of ours.
		return protocol.Errorf(ev.Code, "client: connection refused by the daemon: %s", ev.Message)
	}
	hello, ok := msg.(*protocol.Hello)
	if !ok {
		return protocol.Errorf(protocol.CodeProtocolError, "expected hello first, got %q", msg.Head().Type)
	}
	if major(hello.ProtocolVersion) != major(protocol.Version) {
		return protocol.Errorf(protocol.CodeProtocolError, "server speaks protocol %s, this client %s", hello.ProtocolVersion, protocol.Version)
	}
	c.hello = *hello
	return nil
}

func major(v string) string {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// dispatch routes one record; it returns false if Close interrupted it.
//
// Every record is decoded once: a record that decodes as an event (a
// response included) is routed from its typed value, and only one that does
// not takes dispatchSlow, which reads the envelope on its own.
func (c *Conn) dispatch(rec []byte) bool {
	msg, err := protocol.DecodeEvent(rec)
	if err != nil {
		return c.dispatchSlow(rec)
	}
	if resp, ok := msg.(*protocol.Response); ok && resp.ID != "" {
		if ch := c.claim(resp.ID); ch != nil {
			ch <- result{resp: resp}
			return true
		}
	}
	return c.deliver(Event{Raw: rec, Msg: msg})
}

// claim removes and returns the waiter of response id, or nil.
func (c *Conn) claim(id string) chan result {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	return ch
}

// deliver hands ev to Events; it returns false if Close interrupted it.
func (c *Conn) deliver(ev Event) bool {
	select {
	case c.events <- ev:
		return true
	case <-c.closing:
		return false
	}
}

// dispatchSlow routes a record DecodeEvent refused: a response whose
// waiter is told why it failed to decode, or an *protocol.Unknown event.
func (c *Conn) dispatchSlow(rec []byte) bool {
	h, herr := protocol.DecodeHeader(rec)
	if herr == nil && h.Type == protocol.TypeResponse && h.ID != "" {
		c.mu.Lock()
		ch, ok := c.pending[h.ID]
		if ok {
			delete(c.pending, h.ID)
		}
		c.mu.Unlock()
		if ok {
			resp := new(protocol.Response)
			if err := json.Unmarshal(rec, resp); err != nil {
				ch <- result{err: err}
			} else {
				ch <- result{resp: resp}
			}
			return true
		}
	}
	return c.deliver(Event{Raw: rec, Msg: &protocol.Unknown{Header: h, Raw: rec}})
}
