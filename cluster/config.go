package cluster

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// Defaults of the settings a Config leaves empty.
const (
	// DefaultReplicas is how many copies of each replicated record the
	// cluster keeps: three survive one lost node with a quorum left (two
	// would stop taking writes when one is lost).
	DefaultReplicas = 3
	// DefaultLease is how long a node may go without heartbeating before
	// the others declare it dead.
	DefaultLease = 15 * time.Second
	// DefaultReadyTimeout bounds how long Start waits for the server,
	// a JetStream meta-leader and the membership bucket.
	DefaultReadyTimeout = time.Minute
	// DefaultClusterName is the NATS cluster name every node shares.
	DefaultClusterName = "shard"
	// minLease keeps the heartbeat (lease/3) above a busy machine's
	// scheduling noise.
	minLease = 300 * time.Millisecond
	// routeUser is the user name of route authentication: NATS routes
	// authenticate by user and password, and the cluster token is the
	// password.
	routeUser = "shard"
)

// Config is one node's cluster settings: the cluster.* keys of the
// daemon's configuration (the package doc names them) plus the hooks the
// daemon fills in. The zero value of an optional field means its default;
// WithDefaults says which.
type Config struct {
	// Node is this node's name: unique in the cluster, the embedded NATS
	// server's name, and part of membership keys, so it is restricted to
	// letters, digits, '-' and '_' (at most 64).
	Node string
	// ClusterName is the NATS cluster name (default "shard"); every node
	// of one cluster has the same.
	ClusterName string
	// Listen is host:port for the routes between nodes (embedded mode;
	// required there). Port 0 or -1 picks a free one.
	Listen string
	// Advertise is host:port the other nodes reach this node's routes
	// at, when that is not Listen (NAT, a proxy). Optional.
	Advertise string
	// ClientListen is host:port for NATS clients other than this
	// process (optional: the node itself uses an in-process connection).
	ClientListen string
	// Routes are the other nodes' route URLs (nats://host:port): at
	// least one other node (embedded mode); a route to this node itself
	// is harmless. A route without user
	// information is given the cluster token.
	Routes []string
	// Token authenticates routes (as the password of user "shard") and
	// clients. Required for any non-loopback address. Never logged.
	Token string
	// NKeySeedFile is a file holding the cluster's user nkey seed. In URL
	// mode it authenticates this node to the external NATS. Embedded, the
	// client port (ClientListen) accepts only clients that sign with
	// that key, instead of the token, and this node's own connection
	// signs with it too; routes still authenticate with the token: NATS
	// routes take only a user and password (or TLS certificates), never
	// an nkey.
	NKeySeedFile string
	// TLSCert and TLSKey are this node's certificate and key (PEM files)
	// for routes and clients; required for any non-loopback address.
	TLSCert, TLSKey string
	// TLSCA is the CA (PEM file) that signs the other nodes'
	// certificates; with it, routes verify both ends.
	TLSCA string
	// Home is the daemon's home directory; StoreDir defaults under it.
	Home string
	// StoreDir is JetStream's store (default <Home>/cluster/jetstream).
	StoreDir string
	// Replicas is how many copies of a replicated bucket the cluster
	// keeps (default 3; 1 to 5), fewer when the cluster has fewer
	// servers.
	Replicas int
	// Lease is how long this node's heartbeat is valid (default 15s);
	// it heartbeats every Lease/3.
	Lease time.Duration
	// ReadyTimeout bounds Start's waits (default 1m).
	ReadyTimeout time.Duration
	// URL, when set, connects to an existing NATS cluster (comma
	// separated URLs) instead of embedding a server; Listen,
	// ClientListen, Routes and StoreDir must then be empty.
	URL string
	// Version is the daemon's version, published in the node's record.
	Version string
	// Capacity is what this node can host, published in its record.
	Capacity Capacity
	// Hooks are the daemon's callbacks; all optional.
	Hooks Hooks

	// declareFailed, set by tests only, learns each declaration of a
	// silent node this node withheld: its view was stale, the stream
	// leader had a newer record, or the create failed (the minority
	// side of a partition).
	declareFailed func(node string, incarnation uint64)
}

