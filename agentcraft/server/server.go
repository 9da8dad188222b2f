package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Config is what a Server needs. The zero values of the optional fields
// are the dialect's defaults.
type Config struct {
	// Listen is the TCP address to serve on, e.g. "127.0.0.1:7878" (the
	// dialect's default, DefaultListen); port 0 picks a free port.
	Listen string
	// AllowNonLoopback lets Listen name an address that is not a loopback
	// one. Default false: such an address is refused (ErrNotLoopback).
	// The Host rule still holds either way (docs/agentcraft.md §1).
	AllowNonLoopback bool
	// Socket is the daemon's unix socket, which the server dials as a
	// client of Shard's wire protocol.
	Socket string
	// Repos are repositories registered from the configuration (the
	// config's team.repo), listed before those of ReposFile.
	Repos []string
	// ReposFile is where repo.add'ed repositories are kept, durably (a
	// JSON list of paths, written before repo.add is acknowledged). ""
	// keeps them in memory only.
	ReposFile string
	// Foreman is the status the snapshot and foreman.status carry; Version
	// "" is filled with the daemon's server version.
	Foreman wire.ForemanStatus
	// Heartbeat is how often each connection is pinged. Default
	// wire.Heartbeat (15 s).
	Heartbeat time.Duration
	// OutboxMessages bounds each connection's queue of frames not yet
	// written; a client that falls that far behind is disconnected with
	// StatusPolicyViolation. Default 4096.
	OutboxMessages int
	// Git runs git with args in dir and returns its standard output.
	// Default: the git executable on PATH.
	Git func(ctx context.Context, dir string, args ...string) ([]byte, error)
	// Logger receives the server's logs. Default: discarded.
	Logger *slog.Logger
}

// DefaultListen is the dialect's default address.
var DefaultListen = fmt.Sprintf("127.0.0.1:%d", wire.DefaultPort)

// MaxFrame bounds a client's frame (coder/websocket's default is 32 KiB,
// short for a goal's text); a larger one closes the connection with
// StatusMessageTooBig.
const MaxFrame = 1 << 20

// requestTimeout bounds each command the server sends the daemon on a
// client's behalf.
const requestTimeout = 60 * time.Second

// Server serves the dialect to its WebSocket clients and speaks Shard's
// wire protocol to the daemon.
//
// Start it once, Close it once (Close is safe to call twice and without a
// Start). Its methods are safe for concurrent use.
type Server struct {
	cfg  Config
	log  *slog.Logger
	up   *client.Conn
	ln   net.Listener
	http *http.Server

	// repoMu serializes repo.add's writes of ReposFile; taken before mu,
	// never under it.
	repoMu sync.Mutex

	// wg counts the goroutines the server started and the connections it
	// serves; Add is called under mu while ctx is live.
	wg        sync.WaitGroup
	ctx       context.Context // cancelled by Close, under mu
	cancel    context.CancelFunc
	closeOnce sync.Once

	// mu protects the following: the projection and the set of clients
	// that said hello (a snapshot and the broadcasts after it are queued
	// under mu, so their order is the state's).
	mu      sync.Mutex
	m       *model
	clients map[*conn]bool
	foreman wire.ForemanStatus
	// feedIDs are the ids of the feed items seen lately (feedOrder, oldest
	// first), so that one read at start and announced too is sent once.
	feedIDs   map[string]bool
	feedOrder []string
}

// New checks cfg and returns a Server that is not started yet.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if err := CheckListen(cfg.Listen, cfg.AllowNonLoopback); err != nil {
		return nil, err
	}
	if cfg.Socket == "" {
		return nil, fmt.Errorf("agentcraft server: %w", errNoSocket)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = wire.Heartbeat
	}
	if cfg.OutboxMessages <= 0 {
		cfg.OutboxMessages = 4096
	}
	if cfg.Git == nil {
		cfg.Git = execGit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Foreman.Backend == "" {
		cfg.Foreman.Backend = wire.BackendSim
	}
	if cfg.Foreman.Auth == "" {
		cfg.Foreman.Auth = wire.AuthOK
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: cfg.Logger, m: newModel(), clients: map[*conn]bool{}, ctx: ctx, cancel: cancel}, nil
}

