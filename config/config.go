package config

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config is every setting shardd reads, after layering and validation. A
// *Config returned by Load or Default is a plain value: it is never mutated
// by this package afterwards and may be read from any goroutine.
//
// The mapstructure tags are the dotted key segments; the setting table in
// settings.go lists each key with its help text and range check.
type Config struct {
	// Home is the Shard state directory ($SHARD_HOME). Default
	// <user home>/.shard. It can be set only by --home or SHARD_HOME, since
	// it decides where the config file is.
	Home string `mapstructure:"home"`
	// ConfigFile is the YAML file that was (or would have been) read.
	// Default <Home>/config.yaml; an absent default file is fine. Set only
	// by --config or SHARD_CONFIG, which must name an existing file.
	ConfigFile string `mapstructure:"config"`
	// Foreground logs to stderr as well as the log file. Default false.
	Foreground bool `mapstructure:"foreground"`

	Log        LogConfig        `mapstructure:"log"`        // log.*: logging
	Web        WebConfig        `mapstructure:"web"`        // web.*: HTTP/WebSocket listener
	Runtime    RuntimeConfig    `mapstructure:"runtime"`    // runtime.*: agent runtime processes
	Kill       KillConfig       `mapstructure:"kill"`       // kill.*: stop escalation
	Shutdown   ShutdownConfig   `mapstructure:"shutdown"`   // shutdown.*: daemon shutdown
	Headless   HeadlessConfig   `mapstructure:"headless"`   // headless.*: requests with no client
	Gateway    GatewayConfig    `mapstructure:"gateway"`    // gateway.*: client transports
	Store      StoreConfig      `mapstructure:"store"`      // store.*: bbolt database
	Provider   ProviderConfig   `mapstructure:"provider"`   // provider.*: model provider
	Sim        SimConfig        `mapstructure:"sim"`        // sim.*: embedded sim provider
	Jobs       JobsConfig       `mapstructure:"jobs"`       // jobs.*: subagent jobs
	Compaction CompactionConfig `mapstructure:"compaction"` // compaction.*: runtime context compaction
	Workspaces WorkspacesConfig `mapstructure:"workspaces"` // workspaces.*: git-worktree workspaces
	AgentCraft AgentCraftConfig `mapstructure:"agentcraft"` // agentcraft.*: the AgentCraft v1 endpoint
	Team       TeamConfig       `mapstructure:"team"`       // team.*: teams (docs/protocol.md §10.4)
	Cluster    ClusterConfig    `mapstructure:"cluster"`    // cluster.*: cluster mode (docs/cluster.md)
	// Runtimes are the runtime profiles by name (the config file's
	// `runtimes:` mapping); the "shard" profile (the reference
	// runtime) is always there. Read from the file only.
	Runtimes map[string]RuntimeProfile `mapstructure:"-"`
	// Providers are the model providers besides the `provider:` block, by
	// name (the config file's `providers:` mapping, or ProvidersEnv):
	// agents may run on any of them (ProviderSet). Read from the file
	// only, and from ProvidersEnv, which replaces the file's.
	Providers map[string]ProviderEntry `mapstructure:"-"`
}

// WorkspacesConfig configures workspaces (docs/protocol.md §10.1a).
type WorkspacesConfig struct {
	// Root is the directory under which the daemon creates worktrees; ""
	// means <Home>/worktrees (see WorktreeRoot). Absolute when set.
	Root string `mapstructure:"root"`
	// CopyFiles lists files, relative to the main checkout's root and
	// comma-separated, copied into every new worktree (untracked setup
	// such as ".env"); missing ones are skipped. Default "": none.
	CopyFiles string `mapstructure:"copy_files"`
	// SetupCommand runs in every new worktree after CopyFiles (split on
	// spaces, no shell, like runtime.command); a failure rolls the create
	// back. Default "": none.
	SetupCommand string `mapstructure:"setup_command"`
}

// AgentCraftConfig configures the AgentCraft v1 endpoint (docs/agentcraft.md
// §1, §10): a WebSocket server on loopback for the clients that speak that
// dialect.
type AgentCraftConfig struct {
	// Enabled serves the endpoint. Default false: off unless enabled.
	Enabled bool `mapstructure:"enabled"`
	// Listen is the endpoint's host:port. Default "127.0.0.1:7878" (the
	// dialect's). A non-loopback host needs AllowNonLoopback.
	Listen string `mapstructure:"listen"`
	// AllowNonLoopback lets Listen name a non-loopback address (a
	// container's interface behind a port forward, say). Default false.
	// Requests whose Host is not a loopback name are refused either way.
	AllowNonLoopback bool `mapstructure:"allow_non_loopback"`
}