// Hooks are the daemon's callbacks into membership. They are fields of
// the Config, not setters, so that none can miss an event that happens
// while Start runs.
type Hooks struct {
	// Load reports this node's load for each heartbeat. It is called
	// from the heartbeat goroutine and must not block.
	Load func() Load
	// OnNodeDead runs on the one node that declared node's incarnation
	// dead, once in the whole cluster. It is called from the membership
	// goroutine and must not block (hand it to an actor).
	OnNodeDead func(node string, incarnation uint64)
	// OnRejoin runs inside Start when this node finds a previous
	// incarnation of itself (before the new one heartbeats), and from
	// the membership goroutine when the others declare this node dead
	// while it runs (it was slow or cut off): the daemon reconciles as
	// after a restart. It must not block long.
	OnRejoin func(Rejoin)
	// RouteBound learns the route address the embedded server bound
	// (with port -1, the port it picked), before Start waits for the
	// other nodes: a test points its relays there (clustertest.Mesh),
	// a daemon may report it.
	RouteBound func(*net.TCPAddr)
}

// nodeNameRE is what a node name may be: NATS server names and KV keys
// accept it, and it has no '.', the key separator.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// WithDefaults returns a copy of c with every empty optional field set
// to its default.
func (c Config) WithDefaults() Config {
	c.ClusterName = cmp.Or(c.ClusterName, DefaultClusterName)
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	if c.URL == "" && c.StoreDir == "" && c.Home != "" {
		c.StoreDir = filepath.Join(c.Home, "cluster", "jetstream")
	}
	c.Routes = append([]string(nil), c.Routes...)
	return c
}

// Validate says what is wrong with c (after WithDefaults), naming the
// setting: a bad node name, a missing listen address or store, a route
// that is not a URL, no route to another node, and — wrapping ErrInsecure — a non-loopback address
// without a token or without TLS.
func (c Config) Validate() error {
	if !nodeNameRE.MatchString(c.Node) {
		return fmt.Errorf("%w: cluster.node %q: want 1 to 64 letters, digits, '-' or '_', starting with a letter or digit", ErrInvalidConfig, c.Node)
	}
	if !nodeNameRE.MatchString(c.ClusterName) {
		return fmt.Errorf("%w: cluster.name %q: want 1 to 64 letters, digits, '-' or '_'", ErrInvalidConfig, c.ClusterName)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("%w: cluster.replicas %d: want 1 to 5", ErrInvalidConfig, c.Replicas)
	}
	if c.Lease < minLease {
		return fmt.Errorf("%w: cluster.lease %s: want at least %s", ErrInvalidConfig, c.Lease, minLease)
	}
	if c.ReadyTimeout <= 0 {
		return fmt.Errorf("%w: cluster.ready_timeout %s: want more than 0", ErrInvalidConfig, c.ReadyTimeout)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: cluster.tls_cert and cluster.tls_key go together", ErrInvalidConfig)
	}
	if c.URL != "" {
		return c.validateURLMode()
	}
	if c.StoreDir == "" {
		return fmt.Errorf("%w: cluster.store_dir: empty and no home to put it under", ErrInvalidConfig)
	}
	if c.Listen == "" {
		return fmt.Errorf("%w: cluster.listen: required to embed a NATS server (or set cluster.url)", ErrInvalidConfig)
	}
	if err := c.secureAddr("cluster.listen", c.Listen); err != nil {
		return err
	}
	if c.Advertise != "" {
		if err := c.secureAddr("cluster.advertise", c.Advertise); err != nil {
			return err
		}
	}
	if c.ClientListen != "" {
		// Clients authenticate by the token or, with a seed, by its nkey.
		cc := c
		if c.NKeySeedFile != "" {
			cc.Token = "(nkey)"
		}
		if err := cc.secureAddr("cluster.client_listen", c.ClientListen); err != nil {
			return err
		}
	}
	for _, r := range c.Routes {
		u, err := parseNATSURL(r, "nats")
		if err != nil {
			return fmt.Errorf("%w: cluster.routes %q: %w", ErrInvalidConfig, redactURL(r), err)
		}
		if err := c.secureHost("cluster.routes", u.Hostname(), c.TLSCert != ""); err != nil {
			return err
		}
	}
	return c.validateOthers()
}

// validateOthers refuses an embedded node whose cluster.routes name no
// other node. NATS runs JetStream clustered only with configured routes
// ("JetStream cluster requires configured routes"), and a route list
// naming only this node does not make a cluster of one either: the meta
// group then expects at least two peers (nats-server's
// bootstrapRaftNode) and never elects a leader. Either way Start would
// only fail after its ready timeout; this says why at once. A single
// shardd sets no cluster.* at all.
func (c Config) validateOthers() error {
	for _, r := range c.Routes {
		u, _ := url.Parse(r) // parsed above
		host := strings.ToLower(u.Host)
		if host != strings.ToLower(c.Listen) && (c.Advertise == "" || host != strings.ToLower(c.Advertise)) {
			return nil
		}
	}
	return fmt.Errorf("%w: cluster.routes: a cluster node needs the routes of at least one other node (a single shardd sets no cluster.* setting)", ErrInvalidConfig)
}

