package tunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Addr names one end of a tunnel: the subject a Listener serves (a node's
// name in a cluster) and the inbox a connection receives its frames on.
type Addr struct {
	// Subject is the listener's subject; empty for the dialing end.
	Subject string
	// Inbox is the connection's inbox on this end; empty for a Listener.
	Inbox string
}

// Network is "nats".
func (Addr) Network() string { return "nats" }

// String is the subject, the inbox, or both as "subject#inbox".
func (a Addr) String() string {
	switch {
	case a.Subject == "":
		return a.Inbox
	case a.Inbox == "":
		return a.Subject
	}
	return a.Subject + "#" + a.Inbox
}

// sent is a data frame sent and not acknowledged yet.
type sent struct {
	seq  uint64
	data []byte
}

// Conn is one end of a tunnel: a net.Conn whose bytes travel as frames
// over NATS core.
//
// A Conn is safe for concurrent use: Reads may run alongside Writes (and
// several of each, each Write's bytes staying contiguous), deadlines may be
// set at any time, and Close unblocks every Read and Write. Its state is
// guarded by one mutex; the NATS subscription's goroutine and the Conn's
// own timer goroutine take it to handle a frame or a tick, and never block
// under it but to publish.
type Conn struct {
	nc            *nats.Conn
	opts          Options
	inbox         string // where the peer publishes to us
	local, remote Addr
	ln            *Listener // the listener that accepted it; nil when dialed

	wsem chan struct{} // held by the one Write sending at a time
	rdl  *deadline
	wdl  *deadline
	quit chan struct{} // closed when the Conn is released
	done chan struct{} // closed when its timer goroutine has cleaned up

	// mu protects the following.
	mu       sync.Mutex
	peer     string // the peer's inbox; empty until a dialer has the reply
	sub      *nats.Subscription
	changed  chan struct{} // closed and replaced on every change waiters watch
	released bool          // nothing is sent or received any more
	err      error         // why the connection failed; nil when it did not

	// The sending half.
	sendNext   uint64 // offset of the next byte written
	unacked    []sent // data sent and not acknowledged, in order
	peerAck    uint64 // the highest ack the peer sent
	peerLimit  uint64 // the peer's window ends here
	peerWindow uint64 // the window the peer announced when it opened
	wclosed    bool   // CloseWrite or Close: a FIN at finOff
	finOff     uint64
	finAcked   bool
	dataSends  int       // data frames published (for dropData)
	lastSent   time.Time // when anything was last published
	lastResend time.Time // when the retransmit clock last started
	recovering bool      // a timeout resent the first frame; acks below recoverTo resend the next
	recoverTo  uint64
	nackResent uint64 // 1 + the offset last resent for a NACK; 0 for none

	// The receiving half.
	recvNext uint64   // the next offset expected from the peer
	rbuf     [][]byte // received, not read; rbuf[0][roff:] is next
	roff     int
	rbufLen  int
	consumed uint64            // payload bytes read (or discarded after Close)
	advLimit uint64            // the highest limit advertised to the peer
	ooo      map[uint64][]byte // frames past a gap, by offset (at most maxOOO)
	peerFin  bool              // the peer's FIN arrived after all its data
	peerFull bool              // ... and it closed its reading half too
	closed   bool              // Close was called
	closedAt time.Time
	heard    time.Time // when the peer was last heard
}

func newConn(nc *nats.Conn, opts Options, inbox string) *Conn {
	c := &Conn{
		nc:      nc,
		opts:    opts,
		inbox:   inbox,
		wsem:    make(chan struct{}, 1),
		rdl:     newDeadline(),
		wdl:     newDeadline(),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	c.advLimit = uint64(opts.Window)
	now := time.Now()
	c.heard, c.lastSent, c.lastResend = now, now, now
	return c
}

// ---- net.Conn ----

// Read reads what the peer wrote, in order. It returns io.EOF once the peer
// closed its writing half (Close or CloseWrite) and everything before was
// read; the connection's error (ErrPeerSilent, ...) after what arrived
// before it; net.ErrClosed after Close.
func (c *Conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	for {
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, c.opError("read", net.ErrClosed)
		case c.rdl.passed():
			c.mu.Unlock()
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		case len(b) == 0:
			c.mu.Unlock()
			return 0, nil
		case c.rbufLen > 0:
			n := c.takeLocked(b)
			c.mu.Unlock()
			return n, nil
		case c.peerFin:
			c.mu.Unlock()
			return 0, io.EOF
		case c.err != nil:
			err := c.err
			c.mu.Unlock()
			return 0, c.opError("read", err)
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-c.rdl.wait():
		}
		c.mu.Lock()
	}
}

// takeLocked copies buffered bytes into b and opens the window when enough
// was read. c.mu must be held.
func (c *Conn) takeLocked(b []byte) int {
	n := 0
	for n < len(b) && c.rbufLen > 0 {
		k := copy(b[n:], c.rbuf[0][c.roff:])
		n += k
		c.roff += k
		c.rbufLen -= k
		if c.roff == len(c.rbuf[0]) {
			c.rbuf[0] = nil
			c.rbuf = c.rbuf[1:]
			c.roff = 0
		}
	}
	c.consumed += uint64(n)
	// A window update when a quarter of the window opened: the peer may be
	// waiting for it.
	if limit := c.limitLocked(); limit > c.advLimit && limit-c.advLimit >= uint64(c.opts.Window)/4 {
		c.sendLocked(frame{kind: frameAck})
	}
	return n
}

// Write sends b, blocking while the peer's window is full (it has not read
// what was sent). It returns net.ErrClosed after Close or CloseWrite,
// ErrPeerClosed once the peer closed, and the connection's error.
func (c *Conn) Write(b []byte) (int, error) {
	if c.wdl.passed() {
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	}
	select {
	case c.wsem <- struct{}{}:
	case <-c.wdl.wait():
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	case <-c.quit:
		// Released: the checks below say why.
		c.wsem <- struct{}{}
	}
	defer func() { <-c.wsem }()
	n := 0
	c.mu.Lock()
	for {
		var err error
		switch {
		case c.closed || c.wclosed:
			err = net.ErrClosed
		case c.peerFull:
			err = ErrPeerClosed
		case c.err != nil:
			err = c.err
		case c.released:
			err = net.ErrClosed
		case c.wdl.passed():
			err = os.ErrDeadlineExceeded
		}
		if err != nil {
			c.mu.Unlock()
			return n, c.opError("write", err)
		}
		if n == len(b) {
			c.mu.Unlock()
			return n, nil
		}
		if c.peer != "" && c.peerLimit > c.sendNext {
			k := min(len(b)-n, c.maxPayload(), int(min(c.peerLimit-c.sendNext, maxPayload)))
			s := sent{seq: c.sendNext, data: append([]byte(nil), b[n:n+k]...)}
			if len(c.unacked) == 0 {
				c.lastResend = time.Now()
			}
			c.unacked = append(c.unacked, s)
			c.sendNext += uint64(k)
			n += k
			c.sendDataLocked(s)
			continue
		}
		if c.opts.writeBlocked != nil {
			c.opts.writeBlocked(c.sendNext-c.peerAck, c.sendNext+c.peerWindow-c.peerLimit)
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-c.wdl.wait():
		}
		c.mu.Lock()
	}
}

// maxPayload is the largest data payload: 64 KiB, or less when the NATS
// server's max_payload is smaller.
func (c *Conn) maxPayload() int {
	return int(max(min(int64(maxPayload), c.nc.MaxPayload()-headerLen), 1))
}

// CloseWrite closes the writing half: the peer reads io.EOF after what was
// written, and this side can still read until the peer closes its own.
// Write returns net.ErrClosed afterwards.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.wclosed {
		return c.opError("close", net.ErrClosed)
	}
	c.wclosed = true
	c.finOff = c.sendNext
	c.sendFinLocked()
	c.maybeReleaseLocked()
	c.notifyLocked()
	return nil
}

