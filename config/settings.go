package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// setting describes one configuration key: the one table that RegisterFlags,
// Load and Validate all walk, so that a key cannot be reachable one way and
// not another.
type setting struct {
	// key is the dotted snake_case name, e.g. "kill.abort_grace".
	key string
	// alias is an extra, short flag name such as "web-port"; "" for none.
	alias string
	// usage is the flag help. pflag appends "(default X)" for non-zero
	// defaults; usage texts of zero-default settings state theirs.
	usage string
	// notInFile marks settings that decide where the file is (home,
	// config) and so can come only from flags, env or defaults.
	notInFile bool
	// field returns a pointer into c: *string, *int, *bool or
	// *time.Duration. Its type decides how raw values are parsed.
	field func(c *Config) any
	// check returns why a parsed value is unacceptable, or "" if it is
	// fine. nil accepts every value.
	check func(v any) string
}

// Setting keys read by Load itself.
const (
	keyHome   = "home"
	keyConfig = "config"
)

// settings returns the setting table in a stable order, which is the order
// Validate reports problems in.
func settings() []setting {
	return []setting{
		{key: keyHome, notInFile: true,
			usage: "Shard state directory (default $SHARD_HOME, else ~/.shard)",
			field: func(c *Config) any { return &c.Home }, check: absolutePath},
		{key: keyConfig, notInFile: true,
			usage: "config file; an absent default file is fine, a named one must exist (default <home>/config.yaml)",
			field: func(c *Config) any { return &c.ConfigFile }},
		{key: "foreground",
			usage: "also log to stderr (default false)",
			field: func(c *Config) any { return &c.Foreground }},

		{key: "log.level", alias: "log-level",
			usage: "minimum log level: debug, info, warn or error",
			field: func(c *Config) any { return &c.Log.Level }, check: oneOf("debug", "info", "warn", "error")},
		{key: "log.max_bytes",
			usage: "size in bytes past which shardd.log and each agent's log are rotated (at least 1024)",
			field: func(c *Config) any { return &c.Log.MaxBytes }, check: intRange(1<<10, 1<<40)},
		{key: "log.backups",
			usage: "rotated files each log keeps (<log>.1 newest … <log>.N oldest); 0 keeps none",
			field: func(c *Config) any { return &c.Log.Backups }, check: intRange(0, 1000)},

		{key: "web.host", alias: "web-host",
			usage: "HTTP/WebSocket listen host: an IP literal or localhost; a non-loopback address is remote mode and needs --public-host, --allowed-origin and --allow-insecure-remote",
			field: func(c *Config) any { return &c.Web.Host }, check: ipOrLocalhost},
		{key: "web.port", alias: "web-port",
			usage: "HTTP/WebSocket listen port; 0 picks any free port",
			field: func(c *Config) any { return &c.Web.Port }, check: intRange(0, 65535)},
		{key: "web.public_host", alias: "public-host",
			usage: `remote mode: the host[:port] browsers use, pinned; the Host header must name exactly it (default "": loopback mode)`,
			field: func(c *Config) any { return &c.Web.PublicHost }, check: publicHost},
		{key: "web.allowed_origins", alias: "allowed-origin",
			usage: "remote mode: an exact browser origin allowed to connect, e.g. https://shard.example.com; repeatable or comma-separated (default none)",
			field: func(c *Config) any { return &c.Web.AllowedOrigins }, check: originList},
		{key: "web.allow_insecure_remote", alias: "allow-insecure-remote",
			usage: "remote mode: accept plaintext HTTP, knowingly exposing session cookies to the network path (default false)",
			field: func(c *Config) any { return &c.Web.AllowInsecureRemote }},
		{key: "web.trust_proxy", alias: "trust-proxy",
			usage: `remote mode: honor forwarded headers from this reverse proxy only: "loopback" or one IP address (default "": none)`,
			field: func(c *Config) any { return &c.Web.TrustProxy }, check: trustProxy},
		{key: "web.forwarded_proto_header",
			usage: "header carrying the original scheme from the trusted proxy",
			field: func(c *Config) any { return &c.Web.ForwardedProtoHeader }, check: headerName},
		{key: "web.forwarded_host_header",
			usage: "header carrying the original host from the trusted proxy (cross-checked against --public-host)",
			field: func(c *Config) any { return &c.Web.ForwardedHostHeader }, check: headerName},
		{key: "web.enroll_ttl",
			usage: "lifetime of a one-time browser enrollment code (at most 1h)",
			field: func(c *Config) any { return &c.Web.EnrollTTL }, check: positiveAtMost(time.Hour)},
		{key: "web.session_ttl",
			usage: "lifetime of a browser session (at most 8760h)",
			field: func(c *Config) any { return &c.Web.SessionTTL }, check: positiveAtMost(365 * 24 * time.Hour)},

		{key: "provider.prices",
			usage: `usage cost per model: "MODEL=IN/OUT[/CACHE_READ/CACHE_WRITE];…" in dollars per million tokens (default "": no cost)`,
			field: func(c *Config) any { return &c.Provider.Prices }, check: func(v any) string {
				if _, err := ParsePrices(v.(string)); err != nil {
					return err.Error()
				}
				return ""
			}},
		{key: "provider.text_only_models",
			usage: `models that take no images: "MODEL;…" (default "": every model takes images)`,
			field: func(c *Config) any { return &c.Provider.TextOnlyModels }},
		{key: "compaction.enabled",
			usage: "compact the runtime's context automatically (80% between turns, 100% mid-turn); session_op compact works either way (default true)",
			field: func(c *Config) any { return &c.Compaction.Enabled }},
		{key: "compaction.keep_recent_tokens",
			usage: "recent context a compaction keeps; 0 means the runtime's default",
			field: func(c *Config) any { return &c.Compaction.KeepRecentTokens }, check: intRange(0, 1<<30)},

		{key: "jobs.max_active",
			usage: "cap on starting+active subagent runs across the daemon; excess runs wait queued",
			field: func(c *Config) any { return &c.Jobs.MaxActive }, check: positive},
		{key: "jobs.max_active_per_parent",
			usage: "cap on starting+active subagent runs per parent agent",
			field: func(c *Config) any { return &c.Jobs.MaxActivePerParent }, check: positive},
		{key: "jobs.max_tasks",
			usage: "most tasks one subagent.create may carry (unless the parent's launch policy says otherwise)",
			field: func(c *Config) any { return &c.Jobs.MaxTasks }, check: positive},
		{key: "jobs.max_depth",
			usage: "deepest nesting of subagents (a child is one deeper than its parent)",
			field: func(c *Config) any { return &c.Jobs.MaxDepth }, check: positive},
		{key: "jobs.run_timeout",
			usage: "deadline of each subagent run from start; 0 means none",
			field: func(c *Config) any { return &c.Jobs.RunTimeout }, check: nonNegative},
		{key: "jobs.retention",
			usage: "remove finished jobs (and their stopped children nothing else references, with their sessions) this long after they ended (default 0: keep them all)",
			field: func(c *Config) any { return &c.Jobs.Retention }, check: nonNegative},
		{key: "jobs.nice",
			usage: "niceness added for subagent runtimes and everything they start, so the daemon and directly used agents are served first on busy CPUs (0-19; 0: the daemon's own)",
			field: func(c *Config) any { return &c.Jobs.Nice }, check: intRange(0, 19)},
		{key: "jobs.sched_idle",
			usage: "run subagent runtimes and everything they start under SCHED_IDLE, so any other work preempts them at once; they still get every CPU nothing else wants (false: jobs.nice alone)",
			field: func(c *Config) any { return &c.Jobs.SchedIdle }},
		{key: "jobs.aliases",
			usage: `friendly alias pool for subagents, comma-separated (default "": the built-in pool)`,
			field: func(c *Config) any { return &c.Jobs.Aliases }},

		{key: "workspaces.root",
			usage: `directory for workspaces' git worktrees (default "": <home>/worktrees)`,
			field: func(c *Config) any { return &c.Workspaces.Root }, check: absoluteOrEmpty},
		{key: "workspaces.copy_files",
			usage: `files copied from the main checkout into every new worktree, comma-separated relative paths (default "": none)`,
			field: func(c *Config) any { return &c.Workspaces.CopyFiles }, check: relativeList},
		{key: "workspaces.setup_command",
			usage: `command run in every new worktree, split on spaces, no shell; a failure rolls the create back (default "": none)`,
			field: func(c *Config) any { return &c.Workspaces.SetupCommand }},

		{key: "agentcraft.enabled",
			usage: "serve the AgentCraft v1 dialect on a WebSocket endpoint (default false)",
			field: func(c *Config) any { return &c.AgentCraft.Enabled }},
		{key: "agentcraft.listen",
			usage: "the AgentCraft v1 endpoint's host:port; a loopback address unless agentcraft.allow_non_loopback",
			field: func(c *Config) any { return &c.AgentCraft.Listen }, check: hostPort},
		{key: "agentcraft.allow_non_loopback",
			usage: "let agentcraft.listen name a non-loopback address; Host headers must still be loopback names (default false)",
			field: func(c *Config) any { return &c.AgentCraft.AllowNonLoopback }},
		{key: "team.repo",
			usage: `main checkout a team goal submitted without a cwd works in (default "": a goal names its cwd)`,
			field: func(c *Config) any { return &c.Team.Repo }, check: absoluteOrEmpty},
		{key: "team.max_workers",
			usage: "most team tasks whose workers run at once, across every goal",
			field: func(c *Config) any { return &c.Team.MaxWorkers }, check: positive},
		{key: "team.ci_command",
			usage: `test command run with sh -c in a team task's worktree when its worker finishes (default "": none, CI unknown)`,
			field: func(c *Config) any { return &c.Team.CICommand }},
		{key: "team.ci_timeout",
			usage: "bound of one team CI run; past it the CI fails",
			field: func(c *Config) any { return &c.Team.CITimeout }, check: positive},

		{key: "cluster.node",
			usage: `this node's name in a cluster: letters, digits, '-' and '_' (default "": no cluster, a single shardd)`,
			field: func(c *Config) any { return &c.Cluster.Node }},
		{key: "cluster.listen",
			usage: `host:port of the routes between cluster nodes; a non-loopback address needs cluster.token and TLS (default "")`,
			field: func(c *Config) any { return &c.Cluster.Listen }},
		{key: "cluster.advertise",
			usage: `host:port the other nodes reach this node's routes at, when not cluster.listen (default "")`,
			field: func(c *Config) any { return &c.Cluster.Advertise }},
		{key: "cluster.client_listen",
			usage: `host:port for NATS clients other than shardd (default "": none)`,
			field: func(c *Config) any { return &c.Cluster.ClientListen }},
		{key: "cluster.routes",
			usage: `the other nodes' route URLs, nats://host:port, comma-separated or repeated (default none)`,
			field: func(c *Config) any { return &c.Cluster.Routes }},
		{key: "cluster.token",
			usage: `secret authenticating the routes and clients; prefer SHARD_CLUSTER_TOKEN or the config file to a flag (default "")`,
			field: func(c *Config) any { return &c.Cluster.Token }},
		{key: "cluster.tls_cert",
			usage: `this node's certificate (PEM) for routes and clients (default "")`,
			field: func(c *Config) any { return &c.Cluster.TLSCert }},
		{key: "cluster.tls_key",
			usage: `this node's private key (PEM) (default "")`,
			field: func(c *Config) any { return &c.Cluster.TLSKey }},
		{key: "cluster.tls_ca",
			usage: `CA (PEM) signing the other nodes' certificates; routes then verify both ends (default "")`,
			field: func(c *Config) any { return &c.Cluster.TLSCA }},
		{key: "cluster.store_dir",
			usage: `JetStream's store (default "": <home>/cluster/jetstream)`,
			field: func(c *Config) any { return &c.Cluster.StoreDir }, check: absoluteOrEmpty},
		{key: "cluster.replicas",
			usage: "copies of each replicated record the cluster keeps (1 to 5)",
			field: func(c *Config) any { return &c.Cluster.Replicas }, check: intRange(1, 5)},
		{key: "cluster.lease",
			usage: "how long a node's heartbeat is valid; a node silent longer is declared dead",
			field: func(c *Config) any { return &c.Cluster.Lease }, check: positive},
		{key: "cluster.url",
			usage: `use an existing NATS cluster at these URLs instead of embedding a server (default "")`,
			field: func(c *Config) any { return &c.Cluster.URL }},
		{key: "cluster.nkey_seed_file",
			usage: `the cluster's user nkey seed file: authenticates to the cluster.url NATS; embedded, the only key cluster.client_listen accepts (default "")`,
			field: func(c *Config) any { return &c.Cluster.NKeySeedFile }},
		{key: "cluster.claim_runs",
			usage: "claim and run the subagent runs any node may take, up to jobs.max_active (false: run none here)",
			field: func(c *Config) any { return &c.Cluster.ClaimRuns }},

		{key: "runtime.command",
			usage: `agent runtime command line (default "": run this executable as "agent --headless")`,
			field: func(c *Config) any { return &c.Runtime.Command }},
		{key: "runtime.idle_timeout",
			usage: "stop a runtime after it has been inactive (idle or error) this long; active turns never expire",
			field: func(c *Config) any { return &c.Runtime.IdleTimeout }, check: positive},
		{key: "runtime.start_timeout",
			usage: "how long a new runtime has to send hello and its first sync",
			field: func(c *Config) any { return &c.Runtime.StartTimeout }, check: positive},

		{key: "kill.abort_grace",
			usage: "wait for idle after abort before SIGTERM; 0 skips to SIGTERM",
			field: func(c *Config) any { return &c.Kill.AbortGrace }, check: nonNegative},
		{key: "kill.term_grace",
			usage: "wait after SIGTERM before SIGKILL; 0 skips to SIGKILL",
			field: func(c *Config) any { return &c.Kill.TermGrace }, check: nonNegative},

		{key: "shutdown.timeout",
			usage: "bound on a graceful daemon shutdown",
			field: func(c *Config) any { return &c.Shutdown.Timeout }, check: positive},

		{key: "headless.timeout",
			usage: "how long a request raised with no interactive client waits for an answer",
			field: func(c *Config) any { return &c.Headless.Timeout }, check: positive},
		{key: "headless.policy",
			usage: "default headless policy: deny, allow_if_rule_matches or queue",
			field: func(c *Config) any { return &c.Headless.Policy }, check: oneOf("deny", "allow_if_rule_matches", "queue")},

		{key: "gateway.ping_interval",
			usage: "WebSocket keepalive ping period",
			field: func(c *Config) any { return &c.Gateway.PingInterval }, check: positive},
		{key: "gateway.ping_timeout",
			usage: "close a connection whose ping goes unanswered this long",
			field: func(c *Config) any { return &c.Gateway.PingTimeout }, check: positive},
		{key: "gateway.ticket_ttl",
			usage: "WebSocket auth ticket lifetime; at most 30s",
			field: func(c *Config) any { return &c.Gateway.TicketTTL }, check: positiveAtMost(30 * time.Second)},
		{key: "gateway.outbound_max_bytes",
			usage: "per-connection outbound queue cap in bytes; past it the connection is closed as a slow consumer",
			field: func(c *Config) any { return &c.Gateway.OutboundMaxBytes }, check: positive},
		{key: "gateway.outbound_max_messages",
			usage: "per-connection outbound queue cap in messages",
			field: func(c *Config) any { return &c.Gateway.OutboundMaxMessages }, check: positive},
		{key: "gateway.inbound_max_bytes",
			usage: "per-connection cap on the bytes of commands read and not yet answered; past it the connection is not read until responses drain",
			field: func(c *Config) any { return &c.Gateway.InboundMaxBytes }, check: positive},
		{key: "gateway.inbound_max_records",
			usage: "per-connection cap on the commands read and not yet answered",
			field: func(c *Config) any { return &c.Gateway.InboundMaxRecords }, check: positive},
		{key: "gateway.max_connections",
			usage: "cap on open client connections (unix socket and WebSocket together); past it new ones are refused cleanly",
			field: func(c *Config) any { return &c.Gateway.MaxConnections }, check: positive},

		{key: "store.lock_timeout",
			usage: "how long opening the database waits for another process's lock",
			field: func(c *Config) any { return &c.Store.LockTimeout }, check: positive},
		{key: "store.no_sync",
			usage: "skip fsync on database commits: faster, unsafe on power loss (default false)",
			field: func(c *Config) any { return &c.Store.NoSync }},

		{key: "provider.name",
			usage: "default model provider: sim, openai, anthropic or a name under providers: in the config file",
			field: func(c *Config) any { return &c.Provider.Name }, check: providerName},
		{key: "provider.base_url",
			usage: `provider API base URL (default "": the provider's own)`,
			field: func(c *Config) any { return &c.Provider.BaseURL }, check: httpURL},
		{key: "provider.model",
			usage: `model name (default "": the provider's default model)`,
			field: func(c *Config) any { return &c.Provider.Model }},
		{key: "provider.api_key_env",
			usage: `name of the environment variable holding the API key (default "": the provider's usual one)`,
			field: func(c *Config) any { return &c.Provider.APIKeyEnv }},

		{key: "sim.context_window",
			usage: "sim provider context window in tokens",
			field: func(c *Config) any { return &c.Sim.ContextWindow }, check: positive},
	}
}

