package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Node is one running cluster node: its embedded NATS server (nil in URL
// mode), its connection, JetStream, and the membership goroutines.
//
// Its methods are safe for concurrent use. Close stops everything it
// started; a Node is not restarted, Start makes a new one.
type Node struct {
	cfg Config
	log *slog.Logger

	srv      *server.Server // nil in URL mode
	nc       *nats.Conn
	ncClosed chan struct{} // closed by nc's ClosedHandler
	js       jetstream.JetStream

	incarnation uint64 // the first; members.current() after Start
	startedAt   time.Time

	members *membership

	// addrsMu guards addrsNow, what SetAddrs last set; kick wakes the
	// heartbeat loop to publish it.
	addrsMu  sync.Mutex
	addrsNow Addrs
	kick     chan struct{}

	// dupRoute is closed when the embedded server refused a route from
	// a server of this node's name (dupOnce guards it).
	dupRoute chan struct{}
	dupOnce  sync.Once

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closed    chan struct{}
}

// Start starts a node: it validates cfg, embeds a NATS server with
// JetStream (or connects to cfg.URL), waits until the server takes
// connections and the JetStream cluster has a meta-leader, connects in
// process, creates the membership bucket, takes the next incarnation of
// this node (running Hooks.OnRejoin when there was one before) and starts
// heartbeating. Every wait is bounded by ctx and cfg.ReadyTimeout; on
// failure everything started is stopped again.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "cluster", "node", cfg.Node)
	ctx, cancelReady := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancelReady()

	n := &Node{cfg: cfg, log: log, closed: make(chan struct{}), dupRoute: make(chan struct{}), kick: make(chan struct{}, 1)}
	ok := false
	defer func() {
		if !ok {
			n.shutdown()
		}
	}()
	if cfg.URL == "" {
		if err := n.startServer(ctx); err != nil {
			return nil, err
		}
	}
	if err := n.connect(); err != nil {
		return nil, err
	}
	if err := n.startMembership(ctx); err != nil {
		return nil, err
	}
	ok = true
	log.Info("cluster node started", "incarnation", n.incarnation, "embedded", n.srv != nil)
	return n, nil
}

// startServer embeds the NATS server and waits for it and for a
// JetStream meta-leader.
func (n *Node) startServer(ctx context.Context) error {
	opts, err := serverOptions(n.cfg)
	if err != nil {
		return err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("cluster: nats server: %w", err)
	}
	srv.SetLoggerV2(natsLogger{log: n.log.With("component", "nats"), onDupName: func() {
		n.dupOnce.Do(func() { close(n.dupRoute) })
	}}, false, false, false)
	n.srv = srv
	srv.Start()
	if !srv.ReadyForConnections(n.cfg.ReadyTimeout) {
		return fmt.Errorf("%w: the NATS server takes no connections after %s", ErrNotReady, n.cfg.ReadyTimeout)
	}
	if n.cfg.Hooks.RouteBound != nil {
		n.cfg.Hooks.RouteBound(srv.ClusterAddr())
	}
	// NATS has no notification for a meta-leader; its own tests poll
	// for one too. A short period keeps Start quick on a formed cluster.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !metaLeaderKnown(srv) {
		select {
		case <-n.dupRoute:
			// Only a live server has routes: this is another process,
			// not this node's previous life. The membership check
			// (checkName) would find it too, a lease later.
			return fmt.Errorf("%w: cluster.node %q is taken: a NATS server of that name runs in the cluster (it refused this node's route); stop that shardd or give this one another cluster.node", ErrDuplicateNode, n.cfg.Node)
		case <-ctx.Done():
			return fmt.Errorf("%w: no JetStream meta-leader (are a majority of %d routes up?): %w", ErrNotReady, len(n.cfg.Routes), context.Cause(ctx))
		case <-tick.C:
		}
	}
	return nil
}

// metaLeaderKnown says whether the JetStream cluster elected a
// meta-leader and this server is current with it: only then can it
// create streams and buckets.
func metaLeaderKnown(srv *server.Server) bool {
	info, err := srv.Jsz(nil)
	if err != nil || info.Meta == nil || info.Meta.Leader == "" {
		return false
	}
	return srv.JetStreamIsCurrent()
}

