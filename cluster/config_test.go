package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate: each refused configuration names its setting and
// wraps the right sentinel; the secure ones pass.
func TestValidate(t *testing.T) {
	base := func() Config {
		return Config{Node: "n1", Listen: "127.0.0.1:6250", Routes: []string{"nats://127.0.0.1:6251"}, StoreDir: "/tmp/x"}
	}
	tls := func(c Config) Config { c.TLSCert, c.TLSKey = "cert.pem", "key.pem"; return c }
	tok := func(c Config) Config { c.Token = "secret-token"; return c }
	cases := []struct {
		name    string
		mod     func(Config) Config
		wantErr error  // nil: valid
		inMsg   string // a part of the message
	}{
		{"loopback without token or TLS", func(c Config) Config { return c }, nil, ""},
		{"localhost", func(c Config) Config { c.Listen = "localhost:-1"; return c }, nil, ""},
		{"ipv6 loopback", func(c Config) Config { c.Listen = "[::1]:0"; return c }, nil, ""},
		{"non-loopback listen without token", func(c Config) Config { c.Listen = "10.0.0.5:6250"; return c }, ErrInsecure, "cluster.listen 10.0.0.5 is not loopback and cluster.token is empty"},
		{"all interfaces without token", func(c Config) Config { c.Listen = ":6250"; return c }, ErrInsecure, "(all interfaces)"},
		{"0.0.0.0 with token, without TLS", func(c Config) Config { c.Listen = "0.0.0.0:6250"; return tok(c) }, ErrInsecure, "cluster.tls_cert/cluster.tls_key are empty"},
		{"non-loopback listen with token and TLS", func(c Config) Config { c.Listen = "10.0.0.5:6250"; return tls(tok(c)) }, nil, ""},
		{"non-loopback route without token", func(c Config) Config { c.Routes = []string{"nats://10.0.0.6:6250"}; return c }, ErrInsecure, "cluster.routes"},
		{"non-loopback route without TLS", func(c Config) Config { c.Routes = []string{"nats://n2.example:6250"}; return tok(c) }, ErrInsecure, "cluster.tls_cert"},
		{"non-loopback client listen without token", func(c Config) Config { c.ClientListen = "192.168.1.2:4222"; return c }, ErrInsecure, "cluster.client_listen"},
		{"non-loopback advertise without TLS", func(c Config) Config { c.Advertise = "203.0.113.7:6250"; return tok(c) }, ErrInsecure, "cluster.advertise"},
		{"empty node", func(c Config) Config { c.Node = ""; return c }, ErrInvalidConfig, "cluster.node"},
		{"node with a dot", func(c Config) Config { c.Node = "n.1"; return c }, ErrInvalidConfig, "cluster.node \"n.1\""},
		{"node with a space", func(c Config) Config { c.Node = "n 1"; return c }, ErrInvalidConfig, "cluster.node"},
		{"node too long", func(c Config) Config { c.Node = strings.Repeat("n", 65); return c }, ErrInvalidConfig, "cluster.node"},
		{"no listen", func(c Config) Config { c.Listen = ""; return c }, ErrInvalidConfig, "cluster.listen: required"},
		{"bad port", func(c Config) Config { c.Listen = "127.0.0.1:70000"; return c }, ErrInvalidConfig, "cluster.listen"},
		{"route not nats", func(c Config) Config { c.Routes = []string{"http://127.0.0.1:1"}; return c }, ErrInvalidConfig, "cluster.routes"},
		{"route token not echoed", func(c Config) Config { c.Routes = []string{"ftp://u:hunter2@127.0.0.1:1"}; return c }, ErrInvalidConfig, "ftp://127.0.0.1:1"},
		{"no routes", func(c Config) Config { c.Routes = nil; return c }, ErrInvalidConfig, "cluster.routes: a cluster node needs the routes of at least one other node"},
		{"a route to itself only", func(c Config) Config { c.Routes = []string{"nats://127.0.0.1:6250"}; return c }, ErrInvalidConfig, "needs the routes of at least one other node"},
		{"a route to itself and another", func(c Config) Config {
			c.Routes = []string{"nats://127.0.0.1:6250", "nats://127.0.0.1:6251"}
			return c
		}, nil, ""},
		{"no store", func(c Config) Config { c.StoreDir = ""; return c }, ErrInvalidConfig, "cluster.store_dir"},
		{"replicas", func(c Config) Config { c.Replicas = 7; return c }, ErrInvalidConfig, "cluster.replicas 7"},
		{"lease", func(c Config) Config { c.Lease = 1; return c }, ErrInvalidConfig, "cluster.lease"},
		{"cert without key", func(c Config) Config { c.TLSCert = "c.pem"; return c }, ErrInvalidConfig, "go together"},
		{"url mode", func(c Config) Config {
			return Config{Node: "n1", URL: "nats://127.0.0.1:4222"}
		}, nil, ""},
		{"url mode with listen", func(c Config) Config { c.URL = "nats://127.0.0.1:4222"; c.StoreDir = ""; return c }, ErrInvalidConfig, "cluster.url excludes"},
		{"url non-loopback without auth", func(c Config) Config {
			return Config{Node: "n1", URL: "tls://nats.example:4222"}
		}, ErrInsecure, "cluster.url"},
		{"url non-loopback without TLS", func(c Config) Config {
			return Config{Node: "n1", URL: "nats://nats.example:4222", Token: "t"}
		}, ErrInsecure, "not tls://"},
		{"url non-loopback with nkey and TLS", func(c Config) Config {
			return Config{Node: "n1", URL: "tls://nats.example:4222", NKeySeedFile: "seed.nk"}
		}, nil, ""},
		{"nkey embedded", func(c Config) Config { c.NKeySeedFile = "seed.nk"; return c }, nil, ""},
		{"non-loopback client listen with nkey and TLS", func(c Config) Config {
			c.ClientListen, c.NKeySeedFile = "192.168.1.2:4222", "seed.nk"
			return tls(c)
		}, nil, ""},
		{"non-loopback client listen with nkey, without TLS", func(c Config) Config {
			c.ClientListen, c.NKeySeedFile = "192.168.1.2:4222", "seed.nk"
			return c
		}, ErrInsecure, "cluster.client_listen 192.168.1.2 is not loopback and cluster.tls_cert"},
		{"non-loopback listen with nkey, without token", func(c Config) Config {
			c.Listen, c.NKeySeedFile = "10.0.0.5:6250", "seed.nk"
			return tls(c)
		}, ErrInsecure, "cluster.listen 10.0.0.5 is not loopback and cluster.token is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.mod(base()).WithDefaults().Validate()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Validate = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.inMsg) {
				t.Errorf("Validate = %q, want it to say %q", err, tc.inMsg)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret-token") {
				t.Errorf("Validate = %q: leaks a secret", err)
			}
		})
	}
}