// CheckListen refuses a listen address that is not host:port, or whose
// host is not a loopback address (127.0.0.0/8, ::1 or localhost) unless
// allowNonLoopback.
func CheckListen(addr string, allowNonLoopback bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("agentcraft server: listen address %q: %w", addr, err)
	}
	if allowNonLoopback || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("agentcraft server: listen address %q: %w", addr, ErrNotLoopback)
}

// Start dials the daemon, loads the team's records, and starts serving.
// When it returns nil, Addr answers and clients may connect.
func (s *Server) Start(ctx context.Context) error {
	up, err := client.Dial(ctx, s.cfg.Socket)
	if err != nil {
		return fmt.Errorf("agentcraft server: %w", err)
	}
	s.up = up
	if s.cfg.Foreman.Version == "" {
		s.cfg.Foreman.Version = up.Hello().ServerVersion
	}
	s.foreman = s.cfg.Foreman
	if err := s.loadRepos(ctx); err != nil {
		_ = up.Close()
		return err
	}
	if err := s.load(ctx); err != nil {
		_ = up.Close()
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		_ = up.Close()
		return fmt.Errorf("agentcraft server: listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.ctx }}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("agentcraft: serve", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.follow()
	}()
	s.log.Info("agentcraft endpoint listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the server listens on (after Start).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops serving: it closes the listener and every client connection
// (StatusGoingAway), then the daemon connection, and waits for every
// goroutine it started.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.cancel() // no connection is served from now on
		for c := range s.clients {
			c.kill(websocket.StatusGoingAway, "server shutting down")
		}
		s.mu.Unlock()
		if s.http != nil {
			_ = s.http.Close()
		}
		if s.up != nil {
			_ = s.up.Close()
		}
	})
	s.wg.Wait()
	return nil
}

// serveHTTP rejects what the dialect rejects before the upgrade, then
// serves one WebSocket connection.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if reason := rejectReason(r); reason != "" {
		http.Error(w, reason, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The Origin rule above is stricter than the library's: any
		// Origin at all was refused already.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return // Accept answered the request
	}
	ws.SetReadLimit(MaxFrame)
	c := newConn(s, ws)
	c.run()
}

// rejectReason returns why a request may not open a connection, "" when
// it may: any Origin header (even "null" or empty), or a Host other than
// 127.0.0.1, localhost or [::1], with or without a port
// (docs/agentcraft.md §1).
func rejectReason(r *http.Request) string {
	if _, ok := r.Header["Origin"]; ok {
		return "origin not allowed"
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	switch host {
	case "127.0.0.1", "localhost", "::1":
		return ""
	}
	return "host not allowed"
}

// hello registers c for broadcasts and queues its snapshot, under mu so
// that no change falls between the two.
func (s *Server) hello(c *conn, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.m.snapshot(s.foremanLocked())
	c.send(snap)
	if id != "" {
		c.send(wire.Ack{Re: id, OK: true})
	}
	s.clients[c] = true
}

// drop unregisters a closed connection.
func (s *Server) drop(c *conn) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
}

// broadcastLocked queues msgs for every client that said hello. mu must
// be held.
func (s *Server) broadcastLocked(msgs ...wire.ServerMessage) {
	for c := range s.clients {
		for _, msg := range msgs {
			c.send(msg)
		}
	}
}

// foremanLocked is the foreman status with the team's spend. mu must be
// held.
func (s *Server) foremanLocked() wire.ForemanStatus {
	f := s.foreman
	var cost float64
	for _, g := range s.m.goals {
		cost += g.CostUSD
	}
	f.CostUSD = &cost
	return f
}

// request sends a command to the daemon on a client's behalf and decodes
// its data into out (nil: ignored).
func (s *Server) request(cmd protocol.Typed, out any) error {
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	return s.up.Call(ctx, cmd, out)
}