// flagName is the long flag for key: dots kept, underscores to dashes
// (kill.abort_grace → kill.abort-grace).
func flagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// envName is the environment variable for key: SHARD_ plus the key upper
// cased with dots to underscores (kill.abort_grace → SHARD_KILL_ABORT_GRACE).
func envName(key string) string {
	return "SHARD_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// get returns the value s.field points at in c.
func (s setting) get(c *Config) any {
	switch p := s.field(c).(type) {
	case *string:
		return *p
	case *int:
		return *p
	case *bool:
		return *p
	case *time.Duration:
		return *p
	case *[]string:
		return *p
	default:
		panic(fmt.Sprintf("config: setting %s: unsupported field type %T", s.key, p))
	}
}

// parse converts a raw value (a YAML scalar from the file, or a string from
// the environment or a flag) into the setting's Go type. The second result
// is the reason it cannot, or "".
func (s setting) parse(raw any) (any, string) {
	switch s.field(&Config{}).(type) {
	case *string:
		switch v := raw.(type) {
		case string:
			return v, ""
		case bool, int, int64, uint64, float64:
			return fmt.Sprint(v), ""
		}
		return nil, fmt.Sprintf("want a string, got %v", raw)
	case *int:
		switch v := raw.(type) {
		case int:
			return v, ""
		case int64:
			return int(v), ""
		case string:
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Sprintf("invalid integer %q", v)
			}
			return n, ""
		}
		return nil, fmt.Sprintf("want an integer, got %v", raw)
	case *bool:
		switch v := raw.(type) {
		case bool:
			return v, ""
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Sprintf("invalid boolean %q", v)
			}
			return b, ""
		}
		return nil, fmt.Sprintf("want true or false, got %v", raw)
	case *time.Duration:
		switch v := raw.(type) {
		case string:
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Sprintf("invalid duration %q", v)
			}
			return d, ""
		case time.Duration:
			return v, ""
		case int:
			if v == 0 {
				return time.Duration(0), ""
			}
		}
		return nil, fmt.Sprintf(`want a duration with a unit such as "5s", got %v`, raw)
	case *[]string:
		return parseList(raw)
	}
	panic(fmt.Sprintf("config: setting %s: unsupported field type", s.key))
}