// ClusterConfig is the cluster.* settings: one per field of the cluster
// package's Config (its package doc lists them). With every one at its
// default the daemon is a single shardd, as it always was: no NATS code
// runs and nothing in its home changes (Enabled). The daemon maps them to
// the cluster package's Config and validates them there, so that the
// rules about names, addresses, tokens and TLS live in one place.
type ClusterConfig struct {
	// Node is this node's name, unique in the cluster. Default "".
	Node string `mapstructure:"node"`
	// Listen is host:port of the routes between nodes (port 0: any free
	// one). Default "".
	Listen string `mapstructure:"listen"`
	// Advertise is host:port the other nodes reach the routes at, when
	// that is not Listen (NAT, a proxy). Default "".
	Advertise string `mapstructure:"advertise"`
	// ClientListen is host:port for NATS clients other than shardd.
	// Default "": none.
	ClientListen string `mapstructure:"client_listen"`
	// Routes are the other nodes' route URLs (nats://host:port).
	Routes []string `mapstructure:"routes"`
	// Token authenticates routes and clients; required off loopback. A
	// secret: never logged nor printed, and not passed to runtimes.
	Token string `mapstructure:"token"`
	// TLSCert, TLSKey and TLSCA are PEM files for the routes' TLS.
	TLSCert string `mapstructure:"tls_cert"`
	TLSKey  string `mapstructure:"tls_key"`
	TLSCA   string `mapstructure:"tls_ca"`
	// StoreDir is JetStream's store. Default "": <home>/cluster/jetstream.
	StoreDir string `mapstructure:"store_dir"`
	// Replicas is how many copies of each replicated record the cluster
	// keeps (1 to 5). Default 3.
	Replicas int `mapstructure:"replicas"`
	// Lease is how long a node's heartbeat is valid; a node silent for
	// longer is declared dead. Default 15s.
	Lease time.Duration `mapstructure:"lease"`
	// URL connects to an existing NATS cluster instead of embedding a
	// server. Default "".
	URL string `mapstructure:"url"`
	// NKeySeedFile is the cluster's user nkey seed: it authenticates to
	// the cluster.url NATS, and embedded, it is the only key
	// cluster.client_listen accepts (routes keep the token). Default "".
	NKeySeedFile string `mapstructure:"nkey_seed_file"`
	// ClaimRuns: this node claims and runs the subagent runs any node may
	// take, up to jobs.max_active. false keeps a node to its own agents
	// (its parents' runs still go to the others). Default true.
	ClaimRuns bool `mapstructure:"claim_runs"`
}

// Enabled says whether any cluster.* setting differs from its default:
// only then does the daemon start a cluster node (and refuses to start
// when cluster.node is missing).
func (c ClusterConfig) Enabled() bool {
	def := Default("").Cluster
	return c.Node != "" || c.Listen != "" || c.Advertise != "" || c.ClientListen != "" ||
		len(c.Routes) > 0 || c.Token != "" || c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" ||
		c.StoreDir != "" || c.Replicas != def.Replicas || c.Lease != def.Lease || c.URL != "" || c.NKeySeedFile != "" ||
		c.ClaimRuns != def.ClaimRuns
}

// TeamConfig configures teams (docs/protocol.md §10.4): where goals run,
// how many workers build at once and the repository's test command.
type TeamConfig struct {
	// Repo is the main checkout a goal submitted without a cwd works in.
	// Default "": a goal must name its cwd. Absolute when set.
	Repo string `mapstructure:"repo"`
	// MaxWorkers caps the tasks doing at once across every goal. Default 3.
	MaxWorkers int `mapstructure:"max_workers"`
	// CICommand is run with `sh -c` in a task's worktree when its worker
	// finishes; its exit status is the task's CI. Default "": none (CI
	// unknown).
	CICommand string `mapstructure:"ci_command"`
	// CITimeout bounds one CI run; past it the CI fails. Default 10m.
	CITimeout time.Duration `mapstructure:"ci_timeout"`
}