// Close closes both halves. Read and Write, blocked or later, return
// net.ErrClosed. What was written is still delivered: the Conn keeps
// retransmitting it, then its FIN, in the background until the peer
// acknowledges them, goes silent, or Options.Linger passes. What arrives
// after Close is acknowledged and dropped, and the peer's writes fail with
// ErrPeerClosed once it has the FIN.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("close", net.ErrClosed)
	}
	c.closed = true
	c.closedAt = time.Now()
	c.consumed += uint64(c.rbufLen)
	c.rbuf, c.roff, c.rbufLen = nil, 0, 0
	if !c.wclosed {
		c.wclosed = true
		c.finOff = c.sendNext
	}
	c.sendFinLocked()
	c.maybeReleaseLocked()
	c.notifyLocked()
	return nil
}

// LocalAddr is this end: the listener's subject and this connection's
// inbox on an accepted Conn, the dialer's inbox on a dialed one.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr is the other end, in the same terms.
func (c *Conn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.remote
	a.Inbox = c.peer
	return a
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline bounds blocked and future Reads; past it they return an
// error wrapping os.ErrDeadlineExceeded. The zero time removes it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline bounds blocked and future Writes the same way. A Write
// that times out may have sent part of its bytes; it says how many.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.set(t)
	return nil
}