// validate parses raw and checks the result, returning the typed value or a
// KeyError that names the key and source.
func (s setting) validate(raw any, source string) (any, error) {
	v, reason := s.parse(raw)
	if reason == "" && s.check != nil {
		reason = s.check(v)
	}
	if reason != "" {
		return nil, invalid(s.key, source, reason)
	}
	return v, nil
}

// Validate checks every setting of c against its range and returns the first
// problem as a *KeyError wrapping ErrInvalid, in setting-table order, then
// the combination of web settings (web.go: the remote-mode table). Load
// calls it on the merged result; embedders building a Config by hand (from
// Default) should call it too.
func (c *Config) Validate() error {
	for _, s := range settings() {
		if s.check == nil {
			continue
		}
		if reason := s.check(s.get(c)); reason != "" {
			return invalid(s.key, "", reason)
		}
	}
	if err := c.validateProviders(); err != nil {
		return err
	}
	if err := c.validateAgentCraft(); err != nil {
		return err
	}
	return c.validateWeb()
}

// providerName accepts what may name a provider (validateProviders checks
// that it names one).
func providerName(v any) string {
	if s := v.(string); !providerNamePattern.MatchString(s) {
		return fmt.Sprintf("%q is not a provider name", s)
	}
	return ""
}

// Range and enum checks used in the setting table. Each returns "" for an
// acceptable value and a reason otherwise.