// CompactionConfig tunes the runtime's context compaction (docs/protocol.md
// §9.2).
type CompactionConfig struct {
	// Enabled turns automatic compaction on (between turns above 80% of
	// the context window, and at 100% mid-turn). session_op compact works
	// either way. Default true.
	Enabled bool `mapstructure:"enabled"`
	// KeepRecentTokens is how much recent conversation a compaction keeps;
	// 0 means the runtime's default (a fifth of the window, at most 20,000).
	KeepRecentTokens int `mapstructure:"keep_recent_tokens"`
}

// JobsConfig bounds subagent jobs (docs/protocol.md §10.3).
type JobsConfig struct {
	// MaxActive caps starting+active runs across the daemon; excess runs
	// wait in queued. Must be > 0. Default 16.
	MaxActive int `mapstructure:"max_active"`
	// MaxActivePerParent caps them per parent agent. Must be > 0. Default 8.
	MaxActivePerParent int `mapstructure:"max_active_per_parent"`
	// MaxTasks caps the tasks of one subagent.create unless the parent's
	// launch policy says otherwise. Must be > 0. Default 8.
	MaxTasks int `mapstructure:"max_tasks"`
	// MaxDepth caps nesting (a child is one deeper than its parent). Must
	// be > 0. Default 3.
	MaxDepth int `mapstructure:"max_depth"`
	// RunTimeout is each run's start-to-close deadline; past it the run is
	// stopped by escalation and ends timed_out. 0 means none. Default 30m.
	RunTimeout time.Duration `mapstructure:"run_timeout"`
	// Retention is how long a finished job is kept: past it the job and
	// its stopped children that nothing else references are removed
	// (sessions included), by a sweep at start and then periodically. 0,
	// the default, keeps everything (prune by hand: shardctl jobs prune).
	Retention time.Duration `mapstructure:"retention"`
	// Aliases is the friendly alias pool, comma-separated; "" uses the
	// built-in pool.
	Aliases string `mapstructure:"aliases"`
	// Nice is added to the daemon's niceness for the runtimes of subagent
	// children and all they start (0–19, as nice(1) -n): background runs
	// are served after the daemon's control plane (acks, commits, fan-out)
	// and after the agents clients work with directly, when the CPUs are
	// busy; on an idle machine they lose nothing. 0 runs them at the
	// daemon's priority. Default 10.
	Nice int `mapstructure:"nice"`
	// SchedIdle runs those runtimes, and all they start, under the
	// SCHED_IDLE policy: any thread of normal priority that wakes up on a
	// busy CPU preempts them at once, where niceness alone lets them run
	// out their slice first (so every hop of an ack waited). They still
	// get every CPU nothing else wants. false leaves them at Nice alone.
	// Default true.
	SchedIdle bool `mapstructure:"sched_idle"`
}

// LogConfig configures the daemon's slog handler and the bounds of its log
// files: logs/shardd.log and each agent runtime's stderr log
// (logs/agents/<agent_id>.log) alike.
type LogConfig struct {
	// Level is the minimum level logged: debug, info, warn or error.
	// Default info.
	Level string `mapstructure:"level"`
	// MaxBytes is the size past which a log file is rotated (the file
	// becomes <file>.1, and a new one is started), at least 1 KiB, so
	// that a daemon running for months holds bounded logs. Default 10 MiB.
	MaxBytes int `mapstructure:"max_bytes"`
	// Backups is how many rotated files each log keeps (<file>.1 newest …
	// <file>.N oldest); 0 keeps none (the file is truncated instead).
	// Default 3.
	Backups int `mapstructure:"backups"`
}

