package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// briefKeys is every key the design promises, in the brief's order.
var briefKeys = []string{
	"home", "config", "foreground", "log.level", "log.max_bytes", "log.backups", "web.host", "web.port",
	"web.public_host", "web.allowed_origins", "web.allow_insecure_remote", "web.trust_proxy",
	"web.forwarded_proto_header", "web.forwarded_host_header", "web.enroll_ttl", "web.session_ttl",
	"runtime.command", "runtime.idle_timeout", "runtime.start_timeout",
	"kill.abort_grace", "kill.term_grace", "shutdown.timeout",
	"headless.timeout", "headless.policy",
	"gateway.ping_interval", "gateway.ping_timeout", "gateway.ticket_ttl",
	"gateway.outbound_max_bytes", "gateway.outbound_max_messages",
	"gateway.inbound_max_bytes", "gateway.inbound_max_records", "gateway.max_connections",
	"store.lock_timeout", "store.no_sync",
	"provider.name", "provider.base_url", "provider.model", "provider.api_key_env",
	"sim.context_window",
	"cluster.node", "cluster.listen", "cluster.advertise", "cluster.client_listen", "cluster.routes",
	"cluster.token", "cluster.tls_cert", "cluster.tls_key", "cluster.tls_ca", "cluster.store_dir",
	"cluster.replicas", "cluster.lease", "cluster.url", "cluster.nkey_seed_file", "cluster.claim_runs",
	"jobs.max_active",
	"jobs.max_active_per_parent",
	"jobs.max_tasks",
	"jobs.max_depth",
	"jobs.run_timeout", "jobs.retention",
	"jobs.nice",
	"jobs.sched_idle",
	"jobs.aliases",
	"provider.prices",
	"provider.text_only_models",
	"compaction.enabled",
	"compaction.keep_recent_tokens",
	"workspaces.root",
	"workspaces.copy_files",
	"workspaces.setup_command",
	"agentcraft.enabled", "agentcraft.listen", "agentcraft.allow_non_loopback",
	"team.repo", "team.max_workers", "team.ci_command", "team.ci_timeout",
}

// fixture is one Load call's inputs: a user home, an optional config.yaml
// in the default place, env and flag arguments.
type fixture struct {
	userHome string
	home     string // <userHome>/.shard
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	u := t.TempDir()
	return fixture{userHome: u, home: filepath.Join(u, ".shard")}
}

