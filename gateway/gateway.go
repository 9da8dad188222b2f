package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"

	"github.com/shard-dev/shard/gateway/outbox"
	"github.com/shard-dev/shard/metrics"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
)

// closeFlush bounds how long Close waits for a connection's queued records.
const closeFlush = time.Second

// Subprotocol is the WebSocket subprotocol of Shard v0.1.
const Subprotocol = "shard.v1"

// ticketPrefix marks the ticket entry of Sec-WebSocket-Protocol.
const ticketPrefix = "ticket."

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
	// ServerVersion is announced in hello.
	ServerVersion string
	// Metrics, when set, is served at /metrics on the web listener and
	// counts connections and dropped slow consumers. Default nil: no
	// /metrics endpoint, nothing recorded.
	Metrics *metrics.Metrics
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
	log      *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	unixLn  net.Listener
	webLn   net.Listener
	httpSrv *http.Server

	// mu protects the following.
	mu     sync.Mutex
	nextID uint64
	conns  map[uint64]*connActor
	closed bool
}

// New returns a gateway that hands commands to registry.
func New(cfg Config, sys *actor.ActorSystem, registry *actor.PID, hub *outbox.Hub, log *slog.Logger) *Gateway {
	ctx, cancel := context.WithCancel(context.Background())
	return &Gateway{
		cfg: cfg, sys: sys, registry: registry, hub: hub, log: log,
		tickets: NewTickets(cfg.TicketTTL, nil),
		ctx:     ctx, cancel: cancel,
		conns: make(map[uint64]*connActor),
	}
}

// Listen binds the unix socket and the web address. A stale socket file is
// replaced; a live daemon's socket is never displaced.
func (g *Gateway) Listen() error {
	ln, err := listenUnix(g.cfg.SocketPath)
	if err != nil {
		return err
	}
	g.unixLn = ln
	web, err := net.Listen("tcp", g.cfg.WebAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("gateway: listen %s: %w", g.cfg.WebAddr, err)
	}
	g.webLn = web
	return nil
}

// ErrDaemonRunning reports a live daemon on the socket path.
var ErrDaemonRunning = errors.New("gateway: another shardd is serving on this socket")

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

// Tickets returns the ticket store (for the daemon's own use and tests).
func (g *Gateway) Tickets() *Tickets { return g.tickets }

// Serve starts accepting on both listeners; it returns at once.
func (g *Gateway) Serve() {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", g.serveWS)
	if g.cfg.Metrics != nil {
		// /metrics needs no ticket, unlike /ws: it carries counts, states
		// and latencies only (never a prompt, task, path, agent id or
		// ticket), the listener is loopback-only (web.host is validated),
		// and Prometheus scrapers cannot mint single-use tickets.
		mux.Handle("GET /metrics", g.cfg.Metrics.Handler())
	}
	g.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)}
	g.goTracked(func() {
		if err := g.httpSrv.Serve(g.webLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("web listener stopped", "err", err)
		}
	})
	g.goTracked(func() {
		for {
			c, err := g.unixLn.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					g.log.Error("unix listener stopped", "err", err)
				}
				return
			}
			g.startConn(newUnixTransport(c), true)
		}
	})
}

// serveWS upgrades an authenticated request. No upgrade happens without a
// valid, unexpired, unused ticket (spec §4.1).
func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request) {
	ticket, hasProto := parseProtocols(r.Header.Values("Sec-WebSocket-Protocol"))
	if !hasProto || !g.tickets.Consume(ticket) {
		http.Error(w, "unauthorized: a valid single-use ticket is required", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		g.log.Debug("websocket accept failed", "err", err)
		return
	}
	c.SetReadLimit(protocol.DefaultMaxRecord)
	t := &wsTransport{conn: c}
	if g.startConn(t, false) {
		g.goTracked(func() { g.keepalive(t) })
	}
}

// parseProtocols finds the shard.v1 subprotocol and the ticket entry.
func parseProtocols(values []string) (ticket string, ok bool) {
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == Subprotocol:
				ok = true
			case strings.HasPrefix(p, ticketPrefix):
				ticket = strings.TrimPrefix(p, ticketPrefix)
			}
		}
	}
	return ticket, ok
}

// keepalive pings a WebSocket peer; one that stops answering is dropped.
func (g *Gateway) keepalive(t *wsTransport) {
	if g.cfg.PingInterval <= 0 {
		return
	}
	tick := time.NewTicker(g.cfg.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-g.ctx.Done():
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
	}
}

// startConn spawns the connection actor for t.
func (g *Gateway) startConn(t transport, local bool) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		t.Close("daemon shutting down", false)
		return false
	}
	g.nextID++
	id := g.nextID
	a := &connActor{g: g, id: id, t: t, out: outbox.New(g.cfg.Limits), local: local, writerDone: make(chan struct{})}
	g.conns[id] = a
	g.mu.Unlock()
	g.cfg.Metrics.ConnOpened(t.Kind())

	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithGuardian(supervisor.StopOnFailure()))
	if _, err := g.sys.Root.SpawnNamed(props, fmt.Sprintf("conn-%d", id)); err != nil {
		g.log.Error("spawn connection actor", "err", err)
		t.Close("internal error", false)
		g.forget(id)
		return false
	}
	return true
}

// forget drops a connection that ended (its actor stopped).
func (g *Gateway) forget(id uint64) {
	g.mu.Lock()
	a := g.conns[id]
	delete(g.conns, id)
	g.mu.Unlock()
	if a == nil {
		return
	}
	g.cfg.Metrics.ConnClosed(a.t.Kind())
	if a.out.Overflowed() {
		g.cfg.Metrics.SlowConsumerDropped(a.t.Kind())
	}
}

// goTracked runs f in a goroutine that Close waits for.
func (g *Gateway) goTracked(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

// StopAccepting closes both listeners; existing connections stay open (a
// graceful shutdown lets attached clients watch active turns finish).
func (g *Gateway) StopAccepting() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	if g.unixLn != nil {
		g.unixLn.Close()
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
	// response), bounded, then close the transports.
	var wg sync.WaitGroup
	for _, a := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.out.Close()
			select {
			case <-a.writerDone:
			case <-time.After(closeFlush):
			}
			a.t.Close("daemon shutting down", false)
		}()
	}
	wg.Wait()
	g.cancel()
	g.wg.Wait()
}