func (c *Conn) opError(op string, err error) error {
	// c.remote without the peer's inbox, which c.mu guards: the subject
	// names the other end well enough in an error.
	return &net.OpError{Op: op, Net: "nats", Source: c.local, Addr: c.remote, Err: err}
}

var (
	_ net.Conn = (*Conn)(nil)
	_ net.Addr = Addr{}
)

// ---- frames in ----

// handle is the subscription's callback: one frame from the peer.
func (c *Conn) handle(m *nats.Msg) {
	f, err := decodeFrame(m.Data)
	if err != nil {
		return // not a frame of ours: dropped like a lost one
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	c.heard = time.Now()
	c.onAckLocked(f)
	switch f.kind {
	case frameData:
		c.onDataLocked(f)
	case frameFin:
		c.onFinLocked(f)
	}
	c.maybeReleaseLocked()
	c.notifyLocked()
}

// onAckLocked takes the peer's receive state that every frame carries.
func (c *Conn) onAckLocked(f frame) {
	top := c.sendNext
	if c.wclosed {
		top++ // the FIN's own offset
	}
	if f.ack > top {
		return // acknowledges what was never sent: ignore it
	}
	progressed := f.ack > c.peerAck
	if progressed {
		c.peerAck = f.ack
		c.lastResend = time.Now()
		for len(c.unacked) > 0 {
			s := &c.unacked[0]
			end := s.seq + uint64(len(s.data))
			if end <= f.ack {
				c.unacked[0] = sent{}
				c.unacked = c.unacked[1:]
				continue
			}
			if s.seq < f.ack {
				s.data = s.data[f.ack-s.seq:]
				s.seq = f.ack
			}
			break
		}
	}
	if c.wclosed && f.ack > c.finOff {
		c.finAcked = true
	}
	c.peerLimit = max(c.peerLimit, f.limit)
	nack := f.kind == frameAck && f.flags&flagNack != 0 && len(c.unacked) > 0 && c.unacked[0].seq == f.ack && c.nackResent != f.ack+1
	if c.recovering && f.ack >= c.recoverTo {
		c.recovering = false
	}
	partial := c.recovering && progressed
	switch {
	case nack:
		// The peer holds frames past this one: it is the one lost.
		c.nackResent = f.ack + 1
		c.resendFirstLocked()
	case partial:
		// Recovering from a timeout: the next hole is at the new ack.
		c.resendFirstLocked()
	}
}

func (c *Conn) onDataLocked(f frame) {
	if c.peerFin {
		return
	}
	end := f.seq + uint64(len(f.payload))
	switch {
	case f.seq > c.recvNext:
		// A frame before this one was lost: keep this one (within the
		// window) and say so, so that the peer resends the lost one
		// without waiting for its timer.
		if _, dup := c.ooo[f.seq]; !dup && len(c.ooo) < maxOOO && end <= c.advLimit {
			if c.ooo == nil {
				c.ooo = map[uint64][]byte{}
			}
			c.ooo[f.seq] = f.payload
		}
		c.sendLocked(frame{kind: frameAck})
		return
	case end <= c.recvNext:
		// A duplicate: our acknowledgement may have been lost.
		c.sendLocked(frame{kind: frameAck})
		return
	}
	data := f.payload[c.recvNext-f.seq:]
	if room := c.advLimit - min(c.recvNext, c.advLimit); uint64(len(data)) > room {
		data = data[:room] // beyond the window we gave: a broken peer
	}
	c.acceptLocked(data)
	// What was kept past the gap may follow now.
	for len(c.ooo) > 0 {
		found := false
		for seq, p := range c.ooo {
			end := seq + uint64(len(p))
			if end <= c.recvNext {
				delete(c.ooo, seq)
				continue
			}
			if seq <= c.recvNext {
				delete(c.ooo, seq)
				c.acceptLocked(p[c.recvNext-seq:])
				found = true
			}
		}
		if !found {
			break
		}
	}
	c.sendLocked(frame{kind: frameAck})
}

// acceptLocked takes in-order bytes at recvNext: buffered for Read, or
// dropped after Close.
func (c *Conn) acceptLocked(data []byte) {
	if len(data) == 0 {
		return
	}
	c.recvNext += uint64(len(data))
	if c.closed {
		c.consumed += uint64(len(data))
		return
	}
	c.rbuf = append(c.rbuf, data)
	c.rbufLen += len(data)
}

func (c *Conn) onFinLocked(f frame) {
	switch {
	case c.peerFin:
		// A retransmission, or the full close after a CloseWrite.
	case f.seq != c.recvNext:
		// Data before it is missing (or it is bogus): the ack tells.
	default:
		c.peerFin = true
		c.recvNext++
	}
	if c.peerFin && f.flags&flagFull != 0 && !c.peerFull {
		c.peerFull = true
		c.unacked = nil // nobody will read it
	}
	c.sendLocked(frame{kind: frameAck})
}

// ---- frames out ----

// limitLocked is the offset the peer may send up to.
func (c *Conn) limitLocked() uint64 {
	if c.closed {
		return c.recvNext + uint64(c.opts.Window)
	}
	return c.consumed + uint64(c.opts.Window)
}

// sendLocked publishes f to the peer with this side's receive state. A
// publish error that means the NATS connection is gone fails the Conn;
// others are losses, which retransmission covers.
func (c *Conn) sendLocked(f frame) {
	if c.peer == "" || c.released {
		return
	}
	f.ack = c.recvNext
	f.limit = c.limitLocked()
	if f.kind == frameAck && len(c.ooo) > 0 {
		f.flags |= flagNack
	}
	c.advLimit = max(c.advLimit, f.limit)
	c.lastSent = time.Now()
	if f.kind == frameData && c.opts.dropData > 0 {
		c.dataSends++
		if c.dataSends%c.opts.dropData == 0 {
			return
		}
	}
	buf := appendFrame(make([]byte, 0, headerLen+len(f.payload)), f)
	if err := c.nc.Publish(c.peer, buf); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) {
			c.failLocked(fmt.Errorf("%w: %w", ErrNATSClosed, err))
		}
	}
}