// writeFile writes body to <home>/config.yaml and returns the path.
func (f fixture) writeFile(t *testing.T, body string) string {
	t.Helper()
	if err := os.MkdirAll(f.home, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.home, "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f fixture) load(t *testing.T, args, environ []string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("shardd", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return Load(fs, environ, f.userHome)
}

func TestDefault(t *testing.T) {
	want := &Config{
		Home:       "/h",
		ConfigFile: "/h/config.yaml",
		Log:        LogConfig{Level: "info", MaxBytes: 10 << 20, Backups: 3},
		Web: WebConfig{Host: "127.0.0.1", Port: 7420,
			ForwardedProtoHeader: "X-Forwarded-Proto", ForwardedHostHeader: "X-Forwarded-Host",
			EnrollTTL: 5 * time.Minute, SessionTTL: 720 * time.Hour},
		Runtime:  RuntimeConfig{IdleTimeout: 10 * time.Minute, StartTimeout: 10 * time.Second},
		Kill:     KillConfig{AbortGrace: 5 * time.Second, TermGrace: 5 * time.Second},
		Shutdown: ShutdownConfig{Timeout: 30 * time.Second},
		Headless: HeadlessConfig{Timeout: 5 * time.Minute, Policy: "deny"},
		Gateway: GatewayConfig{PingInterval: 30 * time.Second, PingTimeout: 10 * time.Second,
			TicketTTL: 30 * time.Second, OutboundMaxBytes: 8 * 1024 * 1024, OutboundMaxMessages: 10000,
			InboundMaxBytes: 8 * 1024 * 1024, InboundMaxRecords: 1024, MaxConnections: 1024},
		Store:      StoreConfig{LockTimeout: 2 * time.Second},
		Provider:   ProviderConfig{Name: "sim"},
		Sim:        SimConfig{ContextWindow: 200000},
		Jobs:       JobsConfig{MaxActive: 16, MaxActivePerParent: 8, MaxTasks: 8, MaxDepth: 3, RunTimeout: 30 * time.Minute, Nice: 10, SchedIdle: true},
		Compaction: CompactionConfig{Enabled: true},
		AgentCraft: AgentCraftConfig{Listen: "127.0.0.1:7878"},
		Team:       TeamConfig{MaxWorkers: 3, CITimeout: 10 * time.Minute},
		Cluster:    ClusterConfig{Replicas: 3, Lease: 15 * time.Second, ClaimRuns: true},
		Runtimes:   map[string]RuntimeProfile{DefaultRuntime: {Kind: KindShard}},
	}
	got := Default("/h")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Default(/h) =\n%+v\nwant\n%+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestLoadDefaults(t *testing.T) {
	f := newFixture(t)
	got, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(f.home); !reflect.DeepEqual(got, want) {
		t.Fatalf("Load with no inputs =\n%+v\nwant Default(%q) =\n%+v", got, f.home, want)
	}
	if _, err := Load(nil, nil, f.userHome); err != nil {
		t.Fatalf("Load with a nil flag set: %v", err)
	}
}

func TestLayering(t *testing.T) {
	const file = `
web:
  port: 1111
kill:
  abort_grace: 1s
log:
  level: warn
store:
  no_sync: true
`
	type want struct {
		port   int
		grace  time.Duration
		level  string
		noSync bool
	}
	tests := []struct {
		name    string
		file    string
		environ []string
		args    []string
		want    want
	}{
		{"defaults", "", nil, nil, want{7420, 5 * time.Second, "info", false}},
		{"file over defaults", file, nil, nil, want{1111, time.Second, "warn", true}},
		{"env over file", file,
			[]string{"SHARD_WEB_PORT=2222", "SHARD_KILL_ABORT_GRACE=2s", "SHARD_STORE_NO_SYNC=false"}, nil,
			want{2222, 2 * time.Second, "warn", false}},
		{"flag over env", file,
			[]string{"SHARD_WEB_PORT=2222", "SHARD_KILL_ABORT_GRACE=2s", "SHARD_LOG_LEVEL=error"},
			[]string{"--web.port=3333", "--kill.abort-grace=3s"},
			want{3333, 3 * time.Second, "error", true}},
		{"flag over file without env", file, nil, []string{"--log.level=debug", "--store.no-sync=false"},
			want{1111, time.Second, "debug", false}},
		{"flag set to its default still overrides", file, nil, []string{"--web.port=7420"},
			want{7420, time.Second, "warn", true}},
		{"env alone", "", []string{"SHARD_WEB_PORT=0", "SHARD_KILL_ABORT_GRACE=250ms"}, nil,
			want{0, 250 * time.Millisecond, "info", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.file != "" {
				f.writeFile(t, tt.file)
			}
			c, err := f.load(t, tt.args, tt.environ)
			if err != nil {
				t.Fatal(err)
			}
			got := want{c.Web.Port, c.Kill.AbortGrace, c.Log.Level, c.Store.NoSync}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// altValue is a valid, non-default raw value for each key, used to prove
// that every key is reachable through the file, env and flags.
func altValue(t *testing.T, s setting, dir string) string {
	t.Helper()
	switch s.key {
	case "home":
		return filepath.Join(dir, "althome")
	case "config":
		return filepath.Join(dir, "alt.yaml")
	case "log.level":
		return "debug"
	case "web.host":
		return "localhost"
	case "headless.policy":
		return "queue"
	case "provider.name":
		return "anthropic"
	case "provider.base_url":
		return "http://127.0.0.1:9/v1"
	case "gateway.ticket_ttl":
		return "7s"
	case "web.public_host":
		return "shard.example.test:8443"
	case "web.allowed_origins":
		return "https://shard.example.test:8443"
	case "web.trust_proxy":
		return "loopback"
	case "web.forwarded_proto_header":
		return "X-Proxy-Proto"
	case "web.forwarded_host_header":
		return "X-Proxy-Host"
	case "web.enroll_ttl":
		return "2m"
	case "provider.prices":
		return "gpt-4.1=2/8;claude=3/15/0.3/3.75"
	case "compaction.enabled":
		return "false"
	case "workspaces.root":
		return filepath.Join(dir, "altworktrees")
	case "team.repo":
		return filepath.Join(dir, "altrepo")
	case "jobs.nice":
		return "3"
	case "jobs.sched_idle", "cluster.claim_runs":
		return "false"
	case "log.backups":
		return "5"
	case "agentcraft.listen":
		return "127.0.0.1:7979"
	case "cluster.routes":
		return "nats://127.0.0.1:6251,nats://127.0.0.1:6252"
	case "cluster.store_dir":
		return filepath.Join(dir, "altjetstream")
	case "cluster.replicas":
		return "5"
	}
	switch s.field(&Config{}).(type) {
	case *string:
		return "alt-" + s.key
	case *int:
		return "4321"
	case *bool:
		return "true"
	case *time.Duration:
		return "7m30s"
	}
	t.Fatalf("no alternative value for %s", s.key)
	return ""
}

// companions are the settings a key needs alongside to pass the
// remote-mode table (web.go), given the same way as the key itself.
func companions(key string) map[string]string {
	remote := map[string]string{
		"web.trust_proxy":           "loopback",
		"web.public_host":           "shard.example.test:8443",
		"web.allowed_origins":       "https://shard.example.test:8443",
		"web.allow_insecure_remote": "true",
	}
	switch key {
	case "web.public_host", "web.allowed_origins", "web.trust_proxy", "web.allow_insecure_remote":
		delete(remote, key)
		return remote
	}
	return nil
}

// fileBody renders flat key/value pairs as nested YAML.
func fileBody(kv map[string]string) string {
	sections := make(map[string][]string)
	var top []string
	for k, v := range kv {
		section, leaf, nested := strings.Cut(k, ".")
		if !nested {
			top = append(top, section+": "+v+"\n")
			continue
		}
		sections[section] = append(sections[section], "  "+leaf+": "+v+"\n")
	}
	body := strings.Join(top, "")
	for section, lines := range sections {
		body += section + ":\n" + strings.Join(lines, "")
	}
	return body
}

func TestEveryKeyEveryWay(t *testing.T) {
	for _, s := range settings() {
		for _, way := range []string{"file", "env", "flag"} {
			if way == "file" && s.notInFile {
				continue
			}
			t.Run(s.key+"/"+way, func(t *testing.T) {
				f := newFixture(t)
				raw := altValue(t, s, f.userHome)
				if s.key == "config" {
					if err := os.WriteFile(raw, nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				var args, environ []string
				kv := map[string]string{s.key: raw}
				for k, v := range companions(s.key) {
					kv[k] = v
				}
				switch way {
				case "file":
					f.writeFile(t, fileBody(kv))
				case "env":
					for k, v := range kv {
						environ = append(environ, envName(k)+"="+v)
					}
				case "flag":
					for k, v := range kv {
						args = append(args, "--"+flagName(k)+"="+v)
					}
				}
				c, err := f.load(t, args, environ)
				if err != nil {
					t.Fatal(err)
				}
				want, reason := s.parse(raw)
				if reason != "" {
					t.Fatal(reason)
				}
				if got := s.get(c); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s = %v, want %v", s.key, got, want)
				}
				if reflect.DeepEqual(want, s.get(Default(f.home))) {
					t.Fatalf("test value %v for %s equals the default; it proves nothing", want, s.key)
				}
			})
		}
	}
}

func TestAliasFlags(t *testing.T) {
	f := newFixture(t)
	alt := filepath.Join(f.userHome, "elsewhere")
	c, err := f.load(t, []string{"--web-host=::1", "--web-port=0", "--log-level=debug", "--home=" + alt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Web.Host != "::1" || c.Web.Port != 0 || c.Log.Level != "debug" || c.Home != alt {
		t.Fatalf("aliases not applied: web=%+v log=%+v home=%q", c.Web, c.Log, c.Home)
	}
	if c.WebAddr() != "[::1]:0" {
		t.Fatalf("WebAddr = %q", c.WebAddr())
	}

	// Both spellings agreeing is fine; disagreeing names the key.
	if _, err := f.load(t, []string{"--web-port=9", "--web.port=9"}, nil); err != nil {
		t.Fatalf("agreeing spellings: %v", err)
	}
	_, err = f.load(t, []string{"--web-port=9", "--web.port=10"}, nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "web.port") {
		t.Fatalf("conflicting spellings: err = %v, want ErrInvalid naming web.port", err)
	}
}

func TestUnknownKeyInFile(t *testing.T) {
	tests := []struct {
		name, body, key string
	}{
		{"nested typo", "kill:\n  abort_grce: 5s\n", "kill.abort_grce"},
		{"top-level typo", "webb:\n  port: 1\n", "webb"},
		{"top-level scalar", "verbose: true\n", "verbose"},
		{"too deep", "web:\n  port:\n    number: 1\n", "web.port.number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			path := f.writeFile(t, tt.body)
			_, err := f.load(t, nil, nil)
			if !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("err = %v, want ErrUnknownKey", err)
			}
			want := `config: unknown key "` + tt.key + `" in ` + path
			if err.Error() != want {
				t.Fatalf("err = %q, want %q", err, want)
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.key {
				t.Fatalf("errors.As KeyError: %+v", ke)
			}
		})
	}
}

func TestBadValues(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		environ []string
		args    []string
		want    string // full error text; <file> is replaced by the path
	}{
		{name: "file bad duration", file: "kill:\n  abort_grace: 5 parsecs\n",
			want: `config: kill.abort_grace: invalid duration "5 parsecs" (from <file>)`},
		{name: "file duration without unit", file: "kill:\n  term_grace: 5\n",
			want: `config: kill.term_grace: want a duration with a unit such as "5s", got 5 (from <file>)`},
		{name: "file negative duration", file: "kill:\n  abort_grace: -1s\n",
			want: `config: kill.abort_grace: must not be negative, got -1s (from <file>)`},
		{name: "file bad port", file: "web:\n  port: abc\n",
			want: `config: web.port: invalid integer "abc" (from <file>)`},
		{name: "file float port", file: "web:\n  port: 1.5\n",
			want: `config: web.port: want an integer, got 1.5 (from <file>)`},
		{name: "file port too big", file: "web:\n  port: 70000\n",
			want: `config: web.port: must be in 0..65535, got 70000 (from <file>)`},
		{name: "file bad level", file: "log:\n  level: verbose\n",
			want: `config: log.level: must be one of debug, info, warn, error; got "verbose" (from <file>)`},
		{name: "file bad policy", file: "headless:\n  policy: maybe\n",
			want: `config: headless.policy: must be one of deny, allow_if_rule_matches, queue; got "maybe" (from <file>)`},
		{name: "file ticket ttl too long", file: "gateway:\n  ticket_ttl: 31s\n",
			want: `config: gateway.ticket_ttl: must be more than 0 and at most 30s, got 31s (from <file>)`},
		{name: "file ticket ttl zero", file: "gateway:\n  ticket_ttl: 0s\n",
			want: `config: gateway.ticket_ttl: must be more than 0 and at most 30s, got 0s (from <file>)`},
		{name: "file unknown provider", file: "provider:\n  name: llama\n",
			want: `config: provider.name: want sim, openai, anthropic or a name under providers:, got "llama"`},
		{name: "file remote host alone", file: "web:\n  host: 0.0.0.0\n",
			want: `config: web.public_host: remote mode (web.host 0.0.0.0 is not loopback) needs the pinned public host: set --public-host <host:port>`},
		{name: "file host name", file: "web:\n  host: shard.example.com\n",
			want: `config: web.host: "shard.example.com" is not an IP address or localhost; bind an address, and name the host browsers use with --public-host (from <file>)`},
		{name: "file bad bool", file: "store:\n  no_sync: sometimes\n",
			want: `config: store.no_sync: invalid boolean "sometimes" (from <file>)`},
		{name: "file empty value", file: "web:\n  port:\n",
			want: `config: web.port: no value (from <file>)`},
		{name: "file section as scalar", file: "kill: 5s\n",
			want: `config: kill: want a mapping of kill settings, got 5s (from <file>)`},
		{name: "file sets home", file: "home: /elsewhere\n",
			want: `config: home: cannot be set in the config file; use --home or SHARD_HOME (from <file>)`},
		{name: "env bad duration", environ: []string{"SHARD_KILL_ABORT_GRACE=5 parsecs"},
			want: `config: kill.abort_grace: invalid duration "5 parsecs" (from $SHARD_KILL_ABORT_GRACE)`},
		{name: "env bad port", environ: []string{"SHARD_WEB_PORT=abc"},
			want: `config: web.port: invalid integer "abc" (from $SHARD_WEB_PORT)`},
		{name: "env zero context window", environ: []string{"SHARD_SIM_CONTEXT_WINDOW=0"},
			want: `config: sim.context_window: must be positive, got 0 (from $SHARD_SIM_CONTEXT_WINDOW)`},
		{name: "env bad url", environ: []string{"SHARD_PROVIDER_BASE_URL=localhost:8080"},
			want: `config: provider.base_url: "localhost:8080" is not an http or https URL (from $SHARD_PROVIDER_BASE_URL)`},
		{name: "env relative home", environ: []string{"SHARD_HOME=rel/dir"},
			want: `config: home: must be an absolute path, got "rel/dir" (from $SHARD_HOME)`},
		{name: "env beats a good file value", file: "web:\n  port: 1\n", environ: []string{"SHARD_WEB_PORT=-1"},
			want: `config: web.port: must be in 0..65535, got -1 (from $SHARD_WEB_PORT)`},
		{name: "flag negative duration", args: []string{"--kill.term-grace=-2s"},
			want: `config: kill.term_grace: must not be negative, got -2s (from --kill.term-grace)`},
		{name: "flag port too big", args: []string{"--web-port=70000"},
			want: `config: web.port: must be in 0..65535, got 70000 (from --web-port)`},
		{name: "flag remote host alone", args: []string{"--web.host=10.0.0.1"},
			want: `config: web.public_host: remote mode (web.host 10.0.0.1 is not loopback) needs the pinned public host: set --public-host <host:port>`},
		{name: "flag bad origin", args: []string{"--allowed-origin=https://a.example/"},
			want: `config: web.allowed_origins: "https://a.example/" is not an exact origin such as https://shard.example.com (scheme, lowercase host, a port only if not the default, no path or trailing slash): origin "https://a.example/": protocol: malformed handshake header: bad character in host "a.example/" (from --allowed-origin)`},
		{name: "flag zero shutdown timeout", args: []string{"--shutdown.timeout=0s"},
			want: `config: shutdown.timeout: must be positive, got 0s (from --shutdown.timeout)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			path := filepath.Join(f.home, "config.yaml")
			if tt.file != "" {
				f.writeFile(t, tt.file)
			}
			_, err := f.load(t, tt.args, tt.environ)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if want := strings.ReplaceAll(tt.want, "<file>", path); err.Error() != want {
				t.Fatalf("err =\n%q\nwant\n%q", err, want)
			}
		})
	}
}

// A flag value of the wrong type is rejected by pflag while parsing, and
// that error names the flag.
func TestBadFlagTypeNamesFlag(t *testing.T) {
	for _, arg := range []string{"--kill.abort-grace=5 parsecs", "--web-port=abc", "--store.no-sync=maybe"} {
		fs := pflag.NewFlagSet("shardd", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		RegisterFlags(fs)
		err := fs.Parse([]string{arg})
		name, _, _ := strings.Cut(arg, "=")
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", arg, err, name)
		}
	}
}

func TestConfigFile(t *testing.T) {
	t.Run("missing default file is fine", func(t *testing.T) {
		f := newFixture(t)
		c, err := f.load(t, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.ConfigFile != filepath.Join(f.home, "config.yaml") {
			t.Fatalf("ConfigFile = %q", c.ConfigFile)
		}
	})
	t.Run("explicit flag to a missing file", func(t *testing.T) {
		f := newFixture(t)
		missing := filepath.Join(f.userHome, "nope.yaml")
		_, err := f.load(t, []string{"--config=" + missing}, nil)
		if !errors.Is(err, ErrFileNotFound) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("err = %v, want ErrFileNotFound naming %s", err, missing)
		}
	})
	t.Run("explicit env to a missing file", func(t *testing.T) {
		f := newFixture(t)
		missing := filepath.Join(f.userHome, "nope.yaml")
		_, err := f.load(t, nil, []string{"SHARD_CONFIG=" + missing})
		if !errors.Is(err, ErrFileNotFound) {
			t.Fatalf("err = %v, want ErrFileNotFound", err)
		}
	})
	t.Run("explicit file elsewhere is read and the default ignored", func(t *testing.T) {
		f := newFixture(t)
		f.writeFile(t, "web:\n  port: 1\n")
		other := filepath.Join(f.userHome, "other.yaml")
		if err := os.WriteFile(other, []byte("web:\n  port: 2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := f.load(t, []string{"--config", other}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Web.Port != 2 || c.ConfigFile != other {
			t.Fatalf("port %d from %q, want 2 from %q", c.Web.Port, c.ConfigFile, other)
		}
	})
	t.Run("file under --home", func(t *testing.T) {
		f := newFixture(t)
		alt := filepath.Join(f.userHome, "alt")
		if err := os.MkdirAll(alt, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(alt, "config.yaml"), []byte("web:\n  port: 3\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := f.load(t, []string{"--home=" + alt}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Web.Port != 3 {
			t.Fatalf("port %d, want 3 from <home>/config.yaml", c.Web.Port)
		}
	})
	t.Run("empty file and empty section", func(t *testing.T) {
		for _, body := range []string{"", "# nothing\n", "kill:\n  # abort_grace: 1s\n"} {
			f := newFixture(t)
			f.writeFile(t, body)
			if _, err := f.load(t, nil, nil); err != nil {
				t.Errorf("body %q: %v", body, err)
			}
		}
	})
	t.Run("malformed yaml", func(t *testing.T) {
		f := newFixture(t)
		path := f.writeFile(t, "web: [\n")
		_, err := f.load(t, nil, nil)
		if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want ErrFile naming %s", err, path)
		}
	})
}

func TestHome(t *testing.T) {
	f := newFixture(t)
	envHome := filepath.Join(f.userHome, "from-env")
	flagHome := filepath.Join(f.userHome, "from-flag")

	c, err := f.load(t, nil, []string{"SHARD_HOME=" + envHome})
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != envHome || c.DBPath() != filepath.Join(envHome, "shard.db") {
		t.Fatalf("Home = %q, DBPath = %q; want under %q", c.Home, c.DBPath(), envHome)
	}
	c, err = f.load(t, []string{"--home", flagHome}, []string{"SHARD_HOME=" + envHome})
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != flagHome {
		t.Fatalf("Home = %q, want the flag's %q", c.Home, flagHome)
	}
	// An empty variable counts as unset.
	c, err = f.load(t, nil, []string{"SHARD_HOME="})
	if err != nil || c.Home != f.home {
		t.Fatalf("SHARD_HOME empty: Home = %q, err = %v; want %q", c.Home, err, f.home)
	}
	if _, err := Load(nil, nil, ""); !errors.Is(err, ErrNoHome) {
		t.Fatalf("no home anywhere: err = %v, want ErrNoHome", err)
	}
}

func TestUnknownEnvIgnored(t *testing.T) {
	f := newFixture(t)
	environ := []string{
		"SHARD_AGENT_ID=agent-01", "SHARD_SESSION_ID=sess-01", "SHARD_SOCKET=/x.sock",
		"SHARD_WEB_PORTT=nonsense", "SHARDWEB_PORT=1", "NOT_SHARD=1", "malformed",
		"SHARD_WEB_PORT=1", "SHARD_WEB_PORT=2", // last wins
	}
	c, err := f.load(t, nil, environ)
	if err != nil {
		t.Fatal(err)
	}
	if c.Web.Port != 2 {
		t.Fatalf("port = %d, want 2 (the last SHARD_WEB_PORT)", c.Web.Port)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"ipv4 loopback range", func(c *Config) { c.Web.Host = "127.1.2.3" }, ""},
		{"ipv6 loopback", func(c *Config) { c.Web.Host = "::1" }, ""},
		{"localhost", func(c *Config) { c.Web.Host = "LocalHost" }, ""},
		{"port zero", func(c *Config) { c.Web.Port = 0 }, ""},
		{"zero graces", func(c *Config) { c.Kill.AbortGrace, c.Kill.TermGrace = 0, 0 }, ""},
		{"https base url", func(c *Config) { c.Provider.BaseURL = "https://api.example.test/v1" }, ""},
		{"relative home", func(c *Config) { c.Home = "rel" }, "home"},
		{"empty home", func(c *Config) { c.Home = "" }, "home"},
		{"bad level", func(c *Config) { c.Log.Level = "INFO" }, "log.level"},
		{"log bound 1 KiB ok", func(c *Config) { c.Log.MaxBytes = 1024 }, ""},
		{"log bound under 1 KiB", func(c *Config) { c.Log.MaxBytes = 1023 }, "log.max_bytes"},
		{"no log backups ok", func(c *Config) { c.Log.Backups = 0 }, ""},
		{"negative log backups", func(c *Config) { c.Log.Backups = -1 }, "log.backups"},
		{"too many log backups", func(c *Config) { c.Log.Backups = 1001 }, "log.backups"},
		{"remote host alone", func(c *Config) { c.Web.Host = "192.168.1.2" }, "web.public_host"},
		{"hostname", func(c *Config) { c.Web.Host = "example.com" }, "web.host"},
		{"port negative", func(c *Config) { c.Web.Port = -1 }, "web.port"},
		{"port too big", func(c *Config) { c.Web.Port = 65536 }, "web.port"},
		{"zero idle", func(c *Config) { c.Runtime.IdleTimeout = 0 }, "runtime.idle_timeout"},
		{"negative start", func(c *Config) { c.Runtime.StartTimeout = -time.Second }, "runtime.start_timeout"},
		{"nice above 19", func(c *Config) { c.Jobs.Nice = 20 }, "jobs.nice"},
		{"negative nice", func(c *Config) { c.Jobs.Nice = -1 }, "jobs.nice"},
		{"negative abort grace", func(c *Config) { c.Kill.AbortGrace = -1 }, "kill.abort_grace"},
		{"negative term grace", func(c *Config) { c.Kill.TermGrace = -1 }, "kill.term_grace"},
		{"zero shutdown", func(c *Config) { c.Shutdown.Timeout = 0 }, "shutdown.timeout"},
		{"zero headless", func(c *Config) { c.Headless.Timeout = 0 }, "headless.timeout"},
		{"bad policy", func(c *Config) { c.Headless.Policy = "allow" }, "headless.policy"},
		{"zero ping", func(c *Config) { c.Gateway.PingInterval = 0 }, "gateway.ping_interval"},
		{"zero ping timeout", func(c *Config) { c.Gateway.PingTimeout = 0 }, "gateway.ping_timeout"},
		{"ticket 30s ok", func(c *Config) { c.Gateway.TicketTTL = 30 * time.Second }, ""},
		{"ticket too long", func(c *Config) { c.Gateway.TicketTTL = 30*time.Second + 1 }, "gateway.ticket_ttl"},
		{"ticket zero", func(c *Config) { c.Gateway.TicketTTL = 0 }, "gateway.ticket_ttl"},
		{"zero bytes cap", func(c *Config) { c.Gateway.OutboundMaxBytes = 0 }, "gateway.outbound_max_bytes"},
		{"zero messages cap", func(c *Config) { c.Gateway.OutboundMaxMessages = 0 }, "gateway.outbound_max_messages"},
		{"zero inbound bytes cap", func(c *Config) { c.Gateway.InboundMaxBytes = 0 }, "gateway.inbound_max_bytes"},
		{"zero inbound records cap", func(c *Config) { c.Gateway.InboundMaxRecords = 0 }, "gateway.inbound_max_records"},
		{"zero connections cap", func(c *Config) { c.Gateway.MaxConnections = 0 }, "gateway.max_connections"},
		{"zero lock timeout", func(c *Config) { c.Store.LockTimeout = 0 }, "store.lock_timeout"},
		{"unknown provider", func(c *Config) { c.Provider.Name = "" }, "provider.name"},
		{"ftp base url", func(c *Config) { c.Provider.BaseURL = "ftp://x" }, "provider.base_url"},
		{"zero context window", func(c *Config) { c.Sim.ContextWindow = 0 }, "sim.context_window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default("/h")
			tt.mutate(c)
			err := c.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ke *KeyError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ke) || ke.Key != tt.key {
				t.Fatalf("Validate = %v, want ErrInvalid for %s", err, tt.key)
			}
			if !strings.HasPrefix(err.Error(), "config: "+tt.key+": ") {
				t.Fatalf("message %q does not lead with the key", err)
			}
		})
	}
}

func TestEveryKeyIsAFlag(t *testing.T) {
	fs := pflag.NewFlagSet("shardd", pflag.ContinueOnError)
	RegisterFlags(fs)

	table := make(map[string]bool)
	for _, s := range settings() {
		table[s.key] = true
	}
	for _, key := range briefKeys {
		if !table[key] {
			t.Errorf("key %s is not in the setting table", key)
		}
		delete(table, key)
		if fs.Lookup(flagName(key)) == nil {
			t.Errorf("key %s has no flag --%s", key, flagName(key))
		}
	}
	for key := range table {
		t.Errorf("setting %s is not in the documented key list", key)
	}
	for alias, key := range map[string]string{"home": "home", "config": "config",
		"web-host": "web.host", "web-port": "web.port", "log-level": "log.level",
		"public-host": "web.public_host", "allowed-origin": "web.allowed_origins",
		"allow-insecure-remote": "web.allow_insecure_remote", "trust-proxy": "web.trust_proxy"} {
		if fs.Lookup(alias) == nil {
			t.Errorf("short flag --%s for %s is missing", alias, key)
		}
	}

	// Flag and env names are unique, and every help line states a default.
	seenEnv := make(map[string]string)
	for _, key := range briefKeys {
		if other, dup := seenEnv[envName(key)]; dup {
			t.Errorf("%s and %s share env %s", key, other, envName(key))
		}
		seenEnv[envName(key)] = key
	}
	if got := envName("kill.abort_grace"); got != "SHARD_KILL_ABORT_GRACE" {
		t.Errorf("envName = %s", got)
	}
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Usage == "" {
			t.Errorf("--%s has no help", fl.Name)
		}
	})
	for _, line := range strings.Split(strings.TrimSpace(fs.FlagUsages()), "\n") {
		if !strings.Contains(line, "default") {
			t.Errorf("help line states no default: %s", line)
		}
	}
}

func TestPaths(t *testing.T) {
	c := Default("/srv/shard")
	tests := []struct{ got, want string }{
		{c.SocketPath(), "/srv/shard/daemon.sock"},
		{c.DBPath(), "/srv/shard/shard.db"},
		{c.DiscoveryPath(), "/srv/shard/daemon.json"},
		{c.LogDir(), "/srv/shard/logs"},
		{c.AgentLogPath("agent-01j"), "/srv/shard/logs/agents/agent-01j.log"},
		{c.SessionsDir(), "/srv/shard/sessions"},
		{c.ConfigFile, "/srv/shard/config.yaml"},
		{c.WebAddr(), "127.0.0.1:7420"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// The log bounds default to 10 MiB and 3 backups and layer like every
// setting: file < SHARD_LOG_* < flags.
func TestLogRotationSettings(t *testing.T) {
	f := newFixture(t)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.MaxBytes != 10<<20 || c.Log.Backups != 3 {
		t.Fatalf("defaults: max_bytes %d backups %d, want 10 MiB and 3", c.Log.MaxBytes, c.Log.Backups)
	}
	f.writeFile(t, "log:\n  max_bytes: 65536\n  backups: 7\n")
	c, err = f.load(t, []string{"--log.backups=2"}, []string{"SHARD_LOG_MAX_BYTES=4096", "SHARD_LOG_BACKUPS=9"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.MaxBytes != 4096 || c.Log.Backups != 2 {
		t.Fatalf("layered: max_bytes %d backups %d, want 4096 (env) and 2 (flag)", c.Log.MaxBytes, c.Log.Backups)
	}
	if _, err := f.load(t, nil, []string{"SHARD_LOG_MAX_BYTES=512"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "log.max_bytes") {
		t.Fatalf("max_bytes 512: err = %v, want an invalid log.max_bytes", err)
	}
}

// TestAgentCraftListen: agentcraft.listen must be loopback unless
// agentcraft.allow_non_loopback.
func TestAgentCraftListen(t *testing.T) {
	for _, tc := range []struct {
		listen string
		allow  bool
		ok     bool
	}{
		{"127.0.0.1:7878", false, true},
		{"localhost:0", false, true},
		{"[::1]:7878", false, true},
		{"0.0.0.0:7878", false, false},
		{"192.168.1.2:7878", false, false},
		{"0.0.0.0:7878", true, true},
		{"no-port", true, false},
	} {
		c := Default("/h")
		c.AgentCraft.Listen, c.AgentCraft.AllowNonLoopback = tc.listen, tc.allow
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("listen %q allow %v: %v", tc.listen, tc.allow, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("listen %q: %v, want ErrInvalid", tc.listen, err)
		}
	}
}
