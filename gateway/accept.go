package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/telemetry"
)

// Accept backoff, as net/http.Server's: the first retry after 5 ms, each
// next one twice as late, at most a second apart; a successful accept
// starts over.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// DefaultMaxConnections is Config.MaxConnections's default.
const DefaultMaxConnections = 1024

// retryListener is a net.Listener whose Accept rides out temporary errors
// (EMFILE, ENFILE, ECONNABORTED, …) instead of returning them: one such
// error used to end the unix accept loop for good, leaving a daemon no
// client could reach again. It backs off between tries, logs
// once per burst (when it starts and when it ends) and counts every error
// in shard_accept_errors_total. Both listeners are wrapped: net/http
// retries on its own, but would log every try and count nothing.
//
// Accept is called by one goroutine (the accept loop, or http.Server's).
type retryListener struct {
	net.Listener
	kind    string // transport label: unix, websocket
	log     *slog.Logger
	metrics *telemetry.Metrics
	clock   clock.Clock
	// onError, when set, is called for every temporary error (tests).
	onError func(error)

	closeOnce sync.Once
	// done is closed by Close, so that a backoff in progress ends at once.
	done chan struct{}
}

func newRetryListener(ln net.Listener, kind string, log *slog.Logger, m *telemetry.Metrics, c clock.Clock, onError func(error)) *retryListener {
	return &retryListener{Listener: ln, kind: kind, log: log, metrics: m, clock: clock.Or(c), onError: onError, done: make(chan struct{})}
}

// Accept returns the next connection, or the error of a listener that is
// closed or failed for good.
func (l *retryListener) Accept() (net.Conn, error) {
	var delay time.Duration
	errs := 0
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if errs > 0 {
				l.log.Info("accepting connections again", "transport", l.kind, "errors", errs)
			}
			return c, nil
		}
		if !temporaryAcceptError(err) {
			return nil, err
		}
		errs++
		l.metrics.AcceptError(l.kind)
		if l.onError != nil {
			l.onError(err)
		}
		if delay == 0 {
			delay = acceptBackoffMin
		} else {
			delay = min(2*delay, acceptBackoffMax)
		}
		if errs == 1 {
			l.log.Warn("accept failed; retrying with backoff", "transport", l.kind, "err", err, "retry_in", delay)
		}
		if !l.wait(delay) {
			return nil, fmt.Errorf("gateway: accept: %w", net.ErrClosed)
		}
	}
}

// wait waits d, or until Close; it reports false for Close.
func (l *retryListener) wait(d time.Duration) bool {
	fired := make(chan struct{})
	t := l.clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-l.done:
		return false
	}
}

// Close closes the listener and ends a backoff in progress.
func (l *retryListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// temporaryAcceptError reports whether an Accept error is worth retrying:
// the process or system is out of descriptors or buffers, or one pending
// connection went away before it was taken. A closed listener is not.
func temporaryAcceptError(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// reserve takes one of the MaxConnections slots for a connection about to
// be served; it reports false at the cap.
// Every true is paired with one release: by forget, when the connection's
// actor has stopped, or by the caller when the connection never started.
func (g *Gateway) reserve() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open >= g.maxConns() {
		return false
	}
	g.open++
	return true
}

// release gives back a slot reserve took.
func (g *Gateway) release() {
	g.mu.Lock()
	g.open--
	g.mu.Unlock()
}

func (g *Gateway) maxConns() int {
	if g.cfg.MaxConnections > 0 {
		return g.cfg.MaxConnections
	}
	return DefaultMaxConnections
}

// refusalWriteTimeout bounds the write of the refusal record to a unix
// client over the cap (it fits any socket buffer; the bound is for a
// peer that is not there).
const refusalWriteTimeout = 100 * time.Millisecond

// refuseUnix answers a unix client over gateway.max_connections with a fatal
// error event instead of hello, then closes: a clean refusal it can report,
// before the process runs out of descriptors. The code is INTERNAL_ERROR: the
// code registry (docs/protocol.md §8) has no overload code, and of the ones
// it has this is the server-side condition that a retry may clear;
// PERMISSION_DENIED would tell the client it may never connect.
func (g *Gateway) refuseUnix(c net.Conn) {
	g.cfg.Metrics.ConnRefused("unix")
	g.log.Warn("refusing connection: at gateway.max_connections", "transport", "unix", "max_connections", g.maxConns())
	rec := protocol.MustMarshal(protocol.ErrorEvent{
		Header:  protocol.Header{Type: protocol.TypeError},
		Code:    protocol.CodeInternal,
		Message: fmt.Sprintf("%s (gateway.max_connections=%d)", TooManyConnectionsMessage, g.maxConns()),
		Fatal:   true,
	})
	_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
	_, _ = c.Write(append(rec, '\n'))
	c.Close()
}

// TooManyConnectionsMessage begins the message of the refusal a client over
// gateway.max_connections receives (a fatal error event on the unix
// socket, the body of a 503 on /ws).
const TooManyConnectionsMessage = "too many connections"

// acceptUnix is the unix socket's accept loop. It ends when the listener
// is closed (or fails for good: retryListener has ridden out everything
// temporary).
func (g *Gateway) acceptUnix() {
	for {
		c, err := g.unixLn.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				g.log.Error("unix listener stopped", "err", err)
			}
			return
		}
		if !g.reserve() {
			g.refuseUnix(c)
			continue
		}
		g.startConn(newUnixTransport(c), true, credential{kind: credLocal}, nil)
	}
}