func positive(v any) string {
	switch v := v.(type) {
	case time.Duration:
		if v <= 0 {
			return fmt.Sprintf("must be positive, got %s", v)
		}
	case int:
		if v <= 0 {
			return fmt.Sprintf("must be positive, got %d", v)
		}
	}
	return ""
}

func nonNegative(v any) string {
	if d, ok := v.(time.Duration); ok && d < 0 {
		return fmt.Sprintf("must not be negative, got %s", d)
	}
	return ""
}

func positiveAtMost(hi time.Duration) func(any) string {
	return func(v any) string {
		if d := v.(time.Duration); d <= 0 || d > hi {
			return fmt.Sprintf("must be more than 0 and at most %s, got %s", hi, d)
		}
		return ""
	}
}

func intRange(lo, hi int) func(any) string {
	return func(v any) string {
		if n := v.(int); n < lo || n > hi {
			return fmt.Sprintf("must be in %d..%d, got %d", lo, hi, n)
		}
		return ""
	}
}

func oneOf(allowed ...string) func(any) string {
	return func(v any) string {
		if s := v.(string); !slices.Contains(allowed, s) {
			return fmt.Sprintf("must be one of %s; got %q", strings.Join(allowed, ", "), s)
		}
		return ""
	}
}

func absolutePath(v any) string {
	if p := v.(string); !filepath.IsAbs(p) {
		return fmt.Sprintf("must be an absolute path, got %q", p)
	}
	return ""
}

