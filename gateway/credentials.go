package gateway

import "time"

// Credentials is what the gateway needs from the security store: the
// principal, enrolled browsers, browser sessions and API tokens of
// docs/protocol.md §4.1. It is exactly the operations the gateway calls, so
// that the gateway depends on no database; the daemon injects an adapter of
// its store (internal/daemon/credentials.go). Implementations are safe for
// concurrent use, keep only hashes (SecretSHA256 fields) and metadata, and
// report a missing record with an error for which errors.Is(err, ErrNotFound)
// holds.
type Credentials interface {
	// EnsurePrincipal returns the principal named p.Name, creating p if
	// there is none.
	EnsurePrincipal(p Principal) (Principal, error)
	// Enroll records an enrolled browser and its first session at once.
	Enroll(b Browser, ws WebSession) error

	// ListBrowsers returns every enrolled browser in creation order.
	ListBrowsers() ([]Browser, error)

	// GetWebSession returns a session (expired ones too until pruned).
	GetWebSession(id string) (WebSession, error)
	// ListWebSessions returns every session in creation order.
	ListWebSessions() ([]WebSession, error)
	// TouchWebSession records a use of the session at (epoch ms).
	TouchWebSession(id string, at int64) error
	// DeleteWebSession revokes a session by forgetting it.
	DeleteWebSession(id string) error
	// DeleteWebSessions forgets every session for which drop is true (nil:
	// every session) and returns their ids.
	DeleteWebSessions(drop func(WebSession) bool) ([]string, error)

	// CreateAPICredential records a new API token.
	CreateAPICredential(c APICredential) error
	// GetAPICredential returns a token's record, revoked ones too.
	GetAPICredential(id string) (APICredential, error)
	// ListAPICredentials returns every token in creation order.
	ListAPICredentials() ([]APICredential, error)
	// TouchAPICredential records a use of a live token at (epoch ms).
	TouchAPICredential(id string, at int64) error
	// RevokeAPICredential revokes a token at (epoch ms) and returns its
	// record; revoking twice keeps the first time.
	RevokeAPICredential(id string, at int64) (APICredential, error)
}

// The record types below are the gateway's view of the security store's
// records. They have the store's fields, names and types one for one
// (without its JSON encoding, which stays the store's business), so the
// daemon's adapter converts between the two with a plain type conversion,
// and a field added on one side only fails to compile there.

// Principal is an identity that holds browser sessions and API tokens.
// v0.1 has a single one, the daemon's owner (docs/protocol.md §4.3).
type Principal struct {
	ID        string
	Name      string
	CreatedAt int64
}

// Browser is an enrolled browser: the exchange of one enrollment code.
type Browser struct {
	ID          string
	PrincipalID string
	// Note is the note given to web.enroll; UserAgent and Origin are what
	// the browser sent when it enrolled (UserAgent truncated).
	Note       string
	UserAgent  string
	Origin     string
	EnrolledAt int64
}

// WebSession is a browser session: what the session cookie stands for.
type WebSession struct {
	ID          string
	PrincipalID string
	BrowserID   string
	// SecretSHA256 is the hex SHA-256 of the cookie value.
	SecretSHA256 string
	// Secure: issued over https in the __Host- Secure form; accepted only
	// over https, and a plain one only over http.
	Secure     bool
	CreatedAt  int64
	ExpiresAt  int64
	LastUsedAt int64
}

// APICredential is an API token for non-browser clients.
type APICredential struct {
	ID          string
	PrincipalID string
	Note        string
	// SecretSHA256 is the hex SHA-256 of the token; "" once revoked.
	SecretSHA256 string
	CreatedAt    int64
	LastUsedAt   int64
	RevokedAt    int64
}

// Revoked reports whether the token was revoked.
func (c APICredential) Revoked() bool { return c.RevokedAt != 0 }

// lastUsedResolution is how stale a recorded last use may get: checking a
// session cookie or an API token records the use only when the recorded
// one is at least this old. Every record is a write transaction with an
// fsync, and a token or a browser may authenticate many times a second
// (reconnect storms, scripted clients); nobody needs last_used_at to
// better than a minute (shardctl token ls and web sessions ls show when a
// credential was last seen, to spot a forgotten or a stolen one), so one
// write a minute per credential is enough.
const lastUsedResolution = time.Minute

// touchDue reports whether a use at now (epoch ms) should be recorded over
// the recorded last (epoch ms): when last is at least lastUsedResolution
// old, or in the future (the wall clock went back).
func touchDue(last, now int64) bool {
	d := now - last
	return d < 0 || d >= lastUsedResolution.Milliseconds()
}