func (c *Conn) sendDataLocked(s sent) {
	c.sendLocked(frame{kind: frameData, seq: s.seq, payload: s.data})
}

// sendFinLocked sends the FIN (everything written before it was sent:
// Write publishes at once), with flagFull after Close.
func (c *Conn) sendFinLocked() {
	var flags byte
	if c.closed {
		flags = flagFull
	}
	c.sendLocked(frame{kind: frameFin, flags: flags, seq: c.finOff})
}

// resendFirstLocked sends the first frame not acknowledged again, or the
// FIN when all data was. The receiver keeps what came past a gap, so the
// first hole is all that is resent; the next one is found by the next
// NACK or partial acknowledgement.
func (c *Conn) resendFirstLocked() {
	c.lastResend = time.Now()
	switch {
	case len(c.unacked) > 0:
		c.sendDataLocked(c.unacked[0])
	case c.wclosed && !c.finAcked:
		c.sendFinLocked()
	}
}

// ---- time and the end ----

// run is the Conn's timer goroutine: retransmission, keepalive, the peer's
// silence and the linger after Close. It owns the subscription's end.
func (c *Conn) run() {
	defer close(c.done)
	t := time.NewTicker(c.opts.tick())
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			c.mu.Lock()
			sub := c.sub
			c.mu.Unlock()
			if sub != nil {
				_ = sub.Unsubscribe() // fails only when the NATS connection is gone, which drops it too
			}
			if c.ln != nil {
				c.ln.forget(c)
			}
			return
		case now := <-t.C:
			c.tick(now)
		}
	}
}

