package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestRemoteModeTable walks the startup table of web.go through Load, with
// flags as an operator types them: every safe combination starts, every
// unsafe or incomplete one is refused with a message naming the key and the
// flag to set or drop.
func TestRemoteModeTable(t *testing.T) {
	const (
		pub      = "--public-host=shard.example.test"
		origin   = "--allowed-origin=https://shard.example.test"
		insecure = "--allow-insecure-remote"
	)
	tests := []struct {
		name string
		args []string
		key  string // "" means it starts
		msg  string // a substring of the refusal
	}{
		// Loopback mode.
		{name: "loopback default", args: nil},
		{name: "loopback ipv6", args: []string{"--web-host=::1"}},
		{name: "loopback localhost", args: []string{"--web-host=localhost"}},
		{name: "loopback with public host", args: []string{pub},
			key: "web.public_host", msg: "drop --public-host, or set --trust-proxy or a non-loopback --web-host"},
		{name: "loopback with origin", args: []string{origin},
			key: "web.allowed_origins", msg: "drop --allowed-origin"},
		{name: "loopback with insecure", args: []string{insecure},
			key: "web.allow_insecure_remote", msg: "drop it"},

		// Direct non-loopback.
		{name: "direct complete", args: []string{"--web-host=10.1.2.3", "--public-host=10.1.2.3:7420",
			"--allowed-origin=http://10.1.2.3:7420", insecure}},
		{name: "direct all interfaces", args: []string{"--web-host=0.0.0.0", "--public-host=shard.lan:7420",
			"--allowed-origin=http://shard.lan:7420", insecure}},
		{name: "direct alone", args: []string{"--web-host=10.1.2.3"},
			key: "web.public_host", msg: "set --public-host <host:port>"},
		{name: "direct without origin", args: []string{"--web-host=10.1.2.3", "--public-host=10.1.2.3:7420"},
			key: "web.allowed_origins", msg: "set --allowed-origin <origin>"},
		{name: "direct without insecure", args: []string{"--web-host=10.1.2.3", "--public-host=10.1.2.3:7420",
			"--allowed-origin=http://10.1.2.3:7420"},
			key: "web.allow_insecure_remote", msg: "set --allow-insecure-remote"},
		{name: "direct https origin without insecure", args: []string{"--web-host=10.1.2.3", "--public-host=10.1.2.3:7420",
			"--allowed-origin=https://10.1.2.3:7420"},
			key: "web.allow_insecure_remote", msg: "serves plaintext HTTP to the network"},
		{name: "direct origin off the public host", args: []string{"--web-host=10.1.2.3", "--public-host=10.1.2.3:7420",
			"--allowed-origin=http://10.1.2.3:7421", insecure},
			key: "web.allowed_origins", msg: "add --allowed-origin http://10.1.2.3:7420"},
		{name: "direct public host with a scheme", args: []string{"--web-host=10.1.2.3", "--public-host=http://10.1.2.3",
			"--allowed-origin=http://10.1.2.3", insecure},
			key: "web.public_host", msg: "is not a host[:port]"},
		{name: "direct host name bind", args: []string{"--web-host=shard.lan"},
			key: "web.host", msg: "is not an IP address or localhost"},

		// Trusted reverse proxy.
		{name: "proxy loopback https", args: []string{"--trust-proxy=loopback", pub, origin}},
		{name: "proxy ip", args: []string{"--web-host=10.1.2.3", "--trust-proxy=10.1.2.4", pub, origin}},
		{name: "proxy on another loopback address", args: []string{"--trust-proxy=127.0.0.2", pub, origin}},
		{name: "proxy explicit port", args: []string{"--trust-proxy=loopback", "--public-host=shard.example.test:8443",
			"--allowed-origin=https://shard.example.test:8443"}},
		{name: "proxy default port spelled out", args: []string{"--trust-proxy=loopback", "--public-host=shard.example.test:443", origin}},
		{name: "proxy plaintext with insecure", args: []string{"--trust-proxy=loopback", pub,
			"--allowed-origin=http://shard.example.test", insecure}},
		{name: "proxy alone", args: []string{"--trust-proxy=loopback"},
			key: "web.public_host", msg: "remote mode (--trust-proxy loopback is set) needs the pinned public host: set --public-host <host:port>"},
		{name: "proxy without origin", args: []string{"--trust-proxy=loopback", pub},
			key: "web.allowed_origins", msg: "set --allowed-origin <origin> (repeatable)"},
		{name: "proxy plaintext origin without insecure", args: []string{"--trust-proxy=loopback", pub, origin,
			"--allowed-origin=http://shard.example.test"},
			key: "web.allow_insecure_remote", msg: "allowed origin http://shard.example.test is plaintext: set --allow-insecure-remote"},
		{name: "proxy origin on another host only", args: []string{"--trust-proxy=loopback", pub,
			"--allowed-origin=https://other.example.test"},
			key: "web.allowed_origins", msg: "add --allowed-origin https://shard.example.test"},
		{name: "proxy remote upstream on loopback bind", args: []string{"--trust-proxy=10.1.2.4", pub, origin},
			key: "web.trust_proxy", msg: "can never reach the loopback web.host"},
		{name: "proxy range", args: []string{"--trust-proxy=10.0.0.0/8", pub, origin},
			key: "web.trust_proxy", msg: "neither"},
		{name: "proxy name", args: []string{"--trust-proxy=proxy.lan", pub, origin},
			key: "web.trust_proxy", msg: "neither"},
		{name: "proxy unspecified", args: []string{"--trust-proxy=0.0.0.0", pub, origin},
			key: "web.trust_proxy", msg: "neither"},
		{name: "proxy wildcard origin", args: []string{"--trust-proxy=loopback", pub, "--allowed-origin=*"},
			key: "web.allowed_origins", msg: "is not an exact origin"},
		{name: "proxy null origin", args: []string{"--trust-proxy=loopback", pub, "--allowed-origin=null"},
			key: "web.allowed_origins", msg: "is not an exact origin"},
		{name: "proxy origin trailing slash", args: []string{"--trust-proxy=loopback", pub, "--allowed-origin=https://shard.example.test/"},
			key: "web.allowed_origins", msg: "is not an exact origin"},
		{name: "proxy origin default port", args: []string{"--trust-proxy=loopback", pub, "--allowed-origin=https://shard.example.test:443"},
			key: "web.allowed_origins", msg: `want "https://shard.example.test"`},
		{name: "proxy public host upper case", args: []string{"--trust-proxy=loopback", "--public-host=Shard.example.test", origin},
			key: "web.public_host", msg: `write "shard.example.test"`},
		{name: "proxy public host trailing dot", args: []string{"--trust-proxy=loopback", "--public-host=shard.example.test.", origin},
			key: "web.public_host", msg: "trailing dot"},
		{name: "forwarded header is X-Forwarded-For", args: []string{"--web.forwarded-host-header=X-Forwarded-For"},
			key: "web.forwarded_host_header", msg: "cannot be used for forwarding"},
		{name: "forwarded headers equal", args: []string{"--web.forwarded-host-header=x-forwarded-proto"},
			key: "web.forwarded_host_header", msg: "must differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c, err := f.load(t, tt.args, nil)
			if tt.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if err := c.Validate(); err != nil {
					t.Fatalf("Validate of the loaded config: %v", err)
				}
				return
			}
			var ke *KeyError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ke) || ke.Key != tt.key {
				t.Fatalf("err = %v, want ErrInvalid for %s", err, tt.key)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %q, want it to say %q", err, tt.msg)
			}
		})
	}
}

