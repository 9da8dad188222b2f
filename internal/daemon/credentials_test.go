package daemon

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/gateway"
	"github.com/shard-dev/shard/store"
)

// TestStoreCredentials runs the gateway's Credentials over a real store:
// records cross unchanged both ways, and a missing one is
// gateway.ErrNotFound (and still store.ErrNotFound, with the store's text).
func TestStoreCredentials(t *testing.T) {
	t.Parallel()
	st, err := store.Open(filepath.Join(t.TempDir(), "shard.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var c gateway.Credentials = storeCredentials{st: st}
	hash := strings.Repeat("a", 64)

	p, err := c.EnsurePrincipal(gateway.Principal{ID: "prn-1", Name: "owner", CreatedAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.EnsurePrincipal(gateway.Principal{ID: "prn-2", Name: "owner"}); err != nil || again != p {
		t.Fatalf("EnsurePrincipal again = %+v, %v; want %+v", again, err, p)
	}
	b := gateway.Browser{ID: "brw-1", PrincipalID: p.ID, Note: "laptop", UserAgent: "ua", Origin: "http://127.0.0.1:1", EnrolledAt: 2}
	ws := gateway.WebSession{ID: "wsn-1", PrincipalID: p.ID, BrowserID: b.ID, SecretSHA256: hash, Secure: true, CreatedAt: 2, ExpiresAt: 9}
	if err := c.Enroll(b, ws); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ListBrowsers(); err != nil || len(got) != 1 || got[0] != b {
		t.Fatalf("ListBrowsers = %+v, %v", got, err)
	}
	if err := c.TouchWebSession(ws.ID, 5); err != nil {
		t.Fatal(err)
	}
	ws.LastUsedAt = 5
	if got, err := c.GetWebSession(ws.ID); err != nil || got != ws {
		t.Fatalf("GetWebSession = %+v, %v; want %+v", got, err, ws)
	}
	if got, err := c.ListWebSessions(); err != nil || len(got) != 1 || got[0] != ws {
		t.Fatalf("ListWebSessions = %+v, %v", got, err)
	}
	var seen []gateway.WebSession
	ids, err := c.DeleteWebSessions(func(s gateway.WebSession) bool { seen = append(seen, s); return false })
	if err != nil || len(ids) != 0 || len(seen) != 1 || seen[0] != ws {
		t.Fatalf("DeleteWebSessions(none) = %v, %v; saw %+v", ids, err, seen)
	}

	tok := gateway.APICredential{ID: "tok-1", PrincipalID: p.ID, Note: "ci", SecretSHA256: hash, CreatedAt: 3}
	if err := c.CreateAPICredential(tok); err != nil {
		t.Fatal(err)
	}
	if err := c.TouchAPICredential(tok.ID, 6); err != nil {
		t.Fatal(err)
	}
	tok.LastUsedAt = 6
	if got, err := c.GetAPICredential(tok.ID); err != nil || got != tok {
		t.Fatalf("GetAPICredential = %+v, %v; want %+v", got, err, tok)
	}
	r, err := c.RevokeAPICredential(tok.ID, 7)
	if err != nil || !r.Revoked() || r.SecretSHA256 != "" || r.LastUsedAt != 6 {
		t.Fatalf("RevokeAPICredential = %+v, %v", r, err)
	}
	if got, err := c.ListAPICredentials(); err != nil || len(got) != 1 || got[0] != r {
		t.Fatalf("ListAPICredentials = %+v, %v", got, err)
	}

	_, direct := st.GetAPICredential("tok-x")
	missing := map[string]error{
		"DeleteWebSession": c.DeleteWebSession("wsn-x"),
		"TouchWebSession":  c.TouchWebSession("wsn-x", 1),
	}
	_, missing["GetWebSession"] = c.GetWebSession("wsn-x")
	_, missing["GetAPICredential"] = c.GetAPICredential("tok-x")
	_, missing["RevokeAPICredential"] = c.RevokeAPICredential("tok-x", 1)
	for op, err := range missing {
		if !errors.Is(err, gateway.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of an unknown id: %v, want gateway.ErrNotFound and store.ErrNotFound", op, err)
		}
	}
	if got := missing["GetAPICredential"].Error(); got != direct.Error() {
		t.Errorf("error text %q, want the store's %q", got, direct.Error())
	}
	// Other errors pass through as they are.
	if err := c.CreateAPICredential(gateway.APICredential{ID: "tok-2", PrincipalID: p.ID, SecretSHA256: "raw"}); !errors.Is(err, store.ErrInvalid) || errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("invalid credential: %v, want store.ErrInvalid only", err)
	}

	if ids, err := c.DeleteWebSessions(nil); err != nil || len(ids) != 1 || ids[0] != ws.ID {
		t.Fatalf("DeleteWebSessions(nil) = %v, %v", ids, err)
	}
}
