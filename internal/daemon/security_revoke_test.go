package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// TestRevokedTokenClosesOpenConnection: revocation takes effect on
// connections already open, with a policy-violation close.
func TestRevokedTokenClosesOpenConnection(t *testing.T) {
	f := newSecFixture(t, nil)
	tok := f.token(t)
	ws, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var list protocol.TokenListData
	if err := f.unix.Call(ctx(t), &protocol.TokenList{Header: protocol.Header{Type: protocol.TypeTokenList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tokens) != 1 || list.Tokens[0].Connections != 1 || list.Tokens[0].LastUsedAt == 0 {
		t.Fatalf("token.list = %+v, want one used token with one connection", list.Tokens)
	}
	if got := f.revokeToken(t, tok.TokenID); got.ClosedConnections != 1 || got.RevokedAt == 0 {
		t.Fatalf("token.revoke = %+v, want one closed connection", got)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for range ws.Events() {
		}
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection opened with a revoked token is still open")
	}
	if code := websocket.CloseStatus(ws.Err()); code != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v (%v), want policy violation", code, ws.Err())
	}
	if _, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), tok.Token); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("dial with the revoked token: %v, want HTTP 401", err)
	}
	// Revoking again is harmless; an unknown id is NOT_FOUND.
	f.revokeToken(t, tok.TokenID)
	err = f.unix.Call(ctx(t), &protocol.TokenRevoke{Header: protocol.Header{Type: protocol.TypeTokenRevoke}, TokenID: "tok-unknown"}, nil)
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("revoke unknown: %v, want NOT_FOUND", err)
	}
}

// TestRevokedSessionClosesBrowserConnection: the same for a browser
// session, through a real WebSocket client sending Origin like a browser.
func TestRevokedSessionClosesBrowserConnection(t *testing.T) {
	f := newSecFixture(t, nil)
	_, cookie := f.enroll(t)
	ticket := f.bootstrap(t, cookie, f.origin)
	c, _, err := websocket.Dial(ctx(t), wsURL(f.h), &websocket.DialOptions{
		Subprotocols: []string{"shard.v1", "ticket." + ticket},
		HTTPHeader:   http.Header{"Origin": []string{f.origin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx(t)); err != nil { // hello
		t.Fatal(err)
	}
	var list protocol.WebSessionsListData
	if err := f.unix.Call(ctx(t), &protocol.WebSessionsList{Header: protocol.Header{Type: protocol.TypeWebSessionsList}}, &list); err != nil {
		t.Fatal(err)
	}
	// The note is the one given to web.enroll; the user agent is the
	// browser's at enrollment.
	if len(list.Sessions) != 1 || list.Sessions[0].Connections != 1 || list.Sessions[0].Note != "test" || list.Sessions[0].Secure ||
		list.Sessions[0].UserAgent != testUserAgent {
		t.Fatalf("web.sessions.list = %+v", list.Sessions)
	}
	var rev protocol.WebSessionsRevokeData
	if err := f.unix.Call(ctx(t), &protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke},
		SessionID: list.Sessions[0].SessionID}, &rev); err != nil {
		t.Fatal(err)
	}
	if rev.ClosedConnections != 1 {
		t.Fatalf("revoke = %+v, want one closed connection", rev)
	}
	for {
		if _, _, err = c.Read(ctx(t)); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("read after revoke: %v, want a policy-violation close", err)
	}
}

// TestSecurityCommandsAreLocalOnly: a WebSocket client, even an
// authenticated one, cannot enroll browsers or manage tokens.
func TestSecurityCommandsAreLocalOnly(t *testing.T) {
	f := newSecFixture(t, nil)
	ws, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), f.token(t).Token)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, cmd := range []protocol.Typed{
		&protocol.WebEnroll{Header: protocol.Header{Type: protocol.TypeWebEnroll}},
		&protocol.WebSessionsList{Header: protocol.Header{Type: protocol.TypeWebSessionsList}},
		&protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke}, All: true},
		&protocol.TokenCreate{Header: protocol.Header{Type: protocol.TypeTokenCreate}, Note: "x"},
		&protocol.TokenList{Header: protocol.Header{Type: protocol.TypeTokenList}},
		&protocol.TokenRevoke{Header: protocol.Header{Type: protocol.TypeTokenRevoke}, TokenID: "tok-x"},
	} {
		if _, err := ws.Request(ctx(t), cmd); protocol.CodeOf(err) != protocol.CodePermissionDenied {
			t.Errorf("%s over WebSocket: %v, want PERMISSION_DENIED", cmd.Head().Type, err)
		}
	}
}

