package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// writeSeed makes a user nkey and writes its seed to a new file (0600),
// as `nk -gen user` would; it returns the file.
func writeSeed(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.nk")
	if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNKeyClientAuth: embedded nodes given the cluster's nkey seed form
// a cluster (routes by the token, their own connections by the nkey);
// the client port refuses a client without the key, with the token
// only, or with another key, and takes one signing with the key: a node
// joining through it in URL mode becomes a member.
func TestNKeyClientAuth(t *testing.T) {
	t.Parallel()
	seed := writeSeed(t)
	h := newHarness(t, 3)
	h.modify = func(i int, c *Config) {
		c.NKeySeedFile = seed
		if i == 0 {
			c.ClientListen = "127.0.0.1:-1"
		}
	}
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}
	url := h.node(0).ClientURL()
	if url == "" {
		t.Fatal("n1 has no client URL")
	}
	otherKey, err := nats.NkeyOptionFromSeed(writeSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]nats.Option{
		"no credentials": nil,
		"the token only": {nats.Token(h.token)},
		"another nkey":   {otherKey},
	} {
		nc, err := nats.Connect(url, append(opts, nats.NoReconnect())...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected to the client port", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: err = %v, want an authorization violation", name, err)
		}
	}
	key, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, key, nats.NoReconnect())
	if err != nil {
		t.Fatalf("with the cluster's nkey: %v", err)
	}
	nc.Close()

	ext, err := Start(context.Background(), Config{Node: "ext", URL: url, NKeySeedFile: seed, Lease: testLease, ReadyTimeout: waitLimit}, testLogger(t, "ext"))
	if err != nil {
		t.Fatalf("URL mode with the nkey: %v", err)
	}
	defer ext.Close()
	waitFor(t, h.node(1), "ext alive", allAlive("n1", "n2", "n3", "ext"))
}

// TestNKeySeedFileRefused: a seed file that is missing or holds no user
// seed fails Start naming the setting, without quoting the file.
func TestNKeySeedFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.nk")
	if err := os.WriteFile(bad, []byte("not-a-seed-hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing.nk")} {
		cfg := Config{Node: "n1", Listen: "127.0.0.1:-1", Routes: []string{"nats://127.0.0.1:1"}, StoreDir: t.TempDir(), NKeySeedFile: path}
		n, err := Start(context.Background(), cfg, nil)
		if err == nil {
			n.Close()
			t.Fatalf("%s: started", path)
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "cluster.nkey_seed_file") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: err = %v", path, err)
		}
	}
}