// parseList reads a list setting: a YAML sequence, the values of a
// repeatable flag, or a comma-separated string (env, file scalar). Entries
// are trimmed and empty ones dropped.
func parseList(raw any) (any, string) {
	var in []string
	switch v := raw.(type) {
	case string:
		in = strings.Split(v, ",")
	case []string:
		in = v
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return nil, fmt.Sprintf("want a list of strings, got element %v", e)
			}
			in = append(in, str)
		}
	case nil:
	default:
		return nil, fmt.Sprintf("want a list of strings, got %v", raw)
	}
	var out []string
	for _, e := range in {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out, ""
}

func httpURL(v any) string {
	s := v.(string)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http or https URL", s)
	}
	return ""
}

// absoluteOrEmpty accepts "" (the default applies) or an absolute path.
func absoluteOrEmpty(v any) string {
	if v.(string) == "" {
		return ""
	}
	return absolutePath(v)
}

// relativeList accepts a comma-separated list of relative paths that stay
// inside their root (no "..", not absolute).
func relativeList(v any) string {
	for _, f := range strings.Split(v.(string), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if c := filepath.Clean(f); filepath.IsAbs(f) || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Sprintf("%q must be a relative path inside the repository", f)
		}
	}
	return ""
}

// hostPort accepts host:port with a port number.
func hostPort(v any) string {
	host, port, err := net.SplitHostPort(v.(string))
	if err != nil {
		return fmt.Sprintf("%q is not host:port", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q has no port number", v)
	}
	_ = host
	return ""
}

// validateAgentCraft refuses an agentcraft.listen that is not a loopback
// address (127.0.0.0/8, ::1, localhost) unless agentcraft.allow_non_loopback.
func (c *Config) validateAgentCraft() error {
	if c.AgentCraft.AllowNonLoopback {
		return nil
	}
	host, _, err := net.SplitHostPort(c.AgentCraft.Listen)
	if err != nil {
		return nil // hostPort reported it
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
		return nil
	}
	return invalid("agentcraft.listen", "", fmt.Sprintf("%q is not a loopback address; set agentcraft.allow_non_loopback to serve the AgentCraft endpoint beyond this machine", c.AgentCraft.Listen))
}
