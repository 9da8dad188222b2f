package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/telemetry"
	"github.com/shard-dev/shard/web"
)

// closeFlush bounds how long Close waits for a connection's queued records.
const closeFlush = time.Second

// Subprotocol is the WebSocket subprotocol of Shard v0.1.
const Subprotocol = protocol.Subprotocol

// Config configures the gateway.
type Config struct {
	// SocketPath is the unix socket ($SHARD_HOME/daemon.sock).
	SocketPath string
	// WebAddr is the WebSocket listen address (host:port; port 0 picks one).
	WebAddr string
	// PingInterval and PingTimeout govern WebSocket keepalive (30 s, 10 s).
	PingInterval, PingTimeout time.Duration
	// TicketTTL is the lifetime of a WS ticket (≤ 30 s).
	TicketTTL time.Duration
	// Limits caps each connection's outbound queue.
	Limits outbox.Limits
	// Inbound bounds each connection's commands read and not yet answered
	// (see InboundLimits); past it the connection is not read until
	// responses drain.
	Inbound InboundLimits
	// MaxConnections caps open client connections, both transports
	// together (gateway.max_connections). Past it a unix client gets a
	// fatal error event and a WebSocket upgrade a 503. Default 0:
	// DefaultMaxConnections.
	MaxConnections int
	// ServerVersion is announced in hello.
	ServerVersion string
	// Metrics, when set, is served at /metrics on the web listener and
	// counts connections and dropped slow consumers. Default nil: no
	// /metrics endpoint, nothing recorded.
	Metrics *telemetry.Metrics
	// Web is the web listener's security policy. The zero value is
	// loopback mode.
	Web WebPolicy
	// Credentials holds principals, browser sessions and API tokens (the
	// daemon passes an adapter of its store). Default nil: browser
	// enrollment and API tokens are unavailable (only tickets minted over
	// the unix socket open a WebSocket).
	Credentials Credentials
	// Page, when set, serves GET and HEAD of every path no other route
	// takes (the web dashboard, package web), after the same Host and
	// transport checks. It sets its own Content-Security-Policy. Default
	// nil: those paths are 404.
	Page http.Handler
	// Clock is what tickets, enrollment codes, browser sessions, recorded
	// last uses and the rate limiters read the time on. Default nil: the
	// wall clock; tests pass a manual one to expire a ticket without
	// waiting for it. The accept backoff runs on it too.
	Clock clock.Clock
	// Dispatcher runs the connection actors' mailboxes (a mailrun.Pool);
	// nil is protoactor's default, a new goroutine per mailbox run.
	Dispatcher actor.Dispatcher
	// Cluster, when set, is the cluster this daemon is a node of: a
	// client's commands for another node's agents are forwarded to that
	// node's gateway (forward.go). Default nil: a single shardd.
	Cluster Cluster

	// hooks are the package's tests' probes; nil outside them.
	hooks *testHooks
}

// testHooks let the package's tests watch and inject without sleeping.
// Every field may be nil.
type testHooks struct {
	// wrapUnix wraps the unix listener before the retrying one does (to
	// inject accept errors).
	wrapUnix func(net.Listener) net.Listener
	// acceptError is called for each temporary accept error.
	acceptError func(error)
	// inflight is called with a connection's in-flight totals after each
	// change (see inflight).
	inflight func(conn uint64, records, bytes int)
	// paused is called when a connection's reader stops for backpressure.
	paused func(conn uint64)
	// readEOF is called when a connection's reader has met the end of its
	// input (a half-close), before the connection drains.
	readEOF func(conn uint64)
	// forgot is called when an ended connection has given back its slot.
	forgot func(conn uint64)
	// gatherTimeout, when set, replaces gatherTimeout (gather.go).
	gatherTimeout time.Duration
}

// Gateway accepts clients on the unix socket and the WebSocket endpoint and
// runs one connection actor per client. Create it with New, then Listen and
// Serve; Close stops everything it started.
type Gateway struct {
	cfg      Config
	sys      *actor.ActorSystem
	registry *actor.PID
	hub      *outbox.Hub
	tickets  *Tickets
	auth     *authority
	log      *slog.Logger
	// run tells this gateway's connection ids from a previous run's in
	// a connection's cluster-wide origin (agent.Client.Origin).
	run string

	// guard is the resolved web policy (Listen); the limiters guard
	// POST /enroll and POST /bootstrap.
	guard                       *guard
	enrollLimit, bootstrapLimit *limiter
	// enrollPage is the page GET /enroll serves (package web's) and
	// enrollCSP its policy, which allows exactly its inline blocks.
	enrollPage []byte
	enrollCSP  string

	ctx    context.Context
	cancel context.CancelFunc
	// group owns every goroutine the gateway starts (listeners, each
	// connection's reader, writer and watchdog, keepalives, revocation
	// closes); Close waits for them.
	group xsync.Group

	unixLn net.Listener
	webLn  net.Listener
	// tunnelLn is the other nodes' listener (ServeTunnel), or nil; set
	// under mu.
	tunnelLn net.Listener
	httpSrv  *http.Server
	// corkBufs lends WebSocket connections the buffers of large batches
	// (corkConn).
	corkBufs *sync.Pool

	// mu protects the following.
	mu     sync.Mutex
	nextID uint64
	conns  map[uint64]*connActor
	closed bool
	// open counts the connections holding a MaxConnections slot (see
	// reserve): those in conns and those about to be.
	open int
}

