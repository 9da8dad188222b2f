package store

import (
	"errors"
	"strings"
	"testing"
)

var hashA, hashB = strings.Repeat("a", 64), strings.Repeat("b", 64)

func TestSecurityRecords(t *testing.T) {
	s := openTest(t)
	p, err := s.EnsurePrincipal(Principal{ID: "prn-1", Name: "owner", CreatedAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A second call with another id returns the existing principal.
	if again, err := s.EnsurePrincipal(Principal{ID: "prn-2", Name: "owner", CreatedAt: 2}); err != nil || again != p {
		t.Fatalf("EnsurePrincipal again = %+v, %v; want %+v", again, err, p)
	}

	b := Browser{ID: "brw-1", PrincipalID: p.ID, Note: "laptop", Origin: "http://127.0.0.1:7420", EnrolledAt: 3}
	ws := WebSession{ID: "wsn-1", PrincipalID: p.ID, BrowserID: b.ID, SecretSHA256: hashA, CreatedAt: 3, ExpiresAt: 100}
	if err := s.Enroll(b, ws); err != nil {
		t.Fatal(err)
	}
	if err := s.Enroll(b, ws); !errors.Is(err, ErrExists) {
		t.Fatalf("enroll twice: %v, want ErrExists", err)
	}
	if got, err := s.GetWebSession("wsn-1"); err != nil || got != ws {
		t.Fatalf("GetWebSession = %+v, %v", got, err)
	}
	if err := s.TouchWebSession("wsn-1", 50); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetWebSession("wsn-1"); got.LastUsedAt != 50 {
		t.Fatalf("LastUsedAt = %d, want 50", got.LastUsedAt)
	}
	ws2 := WebSession{ID: "wsn-2", PrincipalID: p.ID, BrowserID: "brw-2", SecretSHA256: hashB, CreatedAt: 4, ExpiresAt: 10}
	if err := s.Enroll(Browser{ID: "brw-2", PrincipalID: p.ID}, ws2); err != nil {
		t.Fatal(err)
	}
	pruned, err := s.DeleteWebSessions(func(w WebSession) bool { return w.ExpiresAt <= 20 })
	if err != nil || len(pruned) != 1 || pruned[0] != "wsn-2" {
		t.Fatalf("prune = %v, %v; want [wsn-2]", pruned, err)
	}
	if err := s.DeleteWebSession("wsn-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWebSession("wsn-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted session: %v, want ErrNotFound", err)
	}
	if err := s.DeleteWebSession("wsn-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
	if bs, err := s.ListBrowsers(); err != nil || len(bs) != 2 {
		t.Fatalf("browsers outlive their sessions: %v, %v", bs, err)
	}

	c := APICredential{ID: "tok-1", PrincipalID: p.ID, Note: "ci", SecretSHA256: hashA, CreatedAt: 5}
	if err := s.CreateAPICredential(c); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchAPICredential("tok-1", 6); err != nil {
		t.Fatal(err)
	}
	r, err := s.RevokeAPICredential("tok-1", 7)
	if err != nil || r.RevokedAt != 7 || r.SecretSHA256 != "" || r.LastUsedAt != 6 || !r.Revoked() {
		t.Fatalf("revoke = %+v, %v", r, err)
	}
	if r, _ := s.RevokeAPICredential("tok-1", 9); r.RevokedAt != 7 {
		t.Fatalf("second revoke moved the time to %d", r.RevokedAt)
	}
	if _, err := s.RevokeAPICredential("tok-x", 9); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	if list, err := s.ListAPICredentials(); err != nil || len(list) != 1 || list[0].SecretSHA256 != "" {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

// TestSecurityRefusesRawSecrets: only a hex SHA-256 fits the hash fields,
// so a raw token handed to the store by mistake is refused.
func TestSecurityRefusesRawSecrets(t *testing.T) {
	s := openTest(t)
	p, err := s.EnsurePrincipal(Principal{ID: "prn-1", Name: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "tok-1.S3cr3tS3cr3tS3cr3tS3cr3tS3cr3tS3cr3tS3c", strings.Repeat("A", 64), strings.Repeat("a", 63)} {
		err := s.CreateAPICredential(APICredential{ID: "tok-1", PrincipalID: p.ID, SecretSHA256: bad})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("credential with hash %q: %v, want ErrInvalid", bad, err)
		}
		err = s.Enroll(Browser{ID: "brw-1", PrincipalID: p.ID}, WebSession{ID: "wsn-1", PrincipalID: p.ID, BrowserID: "brw-1", SecretSHA256: bad})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("session with hash %q: %v, want ErrInvalid", bad, err)
		}
	}
	if err := s.CreateAPICredential(APICredential{ID: "tok-1", PrincipalID: "prn-x", SecretSHA256: hashA}); !errors.Is(err, ErrNotFound) {
		t.Errorf("credential of an unknown principal: %v, want ErrNotFound", err)
	}
}