// WebConfig configures the HTTP/WebSocket listener and its security policy
// (docs/protocol.md §4.1). With the defaults it is in loopback mode (§4.1.1); a
// non-loopback Host or a TrustProxy selects remote mode (§4.1.2), which
// Validate accepts only in one of the complete, safe combinations.
type WebConfig struct {
	// Host is the listen address: an IP literal or localhost. A
	// non-loopback address is remote mode and needs PublicHost,
	// AllowedOrigins and (without TrustProxy) AllowInsecureRemote.
	// Default 127.0.0.1.
	Host string `mapstructure:"host"`
	// Port is the listen port, 0..65535; 0 picks any free port (the chosen
	// URL is written to daemon.json). Default 7420.
	Port int `mapstructure:"port"`
	// PublicHost is the host[:port] browsers use in remote mode, pinned:
	// the Host header must name exactly it (an absent port meaning the
	// scheme's default). Required in remote mode, refused in loopback mode.
	// Default "".
	PublicHost string `mapstructure:"public_host"`
	// AllowedOrigins lists the exact serialized origins
	// (https://shard.example.com) browsers may connect from in remote mode.
	// Required in remote mode, refused in loopback mode, whose only origin
	// is the implicit http://<host>:<port>. Default none.
	AllowedOrigins []string `mapstructure:"allowed_origins"`
	// AllowInsecureRemote accepts plaintext HTTP in remote mode, knowingly
	// exposing the session cookie to the network path. Required for a
	// direct non-loopback Host and for any http:// allowed origin; refused
	// in loopback mode. Default false.
	AllowInsecureRemote bool `mapstructure:"allow_insecure_remote"`
	// TrustProxy names the reverse proxy whose forwarded headers are
	// honored: "loopback" (127.0.0.1 or ::1) or one IP literal. Default ""
	// (none: forwarded headers are ignored).
	TrustProxy string `mapstructure:"trust_proxy"`
	// ForwardedProtoHeader is the header carrying the original scheme from
	// the trusted proxy. Default X-Forwarded-Proto.
	ForwardedProtoHeader string `mapstructure:"forwarded_proto_header"`
	// ForwardedHostHeader is the header carrying the original host from the
	// trusted proxy; it is only cross-checked against PublicHost. Default
	// X-Forwarded-Host.
	ForwardedHostHeader string `mapstructure:"forwarded_host_header"`
	// EnrollTTL is the lifetime of a one-time browser enrollment code.
	// Must be > 0 and at most 1h. Default 5m.
	EnrollTTL time.Duration `mapstructure:"enroll_ttl"`
	// SessionTTL is the lifetime of a browser session. Must be > 0 and at
	// most 8760h (a year). Default 720h (30 days).
	SessionTTL time.Duration `mapstructure:"session_ttl"`
}

// Remote reports whether w selects remote mode (docs/protocol.md §4.1.2): a
// non-loopback Host or a trusted proxy.
func (w WebConfig) Remote() bool { return w.TrustProxy != "" || !isLoopbackHost(w.Host) }

// RuntimeConfig configures agent Runtime processes.
type RuntimeConfig struct {
	// Command is the runtime command line. Default "": shardd runs its own
	// executable as "agent --headless".
	Command string `mapstructure:"command"`
	// IdleTimeout is how long a runtime may stay inactive (idle or error)
	// before the reaper stops it; active states never expire and new work
	// restores it (docs/protocol.md §6.4). Must be > 0. Default 10m.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// StartTimeout bounds the wait for a new runtime's hello and first
	// sync. A runtime that spent the bound waiting for a CPU (a SCHED_IDLE
	// subagent runtime while other work keeps every core busy) is given
	// the bound again rather than killed. Must be > 0. Default 10s.
	StartTimeout time.Duration `mapstructure:"start_timeout"`
}

// KillConfig configures the abort → SIGTERM → SIGKILL escalation.
type KillConfig struct {
	// AbortGrace is the wait for idle after sending abort, before SIGTERM.
	// 0 skips straight to SIGTERM. Default 5s.
	AbortGrace time.Duration `mapstructure:"abort_grace"`
	// TermGrace is the wait after SIGTERM before SIGKILL. 0 skips straight
	// to SIGKILL. Default 5s.
	TermGrace time.Duration `mapstructure:"term_grace"`
}

// ShutdownConfig configures a graceful daemon shutdown.
type ShutdownConfig struct {
	// Timeout bounds a graceful shutdown; past it the remaining runtimes
	// are killed. Must be > 0. Default 30s.
	Timeout time.Duration `mapstructure:"timeout"`
}

// HeadlessConfig configures permission requests raised while no
// interactive client is attached.
type HeadlessConfig struct {
	// Timeout is how long a headless request waits for an answer. Must be
	// > 0. Default 5m.
	Timeout time.Duration `mapstructure:"timeout"`
	// Policy is the default headless policy: deny, allow_if_rule_matches or
	// queue. Default deny.
	Policy string `mapstructure:"policy"`
}