// New returns a gateway that hands commands to registry. cfg is copied;
// cfg.Web's zero fields get their defaults.
func New(cfg Config, sys *actor.ActorSystem, registry *actor.PID, hub *outbox.Hub, log *slog.Logger) *Gateway {
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Web = withDefaults(cfg.Web)
	cfg.Clock = clock.Or(cfg.Clock)
	enrollPage, enrollCSP := web.EnrollPage()
	return &Gateway{
		cfg: cfg, sys: sys, registry: registry, hub: hub, log: log,
		enrollPage: enrollPage, enrollCSP: enrollCSP,
		tickets:        NewTickets(cfg.TicketTTL, cfg.Clock),
		auth:           newAuthority(cfg.Credentials, cfg.Clock, cfg.Web.EnrollTTL, cfg.Web.SessionTTL),
		enrollLimit:    newLimiter(cfg.Web.EnrollLimit, cfg.Clock),
		bootstrapLimit: newLimiter(cfg.Web.BootstrapLimit, cfg.Clock),
		ctx:            ctx, cancel: cancel,
		corkBufs: newCorkPool(),
		conns:    make(map[uint64]*connActor),
		run:      runNonce(),
	}
}

// runNonce is a few random bytes naming this run of the gateway.
func runNonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// Listen binds the unix socket and the web address. A stale socket file is
// replaced; a live daemon's socket is never displaced.
func (g *Gateway) Listen() error {
	ln, err := listenUnix(g.cfg.SocketPath)
	if err != nil {
		return err
	}
	if h := g.cfg.hooks; h != nil && h.wrapUnix != nil {
		ln = h.wrapUnix(ln)
	}
	var onErr func(error)
	if h := g.cfg.hooks; h != nil {
		onErr = h.acceptError
	}
	g.unixLn = newRetryListener(ln, "unix", g.log, g.cfg.Metrics, g.cfg.Clock, onErr)
	web, err := net.Listen("tcp", g.cfg.WebAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("gateway: listen %s: %w", g.cfg.WebAddr, err)
	}
	gd, err := newGuard(g.cfg.Web, web.Addr())
	if err != nil {
		web.Close()
		ln.Close()
		return err
	}
	g.webLn, g.guard = newRetryListener(web, "websocket", g.log, g.cfg.Metrics, g.cfg.Clock, onErr), gd
	if pruned, err := g.auth.pruneSessions(); err != nil {
		g.log.Warn("prune expired browser sessions", "err", err)
	} else if len(pruned) > 0 {
		g.log.Info("pruned expired browser sessions", "sessions", len(pruned))
	}
	return nil
}

func listenUnix(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s", ErrDaemonRunning, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("gateway: remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("gateway: chmod %s: %w", path, err)
	}
	return ln, nil
}

// WebURL returns the base http URL of the web listener.
func (g *Gateway) WebURL() string {
	if g.webLn == nil {
		return ""
	}
	return "http://" + g.webLn.Addr().String()
}

// BrowserURL returns the base URL a browser reaches the daemon at: the
// listener's own http URL in loopback mode, the public origin in remote
// mode. "" before Listen.
func (g *Gateway) BrowserURL() string {
	if g.guard == nil {
		return ""
	}
	return g.guard.baseURL
}

// Tickets returns the ticket store (for the daemon's own use and tests).
func (g *Gateway) Tickets() *Tickets { return g.tickets }

