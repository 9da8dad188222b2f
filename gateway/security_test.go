package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// memCredentials is an in-memory Credentials that counts the writes of
// last uses. The daemon's store adapter is tested against bbolt in
// internal/daemon; this one lets the gateway's own rules be checked alone.
type memCredentials struct {
	// mu protects the following.
	mu         sync.Mutex
	principals []Principal
	browsers   []Browser
	sessions   map[string]WebSession
	tokens     map[string]APICredential
	touches    int
}

var _ Credentials = (*memCredentials)(nil)

func newMemCredentials() *memCredentials {
	return &memCredentials{sessions: make(map[string]WebSession), tokens: make(map[string]APICredential)}
}

func (m *memCredentials) touched() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.touches
}

func (m *memCredentials) EnsurePrincipal(p Principal) (Principal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range m.principals {
		if q.Name == p.Name {
			return q, nil
		}
	}
	m.principals = append(m.principals, p)
	return p, nil
}

func (m *memCredentials) Enroll(b Browser, ws WebSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.browsers = append(m.browsers, b)
	m.sessions[ws.ID] = ws
	return nil
}

func (m *memCredentials) ListBrowsers() ([]Browser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.browsers), nil
}

func (m *memCredentials) GetWebSession(id string) (WebSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws, ok := m.sessions[id]
	if !ok {
		return WebSession{}, fmt.Errorf("%w: web session %q", ErrNotFound, id)
	}
	return ws, nil
}

func (m *memCredentials) ListWebSessions() ([]WebSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []WebSession
	for _, ws := range m.sessions {
		out = append(out, ws)
	}
	return out, nil
}

func (m *memCredentials) TouchWebSession(id string, at int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws, ok := m.sessions[id]
	if !ok {
		return fmt.Errorf("%w: web session %q", ErrNotFound, id)
	}
	ws.LastUsedAt = at
	m.sessions[id] = ws
	m.touches++
	return nil
}

func (m *memCredentials) DeleteWebSession(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[id]; !ok {
		return fmt.Errorf("%w: web session %q", ErrNotFound, id)
	}
	delete(m.sessions, id)
	return nil
}

