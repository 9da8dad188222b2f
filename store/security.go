package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The security store (docs/protocol.md §4.1): who may use the web listener,
// and with what. It holds hashes and metadata only. A browser session cookie
// or an API token is "<id>.<secret>" with 32 random bytes of secret, handed
// to its holder once; the store keeps the id and the hex SHA-256 of the whole
// string. Hashes of high-entropy random secrets need no salt and no slow KDF:
// there is no dictionary to precompute, and a 256-bit preimage search is
// infeasible, so the file (or a backup of it) lets nobody log in. The hash
// fields are checked to be 64 lowercase hex digits, so a raw secret cannot be
// stored here by mistake. One-time enrollment codes and WS tickets live only
// in the daemon's memory and never reach this file.

// Principal is an identity that holds browser sessions and API credentials.
// v0.1 has a single trust level (docs/protocol.md §4.3) and so a single
// principal, the daemon's owner, created at the first enrollment.
type Principal struct {
	ID        string `json:"principal_id"`
	Name      string `json:"name"`
	CreatedAt int64  `json:"created_at"`
}

// Browser is an enrolled browser: the exchange of one enrollment code.
type Browser struct {
	ID          string `json:"browser_id"`
	PrincipalID string `json:"principal_id"`
	// Note is the note given to web.enroll; UserAgent and Origin are what
	// the browser sent when it enrolled (UserAgent truncated).
	Note       string `json:"note,omitempty"`
	UserAgent  string `json:"user_agent,omitempty"`
	Origin     string `json:"origin"`
	EnrolledAt int64  `json:"enrolled_at"`
}

// WebSession is a browser session: what the session cookie stands for.
type WebSession struct {
	ID          string `json:"session_id"`
	PrincipalID string `json:"principal_id"`
	BrowserID   string `json:"browser_id"`
	// SecretSHA256 is the hex SHA-256 of the cookie value.
	SecretSHA256 string `json:"secret_sha256"`
	// Secure: issued over https in the __Host- Secure form; such a session
	// is accepted only over https, and a plain one only over http.
	Secure     bool  `json:"secure"`
	CreatedAt  int64 `json:"created_at"`
	ExpiresAt  int64 `json:"expires_at"`
	LastUsedAt int64 `json:"last_used_at,omitempty"`
}

// APICredential is an API token for non-browser clients.
type APICredential struct {
	ID          string `json:"token_id"`
	PrincipalID string `json:"principal_id"`
	Note        string `json:"note"`
	// SecretSHA256 is the hex SHA-256 of the token; "" once revoked.
	SecretSHA256 string `json:"secret_sha256,omitempty"`
	CreatedAt    int64  `json:"created_at"`
	LastUsedAt   int64  `json:"last_used_at,omitempty"`
	RevokedAt    int64  `json:"revoked_at,omitempty"`
}

// Revoked reports whether the credential was revoked.
func (c APICredential) Revoked() bool { return c.RevokedAt != 0 }

// checkHash rejects anything but a hex SHA-256, so that no raw secret is
// ever written by mistake.
func checkHash(h string) error {
	if len(h) != 64 {
		return fmt.Errorf("%w: secret hash must be 64 hex digits", ErrInvalid)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%w: secret hash must be lowercase hex", ErrInvalid)
		}
	}
	return nil
}

// EnsurePrincipal returns the principal named p.Name, creating p if there
// is none.
func (s *Store) EnsurePrincipal(p Principal) (Principal, error) {
	if p.ID == "" || p.Name == "" {
		return Principal{}, fmt.Errorf("%w: principal needs an id and a name", ErrInvalid)
	}
	var out Principal
	err := s.update(func(tx *bolt.Tx) error {
		all, err := listJSON[Principal](tx, bucketPrincipals)
		if err != nil {
			return err
		}
		for _, q := range all {
			if q.Name == p.Name {
				out = q
				return nil
			}
		}
		out = p
		return putJSON(tx, bucketPrincipals, p.ID, p)
	})
	return out, wrapOp(err, "ensure principal %q", p.Name)
}

// Enroll records an enrolled browser and its first session in one
// transaction. The principal must exist; the ids must be new.
func (s *Store) Enroll(b Browser, ws WebSession) error {
	if b.ID == "" || ws.ID == "" || ws.BrowserID != b.ID || ws.PrincipalID != b.PrincipalID {
		return fmt.Errorf("%w: enroll: inconsistent browser and session", ErrInvalid)
	}
	if err := checkHash(ws.SecretSHA256); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		if ok, err := exists(tx, bucketPrincipals, b.PrincipalID); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("%w: principal %q", ErrNotFound, b.PrincipalID)
			}
			return err
		}
		for _, k := range []struct{ bucket, id string }{{bucketBrowsers, b.ID}, {bucketWebSessions, ws.ID}} {
			if ok, err := exists(tx, k.bucket, k.id); err != nil || ok {
				if err == nil {
					err = fmt.Errorf("%w: %s %q", ErrExists, k.bucket, k.id)
				}
				return err
			}
		}
		if err := putJSON(tx, bucketBrowsers, b.ID, b); err != nil {
			return err
		}
		return putJSON(tx, bucketWebSessions, ws.ID, ws)
	})
	return wrapOp(err, "enroll browser %q", b.ID)
}

// GetBrowser returns an enrolled browser, or ErrNotFound.
func (s *Store) GetBrowser(id string) (Browser, error) {
	var b Browser
	err := s.db.View(func(tx *bolt.Tx) error { return getOrNotFound(tx, bucketBrowsers, id, &b) })
	return b, wrapOp(err, "get browser %q", id)
}