// serverOptions maps a Config to the embedded server's options.
func serverOptions(cfg Config) (*server.Options, error) {
	opts := &server.Options{
		ServerName: cfg.Node,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		// Acknowledged writes must survive a crash: by default JetStream
		// acknowledges at once and fsyncs every two minutes, so a node
		// lost in between loses acked records (Jepsen, NATS 2.12.1).
		// SyncAlways fsyncs before each acknowledgement.
		SyncAlways:             true,
		NoSigs:                 true,
		DisableJetStreamBanner: true,
		// Clients other than this node (ClientListen) authenticate by
		// the token, or only by the cluster's nkey when there is one.
		Authorization: cfg.Token,
		// Without ClientListen the server still listens for clients, on
		// a random loopback port: with DontListen NATS never starts its
		// routes (they wait for the client listener).
		Host: "127.0.0.1", Port: -1,
	}
	if cfg.NKeySeedFile != "" {
		pub, err := nkeyPublic(cfg.NKeySeedFile)
		if err != nil {
			return nil, err
		}
		opts.Authorization = ""
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	var tlsConf *tls.Config
	if cfg.TLSCert != "" {
		var err error
		tlsConf, err = server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CaFile: cfg.TLSCA,
			Verify: cfg.TLSCA != "", Timeout: 2,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: cluster.tls_*: %w", ErrInvalidConfig, err)
		}
	}
	if cfg.ClientListen != "" {
		host, port, _ := net.SplitHostPort(cfg.ClientListen)
		opts.Host, opts.Port = host, mustPort(port)
		if tlsConf != nil {
			// Clients authenticate by token; their certificates are not
			// asked for.
			c := tlsConf.Clone()
			c.ClientAuth = tls.NoClientCert
			opts.TLSConfig, opts.TLSTimeout = c, 2
		}
	}
	var routeTLS *tls.Config
	if tlsConf != nil {
		// A node is both ends of its routes: as a client it checks the
		// other node's certificate against the CA too (NATS's own
		// cluster TLS does the same).
		routeTLS = tlsConf.Clone()
		if cfg.TLSCA != "" {
			routeTLS.RootCAs = routeTLS.ClientCAs
			routeTLS.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	host, port, _ := net.SplitHostPort(cfg.Listen)
	opts.Cluster = server.ClusterOpts{
		Name: cfg.ClusterName, Host: host, Port: mustPort(port),
		TLSConfig: routeTLS, TLSTimeout: 2, Advertise: cfg.Advertise,
	}
	if cfg.Token != "" {
		opts.Cluster.Username, opts.Cluster.Password = routeUser, cfg.Token
	}
	for _, r := range cfg.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("%w: cluster.routes: %w", ErrInvalidConfig, err)
		}
		if u.User == nil && cfg.Token != "" {
			u.User = url.UserPassword(routeUser, cfg.Token)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return opts, nil
}

// mustPort converts a port Validate accepted; 0 and -1 both ask NATS
// for a free one (NATS reads 0 as its default port).
func mustPort(s string) int {
	p, _ := parsePort(s)
	if p == 0 {
		return -1
	}
	return p
}

// connect opens this node's NATS connection: in process to the embedded
// server (no socket, no TLS), or to cfg.URL.
func (n *Node) connect() error {
	closed := make(chan struct{})
	opts := []nats.Option{
		nats.Name("shardd " + n.cfg.Node),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.MaxReconnects(-1),
	}
	if n.cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(n.cfg.NKeySeedFile)
		if err != nil {
			return fmt.Errorf("%w: cluster.nkey_seed_file: %w", ErrInvalidConfig, err)
		}
		opts = append(opts, o)
	}
	if n.cfg.Token != "" && (n.srv == nil || n.cfg.NKeySeedFile == "") {
		opts = append(opts, nats.Token(n.cfg.Token))
	}
	url := n.cfg.URL
	if n.srv != nil {
		opts = append(opts, nats.InProcessServer(n.srv))
	} else {
		if n.cfg.TLSCA != "" {
			opts = append(opts, nats.RootCAs(n.cfg.TLSCA))
		}
		if n.cfg.TLSCert != "" {
			opts = append(opts, nats.ClientCert(n.cfg.TLSCert, n.cfg.TLSKey))
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("cluster: connect: %w", err)
	}
	n.nc = nc
	n.ncClosed = closed
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("cluster: jetstream: %w", err)
	}
	n.js = js
	return nil
}

// Name is this node's name.
func (n *Node) Name() string { return n.cfg.Node }

// Incarnation is this run of the node: one more than the last run's,
// and one more each time the others declared it dead while it ran.
func (n *Node) Incarnation() uint64 { return n.members.current() }

// Conn is the node's NATS connection, for the packages built on the
// cluster (records, routing). Closed by Close.
func (n *Node) Conn() *nats.Conn { return n.nc }

// JetStream is the node's JetStream context, over Conn.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// RouteAddr is the address the embedded server takes routes on (nil in
// URL mode): with port -1 it is the port that was picked.
func (n *Node) RouteAddr() *net.TCPAddr {
	if n.srv == nil {
		return nil
	}
	return n.srv.ClusterAddr()
}

// ClientURL is the nats:// URL other clients connect to ("" when the
// node takes no clients).
func (n *Node) ClientURL() string {
	if n.srv == nil || n.cfg.ClientListen == "" {
		return ""
	}
	return n.srv.ClientURL()
}

// SetAddrs sets where this node's daemon takes clients; the node
// publishes them in its record at once (the next heartbeat, not waiting
// for its tick), so cluster.status shows them everywhere and a client
// can fail over to this node. The daemon knows them only once its
// gateway listens, after Start.
func (n *Node) SetAddrs(a Addrs) {
	n.addrsMu.Lock()
	n.addrsNow = a
	n.addrsMu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) addrs() Addrs {
	n.addrsMu.Lock()
	defer n.addrsMu.Unlock()
	return n.addrsNow
}

// Done is closed when the node is closed.
func (n *Node) Done() <-chan struct{} { return n.closed }

// Close stops heartbeating, drains the connection, shuts the embedded
// server down and waits for all of it; it says no goodbye, so the
// others declare this incarnation dead after its lease as they would
// after a crash (a stopped daemon's runs are interrupted, not replayed).
// Close is idempotent.
func (n *Node) Close() error {
	n.shutdown()
	return nil
}

func (n *Node) shutdown() {
	n.closeOnce.Do(func() {
		if n.cancel != nil {
			n.cancel()
		}
		n.wg.Wait()
		if n.nc != nil {
			if err := n.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				n.nc.Close()
			}
			<-n.ncClosed
		}
		if n.srv != nil {
			n.srv.Shutdown()
			n.srv.WaitForShutdown()
		}
		close(n.closed)
		n.log.Info("cluster node stopped")
	})
}

// natsLogger routes the embedded server's log into slog. Fatalf is an
// error here: only cmd exits the process, and NATS reports a failed
// start through ReadyForConnections too.
type natsLogger struct {
	log *slog.Logger
	// onDupName learns that the server refused a route from a server of
	// its own name. NATS reports it only in its log (the route closes
	// with DuplicateServerName): the message is matched here.
	onDupName func()
}

// dupNameLog is how nats-server logs a route refused for a duplicate
// server name.
const dupNameLog = "Remote server has a duplicate name"

func (l natsLogger) Noticef(format string, v ...any) { l.log.Debug(trim(format, v)) }
func (l natsLogger) Warnf(format string, v ...any)   { l.log.Warn(trim(format, v)) }
func (l natsLogger) Fatalf(format string, v ...any)  { l.log.Error(trim(format, v)) }
func (l natsLogger) Errorf(format string, v ...any) {
	msg := trim(format, v)
	if l.onDupName != nil && strings.Contains(msg, dupNameLog) {
		l.onDupName()
	}
	l.log.Error(msg)
}
func (l natsLogger) Debugf(format string, v ...any) { l.log.Debug(trim(format, v)) }
func (l natsLogger) Tracef(format string, v ...any) {}

func trim(format string, v []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, v...))
}