func TestRemoteFlagsAreReported(t *testing.T) {
	f := newFixture(t)
	c, err := f.load(t, []string{"--trust-proxy=loopback", "--public-host=shard.example.test"}, nil)
	if err == nil || c != nil {
		t.Fatal("an incomplete remote configuration was accepted")
	}
	// The remote flags are in --help with their defaults.
	if !strings.Contains(helpText(), "--allowed-origin strings") {
		t.Errorf("--allowed-origin is not a repeatable flag in the help:\n%s", helpText())
	}
}

// TestAllowedOriginsForms reads the list from each layer in its natural
// form: a repeated flag, a comma-separated flag or variable, a YAML list.
func TestAllowedOriginsForms(t *testing.T) {
	want := []string{"https://shard.example.test", "https://other.example.test:8443"}
	base := []string{"--trust-proxy=loopback", "--public-host=shard.example.test"}
	tests := []struct {
		name    string
		file    string
		environ []string
		args    []string
	}{
		{name: "repeated flag", args: append(base, "--allowed-origin="+want[0], "--allowed-origin="+want[1])},
		{name: "comma flag", args: append(base, "--allowed-origin="+want[0]+","+want[1])},
		{name: "long flag", args: append(base, "--web.allowed-origins="+want[0], "--web.allowed-origins="+want[1])},
		{name: "env", args: base, environ: []string{"SHARD_WEB_ALLOWED_ORIGINS=" + want[0] + ", " + want[1]}},
		{name: "yaml list", args: base, file: "web:\n  allowed_origins:\n    - " + want[0] + "\n    - " + want[1] + "\n"},
		{name: "yaml string", args: base, file: "web:\n  allowed_origins: " + want[0] + "," + want[1] + "\n"},
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
			if !reflect.DeepEqual(c.Web.AllowedOrigins, want) {
				t.Fatalf("allowed origins = %q, want %q", c.Web.AllowedOrigins, want)
			}
			if !c.Web.Remote() {
				t.Fatal("Remote() = false with --trust-proxy")
			}
		})
	}
	t.Run("yaml list of non-strings", func(t *testing.T) {
		f := newFixture(t)
		f.writeFile(t, "web:\n  allowed_origins:\n    - 5\n")
		if _, err := f.load(t, base, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "web.allowed_origins") {
			t.Fatalf("err = %v, want ErrInvalid for web.allowed_origins", err)
		}
	})
}

// helpText is the flag help of shardd's settings.
func helpText() string {
	fs := pflag.NewFlagSet("shardd", pflag.ContinueOnError)
	RegisterFlags(fs)
	return fs.FlagUsages()
}

func TestParsePrices(t *testing.T) {
	got, err := ParsePrices(" gpt-4.1=2/8 ; claude=3/15/0.3/3.75;")
	if err != nil || got["gpt-4.1"] != [4]float64{2, 8, 0, 0} || got["claude"] != [4]float64{3, 15, 0.3, 3.75} || len(got) != 2 {
		t.Fatalf("ParsePrices = %v, %v", got, err)
	}
	for _, bad := range []string{"gpt", "=1/2", "m=1", "m=1/2/3", "m=a/2", "m=-1/2"} {
		if _, err := ParsePrices(bad); err == nil {
			t.Errorf("ParsePrices(%q) accepted", bad)
		}
	}
}