// TestNoSecretPersistedOrLogged plants one of every secret — an
// enrollment code, a session cookie, a browser ticket, a ws.ticket ticket
// and an API token — uses each (and misuses some, so that refusals are
// logged too), then scans the database file, every file under the home and
// the debug-level log for any of them.
func TestNoSecretPersistedOrLogged(t *testing.T) {
	f := newSecFixture(t, nil)
	code := f.enrollCode(t)
	r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
	r.body = enrollBody(code.Code)
	resp := f.rotate(r).do(t, f.addr)
	if resp.status != http.StatusOK {
		t.Fatalf("enroll: %d", resp.status)
	}
	cookie, _, _ := strings.Cut(resp.header.Get("Set-Cookie"), ";")
	_, cookieValue, _ := strings.Cut(cookie, "=")
	ticket := f.bootstrap(t, cookie, f.origin)
	if got := f.rotate(f.upgrade(f.origin, ticket)).do(t, f.addr).status; got != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", got)
	}
	local := f.localTicket(t)
	tok := f.token(t)
	ws, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close()
	// Misuse: replays, a wrong origin, a revoked token.
	for _, r := range []rawReq{
		f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json"),
		f.upgrade(f.origin, ticket),
		f.upgrade(f.origin, local),
		f.upgrade("", "").with("Authorization", "Bearer "+tok.Token+"x"),
	} {
		if r.path == "/enroll" {
			r.body = enrollBody(code.Code)
		}
		f.rotate(r).do(t, f.addr)
	}
	f.revokeToken(t, tok.TokenID)
	f.rotate(f.upgrade("", "").with("Authorization", "Bearer "+tok.Token)).do(t, f.addr)

	f.h.d.Shutdown(false)
	secrets := map[string]string{
		"enrollment code": code.Code,
		"session cookie":  secretPart(cookieValue),
		"browser ticket":  ticket,
		"local ticket":    local,
		"api token":       secretPart(tok.Token),
	}
	files := filesUnder(t, f.h.cfg.Home)
	if _, ok := files[f.h.cfg.DBPath()]; !ok {
		t.Fatalf("no database among %d files", len(files))
	}
	// The file really is what was written: it holds the cookie's hash.
	sum := sha256.Sum256([]byte(cookieValue))
	if !strings.Contains(string(files[f.h.cfg.DBPath()]), hex.EncodeToString(sum[:])) {
		t.Fatal("the database does not hold the session's hash; the scan would prove nothing")
	}
	files["daemon log"] = []byte(f.h.log.String())
	for what, secret := range secrets {
		if len(secret) < 40 {
			t.Fatalf("%s %q is not a full secret", what, secret)
		}
		for path, content := range files {
			if strings.Contains(string(content), secret) {
				t.Errorf("%s contains the %s", path, what)
			}
		}
	}
}

// secretPart is the random part of an "<id>.<secret>" credential: the id
// may be logged, the secret never.
func secretPart(v string) string {
	_, s, _ := strings.Cut(v, ".")
	return s
}

// filesUnder reads every regular file under dir (sockets are skipped).
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHomeMustBeOwnerOnly: a home, database or config file that others
// can write is refused at startup; one others can only read is tightened.
func TestHomeMustBeOwnerOnly(t *testing.T) {
	newHome := func(t *testing.T) *config.Config {
		cfg := newConfig(t)
		if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	refused := func(t *testing.T, cfg *config.Config, what string) {
		t.Helper()
		d, err := daemon.New(cfg, daemon.Options{})
		if err == nil {
			d.Shutdown(true)
			t.Fatalf("started with a %s", what)
		}
		if !errors.Is(err, daemon.ErrNotPrivate) || !strings.Contains(err.Error(), "chmod") {
			t.Fatalf("%s: err = %v, want ErrNotPrivate with a chmod hint", what, err)
		}
	}
	t.Run("group-writable home", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.Chmod(cfg.Home, 0o770); err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, "group-writable home")
	})
	t.Run("world-writable database", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.WriteFile(cfg.DBPath(), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfg.DBPath(), 0o666); err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, "world-writable database")
	})
	t.Run("group-writable config", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.WriteFile(cfg.ConfigFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfg.ConfigFile, 0o620); err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, "group-writable config")
	})
	t.Run("readable home is tightened", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.Chmod(cfg.Home, 0o755); err != nil {
			t.Fatal(err)
		}
		h := startWith(t, cfg)
		for path, want := range map[string]fs.FileMode{cfg.Home: 0o700, cfg.DBPath(): 0o600, cfg.SocketPath(): 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s has mode %04o, want %04o", path, got, want)
			}
		}
		_ = h
	})
}

// TestShardDRefusesUnsafeRemoteFlags runs the real binary: an incomplete
// remote configuration stops it before it listens, naming the flag.
func TestShardDRefusesUnsafeRemoteFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--web-host=0.0.0.0"}, "--public-host"},
		{[]string{"--web-host=0.0.0.0", "--public-host=shard.lan:7420"}, "--allowed-origin"},
		{[]string{"--web-host=0.0.0.0", "--public-host=shard.lan:7420", "--allowed-origin=http://shard.lan:7420"}, "--allow-insecure-remote"},
		{[]string{"--trust-proxy=loopback", "--public-host=shard.example.test"}, "--allowed-origin"},
	} {
		home := filepath.Join(shortTemp(t), "home")
		cmd := exec.Command(runtimeBin, append([]string{"--home=" + home, "--web-port=0"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("shardd %q started", tc.args)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("shardd %q: %s\nwant it to name %s", tc.args, out, tc.want)
		}
	}
}

// TestExpiredSessionClosesBrowserConnection: a session that expires while
// its connection is open loses the connection at the next keepalive.
func TestExpiredSessionClosesBrowserConnection(t *testing.T) {
	f := newSecFixture(t, func(c *config.Config) {
		c.Web.SessionTTL = 1500 * time.Millisecond
		c.Gateway.PingInterval = 100 * time.Millisecond
	})
	_, cookie := f.enroll(t)
	ticket := f.bootstrap(t, cookie, f.origin)
	c, _, err := websocket.Dial(ctx(t), wsURL(f.h), &websocket.DialOptions{
		Subprotocols: []string{"shard.v1", "ticket." + ticket},
		HTTPHeader:   http.Header{"Origin": []string{f.origin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	opened := time.Now()
	for {
		if _, _, err = c.Read(ctx(t)); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("read: %v, want a policy-violation close", err)
	}
	if time.Since(opened) > 5*time.Second {
		t.Fatalf("closed only after %s", time.Since(opened))
	}
}