// validateURLMode checks a Config that connects to an external NATS.
func (c Config) validateURLMode() error {
	if c.Listen != "" || c.Advertise != "" || c.ClientListen != "" || len(c.Routes) > 0 || c.StoreDir != "" {
		return fmt.Errorf("%w: cluster.url excludes cluster.listen, cluster.advertise, cluster.client_listen, cluster.routes and cluster.store_dir (those embed a server)", ErrInvalidConfig)
	}
	for _, raw := range strings.Split(c.URL, ",") {
		u, err := parseNATSURL(strings.TrimSpace(raw), "nats", "tls")
		if err != nil {
			return fmt.Errorf("%w: cluster.url %q: %w", ErrInvalidConfig, redactURL(raw), err)
		}
		if isLoopback(u.Hostname()) {
			continue
		}
		if c.Token == "" && c.NKeySeedFile == "" && u.User == nil {
			return fmt.Errorf("%w: cluster.url %s: no cluster.token, cluster.nkey_seed_file or user", ErrInsecure, u.Host)
		}
		if u.Scheme != "tls" && c.TLSCA == "" && c.TLSCert == "" {
			return fmt.Errorf("%w: cluster.url %s: not tls:// and no cluster.tls_ca", ErrInsecure, u.Host)
		}
	}
	return nil
}

// secureAddr checks a host:port this node listens on.
func (c Config) secureAddr(setting, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrInvalidConfig, setting, addr, err)
	}
	if _, err := parsePort(port); err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrInvalidConfig, setting, addr, err)
	}
	return c.secureHost(setting, host, c.TLSCert != "")
}

// secureHost refuses a non-loopback host without a token or TLS. An
// empty host means every interface, which is not loopback.
func (c Config) secureHost(setting, host string, tls bool) error {
	if isLoopback(host) {
		return nil
	}
	if c.Token == "" {
		if setting == "cluster.client_listen" {
			return fmt.Errorf("%w: %s %s is not loopback and cluster.token and cluster.nkey_seed_file are empty", ErrInsecure, setting, hostOrAll(host))
		}
		return fmt.Errorf("%w: %s %s is not loopback and cluster.token is empty", ErrInsecure, setting, hostOrAll(host))
	}
	if !tls {
		return fmt.Errorf("%w: %s %s is not loopback and cluster.tls_cert/cluster.tls_key are empty", ErrInsecure, setting, hostOrAll(host))
	}
	return nil
}

// isLoopback says whether host names only this machine: "localhost" or
// a loopback IP. Other names are not resolved: a name may resolve
// differently later.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hostOrAll(host string) string {
	if host == "" {
		return "(all interfaces)"
	}
	return host
}

// parsePort accepts 0..65535 and -1 (NATS's "pick a free port").
func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < -1 || p > 65535 {
		return 0, fmt.Errorf("port %q: want -1 to 65535", s)
	}
	return p, nil
}

// parseNATSURL parses a URL with one of schemes and a host:port.
func parseNATSURL(raw string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if !contains(schemes, u.Scheme) {
		return nil, fmt.Errorf("scheme %q: want %s", u.Scheme, strings.Join(schemes, " or "))
	}
	if u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("want %s://host:port", schemes[0])
	}
	if _, err := parsePort(u.Port()); err != nil {
		return nil, err
	}
	return u, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// redactURL drops the user information of a URL for error messages:
// a route URL may carry the token.
func redactURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(not a URL)"
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// nkeyPublic reads a user nkey seed file (a bare seed, as nk -gen user
// writes it, or a decorated credentials file) and returns its public
// key. Its messages never quote the file's content.
func nkeyPublic(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: cluster.nkey_seed_file: %w", ErrInvalidConfig, err)
	}
	defer clear(b)
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return "", fmt.Errorf("%w: cluster.nkey_seed_file %s: no user nkey seed in it (nk -gen user makes one, starting SU)", ErrInvalidConfig, path)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("%w: cluster.nkey_seed_file %s: %w", ErrInvalidConfig, path, err)
	}
	return pub, nil
}