func (m *memCredentials) DeleteWebSessions(drop func(WebSession) bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, ws := range m.sessions {
		if drop == nil || drop(ws) {
			delete(m.sessions, id)
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (m *memCredentials) CreateAPICredential(c APICredential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[c.ID] = c
	return nil
}

func (m *memCredentials) GetAPICredential(id string) (APICredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.tokens[id]
	if !ok {
		return APICredential{}, fmt.Errorf("%w: api credential %q", ErrNotFound, id)
	}
	return c, nil
}

func (m *memCredentials) ListAPICredentials() ([]APICredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []APICredential
	for _, c := range m.tokens {
		out = append(out, c)
	}
	return out, nil
}

func (m *memCredentials) TouchAPICredential(id string, at int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.tokens[id]
	if !ok {
		return fmt.Errorf("%w: api credential %q", ErrNotFound, id)
	}
	if !c.Revoked() {
		c.LastUsedAt = at
		m.tokens[id] = c
		m.touches++
	}
	return nil
}

func (m *memCredentials) RevokeAPICredential(id string, at int64) (APICredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.tokens[id]
	if !ok {
		return APICredential{}, fmt.Errorf("%w: api credential %q", ErrNotFound, id)
	}
	if !c.Revoked() {
		c.RevokedAt, c.SecretSHA256 = at, ""
		m.tokens[id] = c
	}
	return c, nil
}

var testStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestTokenLastUseThrottled: authenticating with a token records the use
// at most once per lastUsedResolution, however often the token is shown.
func TestTokenLastUseThrottled(t *testing.T) {
	t.Parallel()
	creds, clk := newMemCredentials(), clock.NewManual(testStart)
	a := newAuthority(creds, clk, time.Minute, time.Hour)
	token, _, err := a.createToken("ci")
	if err != nil {
		t.Fatal(err)
	}
	use := func() {
		t.Helper()
		if _, err := a.token(token); err != nil {
			t.Fatalf("token: %v", err)
		}
	}
	use()
	clk.Advance(time.Second)
	use()
	if n := creds.touched(); n != 1 {
		t.Fatalf("%d writes of the last use after two uses a second apart, want 1", n)
	}
	clk.Advance(lastUsedResolution - 2*time.Second)
	use()
	if n := creds.touched(); n != 1 {
		t.Fatalf("%d writes within %s, want 1", n, lastUsedResolution)
	}
	clk.Advance(time.Second) // lastUsedResolution after the first use
	use()
	if n := creds.touched(); n != 2 {
		t.Fatalf("%d writes once the recorded use is %s old, want 2", n, lastUsedResolution)
	}
	list, _ := creds.ListAPICredentials()
	if want := testStart.Add(lastUsedResolution).UnixMilli(); len(list) != 1 || list[0].LastUsedAt != want {
		t.Fatalf("recorded last use %+v, want %d", list, want)
	}
}

// TestSessionLastUseThrottled: the same for a browser session cookie.
func TestSessionLastUseThrottled(t *testing.T) {
	t.Parallel()
	creds, clk := newMemCredentials(), clock.NewManual(testStart)
	a := newAuthority(creds, clk, time.Minute, 24*time.Hour)
	code, _, _, err := a.newEnrollCode("laptop")
	if err != nil {
		t.Fatal(err)
	}
	cookie, _, err := a.enroll(code, "http://127.0.0.1:7420", "test", false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := a.session(cookie, false); err != nil {
			t.Fatalf("session check %d: %v", i, err)
		}
		clk.Advance(lastUsedResolution / 10)
	}
	if n := creds.touched(); n != 1 {
		t.Fatalf("%d writes of the last use for 5 checks within %s, want 1", n, lastUsedResolution)
	}
	clk.Advance(lastUsedResolution)
	if _, err := a.session(cookie, false); err != nil {
		t.Fatal(err)
	}
	if n := creds.touched(); n != 2 {
		t.Fatalf("%d writes after %s, want 2", n, lastUsedResolution)
	}
}

// TestSecurityCommandsThroughCredentials drives the local security commands
// over the Credentials interface: an unknown id is NOT_FOUND, recognised
// through ErrNotFound alone, and a missing Credentials is INTERNAL.
func TestSecurityCommandsThroughCredentials(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clock.NewManual(testStart)
	g := New(Config{Credentials: newMemCredentials(), Clock: clk, TicketTTL: time.Second}, nil, nil, outbox.NewHub(), log)
	defer g.Close()

	created, err := g.security(&protocol.TokenCreate{Note: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	tok := created.(protocol.TokenCreateData)
	if tok.CreatedAt != testStart.UnixMilli() {
		t.Errorf("created_at %d, want the injected clock's %d", tok.CreatedAt, testStart.UnixMilli())
	}
	for _, cmd := range []protocol.Command{
		&protocol.TokenRevoke{TokenID: "tok-unknown"},
		&protocol.WebSessionsRevoke{SessionID: "wsn-unknown"},
	} {
		if _, err := g.security(cmd); protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Errorf("%T of an unknown id: %v, want NOT_FOUND", cmd, err)
		}
	}
	clk.Advance(time.Minute)
	revoked, err := g.security(&protocol.TokenRevoke{TokenID: tok.TokenID})
	if err != nil {
		t.Fatal(err)
	}
	if got := revoked.(protocol.TokenRevokeData).RevokedAt; got != testStart.Add(time.Minute).UnixMilli() {
		t.Errorf("revoked_at %d, want the injected clock's", got)
	}

	// The ticket a local client mints expires on the injected clock.
	minted, err := g.security(&protocol.WSTicket{})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if g.Tickets().Consume(minted.(protocol.WSTicketData).Ticket) {
		t.Error("ticket still valid one TTL later on the injected clock")
	}

	bare := New(Config{}, nil, nil, outbox.NewHub(), log)
	defer bare.Close()
	_, err = bare.security(&protocol.TokenList{})
	if protocol.CodeOf(err) != protocol.CodeInternal || !strings.Contains(err.Error(), ErrNoStore.Error()) {
		t.Errorf("token.list without Credentials: %v, want INTERNAL", err)
	}
}