// ListBrowsers returns every enrolled browser in id (creation) order.
func (s *Store) ListBrowsers() ([]Browser, error) {
	var out []Browser
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = listJSON[Browser](tx, bucketBrowsers)
		return err
	})
	return out, wrapOp(err, "list browsers")
}

// GetWebSession returns a session, or ErrNotFound.
func (s *Store) GetWebSession(id string) (WebSession, error) {
	var ws WebSession
	err := s.db.View(func(tx *bolt.Tx) error { return getOrNotFound(tx, bucketWebSessions, id, &ws) })
	return ws, wrapOp(err, "get web session %q", id)
}

// ListWebSessions returns every session in id (creation) order, expired
// ones included until PruneWebSessions removes them.
func (s *Store) ListWebSessions() ([]WebSession, error) {
	var out []WebSession
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = listJSON[WebSession](tx, bucketWebSessions)
		return err
	})
	return out, wrapOp(err, "list web sessions")
}

// TouchWebSession records a use of the session at (epoch ms).
func (s *Store) TouchWebSession(id string, at int64) error {
	err := s.update(func(tx *bolt.Tx) error {
		var ws WebSession
		if err := getOrNotFound(tx, bucketWebSessions, id, &ws); err != nil {
			return err
		}
		ws.LastUsedAt = at
		return putJSON(tx, bucketWebSessions, id, ws)
	})
	return wrapOp(err, "touch web session %q", id)
}

// DeleteWebSession revokes a session by forgetting it; ErrNotFound when
// there is none.
func (s *Store) DeleteWebSession(id string) error {
	err := s.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketWebSessions)
		if err != nil {
			return err
		}
		if b.Get([]byte(id)) == nil {
			return fmt.Errorf("%w: web session %q", ErrNotFound, id)
		}
		return b.Delete([]byte(id))
	})
	return wrapOp(err, "delete web session %q", id)
}

// DeleteWebSessions forgets every session for which drop is true (nil:
// every session) and returns their ids.
func (s *Store) DeleteWebSessions(drop func(WebSession) bool) ([]string, error) {
	var ids []string
	err := s.update(func(tx *bolt.Tx) error {
		ids = nil // a group-commit retry runs this again
		all, err := listJSON[WebSession](tx, bucketWebSessions)
		if err != nil {
			return err
		}
		b, err := bucket(tx, bucketWebSessions)
		if err != nil {
			return err
		}
		for _, ws := range all {
			if drop != nil && !drop(ws) {
				continue
			}
			if err := b.Delete([]byte(ws.ID)); err != nil {
				return err
			}
			ids = append(ids, ws.ID)
		}
		return nil
	})
	return ids, wrapOp(err, "delete web sessions")
}

// CreateAPICredential records a new API token; ErrExists if the id is
// taken.
func (s *Store) CreateAPICredential(c APICredential) error {
	if c.ID == "" || c.PrincipalID == "" {
		return fmt.Errorf("%w: api credential needs an id and a principal", ErrInvalid)
	}
	if err := checkHash(c.SecretSHA256); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		if ok, err := exists(tx, bucketPrincipals, c.PrincipalID); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("%w: principal %q", ErrNotFound, c.PrincipalID)
			}
			return err
		}
		if ok, err := exists(tx, bucketCredentials, c.ID); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("%w: api credential %q", ErrExists, c.ID)
			}
			return err
		}
		return putJSON(tx, bucketCredentials, c.ID, c)
	})
	return wrapOp(err, "create api credential %q", c.ID)
}

// GetAPICredential returns a credential (revoked ones too), or ErrNotFound.
func (s *Store) GetAPICredential(id string) (APICredential, error) {
	var c APICredential
	err := s.db.View(func(tx *bolt.Tx) error { return getOrNotFound(tx, bucketCredentials, id, &c) })
	return c, wrapOp(err, "get api credential %q", id)
}

// ListAPICredentials returns every credential in id (creation) order.
func (s *Store) ListAPICredentials() ([]APICredential, error) {
	var out []APICredential
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = listJSON[APICredential](tx, bucketCredentials)
		return err
	})
	return out, wrapOp(err, "list api credentials")
}

// TouchAPICredential records a use of a live credential at (epoch ms).
func (s *Store) TouchAPICredential(id string, at int64) error {
	err := s.update(func(tx *bolt.Tx) error {
		var c APICredential
		if err := getOrNotFound(tx, bucketCredentials, id, &c); err != nil {
			return err
		}
		if c.Revoked() {
			return nil
		}
		c.LastUsedAt = at
		return putJSON(tx, bucketCredentials, id, c)
	})
	return wrapOp(err, "touch api credential %q", id)
}

// RevokeAPICredential revokes a credential at (epoch ms): its hash is
// dropped, so nothing can match it again, and the record stays for the
// audit trail. Revoking twice keeps the first time. ErrNotFound when there
// is none.
func (s *Store) RevokeAPICredential(id string, at int64) (APICredential, error) {
	var c APICredential
	err := s.update(func(tx *bolt.Tx) error {
		c = APICredential{} // a group-commit retry runs this again
		if err := getOrNotFound(tx, bucketCredentials, id, &c); err != nil {
			return err
		}
		if c.Revoked() {
			return nil
		}
		c.RevokedAt, c.SecretSHA256 = at, ""
		return putJSON(tx, bucketCredentials, id, c)
	})
	return c, wrapOp(err, "revoke api credential %q", id)
}

// getOrNotFound is getJSON that turns an absent key into ErrNotFound.
func getOrNotFound(tx *bolt.Tx, name, key string, v any) error {
	found, err := getJSON(tx, name, key, v)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %s %q", ErrNotFound, name, key)
	}
	return nil
}