func (c *Conn) tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	switch {
	case c.nc.IsClosed():
		c.failLocked(ErrNATSClosed)
	case now.Sub(c.heard) > c.opts.PeerTimeout:
		c.failLocked(fmt.Errorf("%w: nothing heard for %s", ErrPeerSilent, now.Sub(c.heard).Round(time.Millisecond)))
	case c.closed && now.Sub(c.closedAt) > c.opts.Linger:
		c.releaseLocked()
	}
	if c.released {
		c.notifyLocked()
		return
	}
	pending := len(c.unacked) > 0 || c.wclosed && !c.finAcked
	if pending && now.Sub(c.lastResend) >= c.opts.RetransmitTimeout {
		c.recovering, c.recoverTo, c.nackResent = true, c.sendNext, 0
		c.resendFirstLocked()
	}
	if now.Sub(c.lastSent) >= c.opts.KeepAlive {
		c.sendLocked(frame{kind: frameAck})
	}
	c.maybeReleaseLocked()
	c.notifyLocked()
}

// watch makes sub the Conn's subscription: when it ends without the Conn
// having let it go (its NATS connection closed), the Conn fails with
// ErrNATSClosed at once.
func (c *Conn) watch(sub *nats.Subscription) {
	c.mu.Lock()
	c.sub = sub
	c.mu.Unlock()
	sub.SetClosedHandler(func(string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.released {
			c.failLocked(fmt.Errorf("%w: the subscription ended", ErrNATSClosed))
			c.notifyLocked()
		}
	})
}

// failLocked ends the connection with err (the first cause wins).
func (c *Conn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
	c.releaseLocked()
}

// maybeReleaseLocked releases the Conn once nothing is left to exchange:
// the peer closed entirely, or this side's FIN is acknowledged and either
// this side closed or the peer's FIN arrived too.
func (c *Conn) maybeReleaseLocked() {
	if c.peerFull || c.wclosed && c.finAcked && (c.closed || c.peerFin) {
		c.releaseLocked()
	}
}

// releaseLocked stops sending and receiving; the timer goroutine drops the
// subscription. Reads still return what was buffered.
func (c *Conn) releaseLocked() {
	if c.released {
		return
	}
	c.released = true
	c.unacked, c.ooo = nil, nil
	close(c.quit)
}

// notifyLocked wakes every blocked Read and Write to look again.
func (c *Conn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