// TestStartRefusesInsecure: Start validates before it binds anything: a
// node on a non-loopback address without a token does not start.
func TestStartRefusesInsecure(t *testing.T) {
	cfg := Config{Node: "n1", Listen: "0.0.0.0:-1", StoreDir: t.TempDir()}
	n, err := Start(context.Background(), cfg, nil)
	if err == nil {
		n.Close()
		t.Fatal("started on all interfaces without a token")
	}
	if !errors.Is(err, ErrInsecure) {
		t.Fatalf("err = %v, want ErrInsecure", err)
	}
	cfg.Token = "secret-token"
	if _, err := Start(context.Background(), cfg, nil); !errors.Is(err, ErrInsecure) {
		t.Fatalf("without TLS: err = %v, want ErrInsecure", err)
	}
}

// TestStartRefusesNodeWithoutRoutes: an embedded node with no route to
// another node cannot form a JetStream cluster (NATS needs routes; a
// route to itself leaves a meta group that never elects a leader):
// Start says so at once, naming cluster.routes, instead of failing
// after its ready timeout; its store is never made.
func TestStartRefusesNodeWithoutRoutes(t *testing.T) {
	store := filepath.Join(t.TempDir(), "jetstream")
	for _, routes := range [][]string{nil, {"nats://127.0.0.1:6250"}} {
		cfg := Config{Node: "n1", Listen: "127.0.0.1:6250", Routes: routes, StoreDir: store, ReadyTimeout: waitLimit}
		n, err := Start(context.Background(), cfg, nil)
		if err == nil {
			n.Close()
			t.Fatalf("routes %q: a node without another node started", routes)
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "cluster.routes: a cluster node needs the routes of at least one other node") {
			t.Fatalf("routes %q: err = %v, want ErrInvalidConfig naming cluster.routes", routes, err)
		}
		if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused node made its store: %v", err)
		}
	}
}

// TestDefaults: the store goes under the home, three replicas.
func TestDefaults(t *testing.T) {
	c := Config{Node: "n1", Home: "/home/shard"}.WithDefaults()
	if c.StoreDir != "/home/shard/cluster/jetstream" || c.Replicas != 3 || c.Lease != DefaultLease || c.ClusterName != "shard" {
		t.Errorf("defaults = %+v", c)
	}
}

// TestBucketReplicas: three copies when the routes name three servers
// or more, else as many as there are.
func TestBucketReplicas(t *testing.T) {
	cfg := Config{Listen: "127.0.0.1:6250", Replicas: 3}
	for _, tc := range []struct {
		routes []string
		want   int
	}{
		{nil, 1},
		{[]string{"nats://127.0.0.1:6251"}, 2},
		{[]string{"nats://127.0.0.1:6250", "nats://127.0.0.1:6251"}, 2},
		{[]string{"nats://127.0.0.1:6251", "nats://127.0.0.1:6252"}, 3},
		{[]string{"nats://127.0.0.1:6251", "nats://127.0.0.1:6252", "nats://127.0.0.1:6253"}, 3},
	} {
		cfg.Routes = tc.routes
		if got := bucketReplicas(cfg, nil); got != tc.want {
			t.Errorf("routes %v: replicas %d, want %d", tc.routes, got, tc.want)
		}
	}
}