// Serve starts accepting on both listeners; it returns at once.
func (g *Gateway) Serve() {
	g.httpSrv = &http.Server{
		Handler:           g.webHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	g.goTracked(func() {
		if err := g.httpSrv.Serve(g.webLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("web listener stopped", "err", err)
		}
	})
	g.goTracked(g.acceptUnix)
}

// serveWS upgrades an authenticated request. No upgrade happens without a
// valid, unexpired, unused ticket bound to the request's Origin, or a live
// API token on a request without Origin (docs/protocol.md §4.1; doc.go has
// the table).
func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request, info reqInfo) {
	// The cap first: a client refused for it keeps its ticket for a retry.
	if !g.reserve() {
		g.cfg.Metrics.ConnRefused("websocket")
		w.Header().Set("Retry-After", "1")
		g.refuse(w, r, "ws", info, refuse(http.StatusServiceUnavailable,
			fmt.Sprintf("%s (gateway.max_connections=%d)", TooManyConnectionsMessage, g.maxConns())), "")
		return
	}
	cred, ref := g.wsAuth(r)
	if ref != nil {
		g.release()
		g.refuse(w, r, "ws", info, ref, "")
		return
	}
	// The Origin was checked exactly against the allowlist above, which is
	// stricter than Accept's same-host check (and allows an allowlisted
	// origin on another host); Accept must not second-guess it.
	aw, cw := http.ResponseWriter(w), (*corkWriter)(nil)
	if _, ok := w.(http.Hijacker); ok { // else Accept refuses before writing 101
		cw = &corkWriter{ResponseWriter: w, bufs: g.corkBufs}
		aw = cw
	}
	c, err := websocket.Accept(aw, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}, InsecureSkipVerify: true})
	if err != nil {
		g.release()
		g.log.Debug("websocket accept failed", "err", err)
		return
	}
	c.SetReadLimit(protocol.DefaultMaxRecord)
	var cork *corkConn
	if cw != nil {
		cork = cw.conn
	}
	t := newWSTransport(c, cork)
	if !g.startConn(t, false, cred, nil) {
		return
	}
	g.goTracked(func() { g.keepalive(t, cred) })
	// A revocation that committed between the check above and the
	// registration of this connection found nothing to close: look again.
	if !g.credLive(cred) {
		g.closeConns(func(c credential) bool { return c == cred })
	}
}

// keepalive pings a WebSocket peer; one that stops answering is dropped,
// and so is one whose credential has expired since (a browser session past
// web.session_ttl; revocations close connections at once).
func (g *Gateway) keepalive(t *wsTransport, cred credential) {
	if g.cfg.PingInterval <= 0 {
		return
	}
	tick := time.NewTicker(g.cfg.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.closed:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(g.ctx, g.cfg.PingTimeout)
		err := t.conn.Ping(ctx)
		cancel()
		if err != nil {
			if g.ctx.Err() == nil {
				g.log.Info("dropping websocket peer that stopped answering pings", "err", err)
			}
			t.Close("ping timeout", true)
			return
		}
		if !g.credLive(cred) {
			g.log.Info("closing connection: credential expired", "credential", cred.id)
			t.closeWith(websocket.StatusPolicyViolation, "credential expired")
			return
		}
	}
}

// startConn spawns the connection actor for t, opened under cred. The
// caller has reserved its slot; startConn owns it from then on. fwd is
// the identity another node forwards a client's commands under
// (ServeTunnel), nil for a client of this node.
func (g *Gateway) startConn(t transport, local bool, cred credential, fwd *forwardIdent) bool {
	g.mu.Lock()
	if g.closed {
		g.open--
		g.mu.Unlock()
		t.Close("daemon shutting down", false)
		return false
	}
	g.nextID++
	id := g.nextID
	out := outbox.New(g.cfg.Limits)
	if ut, ok := t.(*unixTransport); ok {
		if w := ut.direct(); w != nil {
			out.SetDirect(w) // a client that keeps up is written to by the pusher
		}
	}
	a := &connActor{g: g, id: id, t: t, out: out, local: local, cred: cred, forwarded: fwd, writerDone: make(chan struct{}),
		in: newInflight(g.cfg.Inbound, g.inflightHook(id)), quit: make(chan struct{})}
	out.SetObserver(a.in.observe)
	g.conns[id] = a
	g.mu.Unlock()
	g.cfg.Metrics.ConnOpened(t.Kind())

	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithGuardian(supervisor.StopOnFailure()), actor.WithDispatcher(g.cfg.Dispatcher))
	if _, err := g.sys.Root.SpawnNamed(props, fmt.Sprintf("conn-%d", id)); err != nil {
		g.log.Error("spawn connection actor", "err", err)
		t.Close("internal error", false)
		g.forget(id)
		return false
	}
	return true
}

// inflightHook is the tests' inflight probe for connection id, or nil.
func (g *Gateway) inflightHook(id uint64) func(records, bytes int) {
	h := g.cfg.hooks
	if h == nil || h.inflight == nil {
		return nil
	}
	return func(records, bytes int) { h.inflight(id, records, bytes) }
}