// GatewayConfig configures client transports.
type GatewayConfig struct {
	// PingInterval is the WebSocket keepalive period. Must be > 0.
	// Default 30s.
	PingInterval time.Duration `mapstructure:"ping_interval"`
	// PingTimeout is how long a ping may go unanswered before the
	// connection is closed. Must be > 0. Default 10s.
	PingTimeout time.Duration `mapstructure:"ping_timeout"`
	// TicketTTL is the lifetime of a WebSocket auth ticket. Must be > 0 and
	// at most 30s. Default 30s.
	TicketTTL time.Duration `mapstructure:"ticket_ttl"`
	// OutboundMaxBytes caps a connection's queued outbound bytes; past it
	// the connection is closed as a slow consumer. Must be > 0.
	// Default 8 MiB.
	OutboundMaxBytes int `mapstructure:"outbound_max_bytes"`
	// OutboundMaxMessages caps a connection's queued outbound messages.
	// Must be > 0. Default 10000.
	OutboundMaxMessages int `mapstructure:"outbound_max_messages"`
	// InboundMaxBytes caps the bytes of one connection's commands read and
	// not yet answered; past it the daemon stops reading that connection
	// until responses drain (backpressure). A single larger record is still
	// taken alone. Must be > 0. Default 8 MiB.
	InboundMaxBytes int `mapstructure:"inbound_max_bytes"`
	// InboundMaxRecords caps one connection's commands read and not yet
	// answered, likewise. Must be > 0. Default 1024.
	InboundMaxRecords int `mapstructure:"inbound_max_records"`
	// MaxConnections caps open client connections, unix socket and
	// WebSocket together; past it a new connection is refused cleanly (a
	// fatal error event, an HTTP 503) before the process runs out of file
	// descriptors. Must be > 0. Default 1024.
	MaxConnections int `mapstructure:"max_connections"`
}

// StoreConfig configures the bbolt database.
type StoreConfig struct {
	// LockTimeout is how long opening the database waits for another
	// process's lock, so that a second shardd fails fast. Must be > 0.
	// Default 2s.
	LockTimeout time.Duration `mapstructure:"lock_timeout"`
	// NoSync skips fsync on commit: faster, and unsafe on power loss. For
	// tests and benchmarks. Default false.
	NoSync bool `mapstructure:"no_sync"`
}

// ProviderConfig selects the default model provider of the reference
// runtime: the one an agent created without a provider runs on.
type ProviderConfig struct {
	// Name is sim, openai or anthropic, or the name of a `providers:`
	// entry (which then configures it: base_url, api_key_env and prices
	// stay empty here). Default sim (offline, deterministic).
	Name string `mapstructure:"name"`
	// BaseURL overrides the provider's API endpoint; empty means the
	// provider's own. When set it must be an http or https URL.
	BaseURL string `mapstructure:"base_url"`
	// Model is the default model; empty means the provider's first.
	Model string `mapstructure:"model"`
	// APIKeyEnv names the environment variable holding the API key; empty
	// means the provider's conventional one. The key itself is never
	// configuration.
	APIKeyEnv string `mapstructure:"api_key_env"`
	// Prices enables the usage cost field: "MODEL=IN/OUT[/CACHE_READ/
	// CACHE_WRITE];…" in US dollars per million tokens, e.g.
	// "gpt-4.1=2/8;claude-sonnet-4-5=3/15/0.3/3.75". Empty: no cost.
	Prices string `mapstructure:"prices"`
	// TextOnlyModels names the models that take no image input, "MODEL;…"
	// (a model name or a "provider/model" catalog id), e.g.
	// "deepseek-chat;gpt-oss-20b". A prompt with images to such a model is
	// refused UNSUPPORTED (docs/protocol.md §13 P4). It holds for every
	// provider; a `providers:` entry names its own in
	// ProviderEntry.TextOnlyModels. Empty: every model takes images.
	TextOnlyModels string `mapstructure:"text_only_models"`
}

// ParseModelList parses a "MODEL;MODEL;…" list (provider.text_only_models)
// into its names, blanks dropped.
func ParseModelList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ";") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// ParsePrices parses provider.prices into model → dollars per million
// tokens [input, output, cache_read, cache_write].
func ParsePrices(s string) (map[string][4]float64, error) {
	out := map[string][4]float64{}
	for _, item := range strings.Split(s, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, rest, ok := strings.Cut(item, "=")
		model = strings.TrimSpace(model)
		if !ok || model == "" {
			return nil, fmt.Errorf("price %q: want MODEL=IN/OUT[/CACHE_READ/CACHE_WRITE]", item)
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 2 && len(parts) != 4 {
			return nil, fmt.Errorf("price %q: want 2 or 4 numbers", item)
		}
		var p [4]float64
		for i, f := range parts {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("price %q: %q is not a non-negative number", item, f)
			}
			p[i] = v
		}
		out[model] = p
	}
	return out, nil
}