// credKind says what opened a connection.
type credKind int

const (
	// credLocal: the unix socket, or a ticket minted over it (local trust).
	credLocal credKind = iota
	// credSession: a browser session, through a /bootstrap ticket.
	credSession
	// credToken: an API token.
	credToken
	// credForwarded: another node of the cluster, for one of its clients
	// (ServeTunnel); that client's own credential is that node's to
	// revoke, which closes this connection with it.
	credForwarded
)

// credential is what a connection was opened under; revoking it closes
// the connection.
type credential struct {
	kind      credKind
	id        string // session or token id; "" for credLocal
	principal string
}

// credLive reports whether cred is still valid.
func (g *Gateway) credLive(c credential) bool {
	switch c.kind {
	case credSession:
		return g.auth.sessionLive(c.id)
	case credToken:
		return g.auth.tokenLive(c.id)
	}
	return true
}

// closeConns closes, with a policy-violation close code, every WebSocket
// connection whose credential matches, and returns how many. The close
// handshakes run in the background.
func (g *Gateway) closeConns(match func(credential) bool) int {
	g.mu.Lock()
	var hit []*connActor
	for _, a := range g.conns {
		if a.cred.kind != credLocal && match(a.cred) {
			hit = append(hit, a)
		}
	}
	g.mu.Unlock()
	for _, a := range hit {
		g.log.Info("closing connection: credential revoked", "conn", a.id, "credential", a.cred.id)
		g.goTracked(func() {
			if ws, ok := a.t.(*wsTransport); ok {
				ws.closeWith(websocket.StatusPolicyViolation, "credential revoked")
				return
			}
			a.t.Close("credential revoked", false)
		})
	}
	return len(hit)
}

// countConns counts open connections by credential id.
func (g *Gateway) countConns() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := make(map[string]int)
	for _, a := range g.conns {
		if a.cred.id != "" {
			n[a.cred.id]++
		}
	}
	return n
}

// forget drops a connection that ended (its actor stopped).
func (g *Gateway) forget(id uint64) {
	g.mu.Lock()
	a := g.conns[id]
	if a != nil {
		delete(g.conns, id)
		g.open--
	}
	g.mu.Unlock()
	if a == nil {
		return
	}
	if h := g.cfg.hooks; h != nil && h.forgot != nil {
		defer h.forgot(id)
	}
	g.cfg.Metrics.ConnClosed(a.t.Kind())
	if a.out.Overflowed() {
		g.cfg.Metrics.SlowConsumerDropped(a.t.Kind())
	}
}

// goTracked runs f in a goroutine of the gateway's group, which Close
// waits for. Once Close has begun waiting, f is not run: the gateway is
// shutting down and whatever f would serve is being torn down.
func (g *Gateway) goTracked(f func()) {
	if !g.group.Go(f) {
		g.log.Debug("gateway closed: goroutine not started")
	}
}

// StopAccepting closes both listeners; existing connections stay open (a
// graceful shutdown lets attached clients watch active turns finish).
func (g *Gateway) StopAccepting() {
	g.mu.Lock()
	g.closed = true
	tunnelLn := g.tunnelLn
	g.mu.Unlock()
	if g.unixLn != nil {
		g.unixLn.Close()
	}
	if tunnelLn != nil {
		tunnelLn.Close()
	}
	if g.httpSrv != nil {
		// Hijacked WebSocket connections are not affected by Shutdown.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = g.httpSrv.Shutdown(ctx)
		cancel()
	} else if g.webLn != nil {
		g.webLn.Close()
	}
}

// Close stops accepting, closes every connection and waits for the
// gateway's goroutines. It is idempotent.
func (g *Gateway) Close() {
	g.StopAccepting()
	g.mu.Lock()
	conns := make([]*connActor, 0, len(g.conns))
	for _, a := range g.conns {
		conns = append(conns, a)
	}
	g.mu.Unlock()
	// Let each writer flush what is queued (e.g. the daemon.shutdown
	// response), bounded, then close the transports. The flushes have a
	// group of their own: they must end before the context is cancelled,
	// while the gateway's own goroutines end only after. The bound is wall
	// time, not cfg.Clock: a test's manual clock must not hold a shutdown.
	var flushes xsync.Group
	for _, a := range conns {
		flushes.Go(func() {
			a.out.Close()
			t := time.NewTimer(closeFlush)
			defer t.Stop()
			select {
			case <-a.writerDone:
			case <-t.C:
			}
			a.t.Close("daemon shutting down", false)
		})
	}
	flushes.Close()
	g.cancel()
	g.group.Close()
}