// SimConfig configures the embedded sim provider.
type SimConfig struct {
	// ContextWindow is the sim model's context window in tokens, so that
	// compaction can be driven. Must be > 0. Default 200000.
	ContextWindow int `mapstructure:"context_window"`
}

// Default returns a Config holding every default, with Home set to home and
// ConfigFile to <home>/config.yaml (both empty when home is empty). It is the
// single source of the default values: Load and RegisterFlags read them from
// here.
func Default(home string) *Config {
	c := &Config{
		Home:     home,
		Runtimes: map[string]RuntimeProfile{DefaultRuntime: {Kind: KindShard}},
		Log:      LogConfig{Level: "info", MaxBytes: 10 << 20, Backups: 3},
		Web: WebConfig{
			Host: "127.0.0.1", Port: 7420,
			ForwardedProtoHeader: "X-Forwarded-Proto", ForwardedHostHeader: "X-Forwarded-Host",
			EnrollTTL: 5 * time.Minute, SessionTTL: 30 * 24 * time.Hour,
		},
		Runtime:  RuntimeConfig{IdleTimeout: 10 * time.Minute, StartTimeout: 10 * time.Second},
		Kill:     KillConfig{AbortGrace: 5 * time.Second, TermGrace: 5 * time.Second},
		Shutdown: ShutdownConfig{Timeout: 30 * time.Second},
		Headless: HeadlessConfig{Timeout: 5 * time.Minute, Policy: "deny"},
		Gateway: GatewayConfig{
			PingInterval:        30 * time.Second,
			PingTimeout:         10 * time.Second,
			TicketTTL:           30 * time.Second,
			OutboundMaxBytes:    8 << 20,
			OutboundMaxMessages: 10000,
			InboundMaxBytes:     8 << 20,
			InboundMaxRecords:   1024,
			MaxConnections:      1024,
		},
		Store:      StoreConfig{LockTimeout: 2 * time.Second},
		Provider:   ProviderConfig{Name: "sim"},
		Sim:        SimConfig{ContextWindow: 200000},
		Team:       TeamConfig{MaxWorkers: 3, CITimeout: 10 * time.Minute},
		Jobs:       JobsConfig{MaxActive: 16, MaxActivePerParent: 8, MaxTasks: 8, MaxDepth: 3, RunTimeout: 30 * time.Minute, Nice: 10, SchedIdle: true},
		Compaction: CompactionConfig{Enabled: true},
		AgentCraft: AgentCraftConfig{Listen: "127.0.0.1:7878"},
		Cluster:    ClusterConfig{Replicas: 3, Lease: 15 * time.Second, ClaimRuns: true},
	}
	if home != "" {
		c.ConfigFile = filepath.Join(home, "config.yaml")
	}
	return c
}

// SocketPath is the daemon's unix socket: <Home>/daemon.sock.
func (c *Config) SocketPath() string { return filepath.Join(c.Home, "daemon.sock") }

// DBPath is the bbolt database: <Home>/shard.db.
func (c *Config) DBPath() string { return filepath.Join(c.Home, "shard.db") }

// DiscoveryPath is the discovery file a running daemon writes:
// <Home>/daemon.json.
func (c *Config) DiscoveryPath() string { return filepath.Join(c.Home, "daemon.json") }

// LogDir is the log directory: <Home>/logs.
func (c *Config) LogDir() string { return filepath.Join(c.Home, "logs") }

// AgentLogPath is where an agent runtime's stderr goes:
// <Home>/logs/agents/<agentID>.log.
func (c *Config) AgentLogPath(agentID string) string {
	return filepath.Join(c.LogDir(), "agents", agentID+".log")
}

// SessionsDir holds session transcripts: <Home>/sessions.
func (c *Config) SessionsDir() string { return filepath.Join(c.Home, "sessions") }

// WorktreeRoot is where workspaces' worktrees go: workspaces.root, or
// <Home>/worktrees when it is unset.
func (c *Config) WorktreeRoot() string {
	if c.Workspaces.Root != "" {
		return c.Workspaces.Root
	}
	return filepath.Join(c.Home, "worktrees")
}

// WebAddr is the listen address host:port (IPv6 hosts bracketed).
func (c *Config) WebAddr() string {
	return net.JoinHostPort(c.Web.Host, strconv.Itoa(c.Web.Port))
}
