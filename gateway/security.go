package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/ids"
)

// Credentials of the web listener (docs/protocol.md §4.1):
//
//	credential         lifetime          where it lives          what the daemon keeps
//	enrollment code    web.enroll_ttl    memory                  SHA-256
//	session cookie     web.session_ttl   store (web_sessions)    SHA-256 + metadata
//	WS ticket          gateway.ticket_ttl memory                 SHA-256 + binding
//	API token          until revoked     store (api_credentials) SHA-256 + metadata
//
// A session cookie and an API token are "<id>.<secret>": the id finds the
// record, the SHA-256 of the whole string is compared in constant time.
// Secrets are 32 bytes from crypto/rand, so plain SHA-256 is the right hash
// (no salt, no KDF: nothing to precompute, no preimage to search). None of
// them is ever logged.

// ID prefixes of the security records.
const (
	prefixPrincipal  = "prn"
	prefixBrowser    = "brw"
	prefixWebSession = "wsn"
	prefixToken      = "tok"
)

// ownerPrincipal is the name of the single principal of v0.1
// (docs/protocol.md §4.3).
const ownerPrincipal = "owner"

// maxUserAgent bounds the User-Agent kept with an enrolled browser.
const maxUserAgent = 200

// authority issues and checks the web listener's credentials. It is safe
// for concurrent use: the store serializes writes, the code set locks.
type authority struct {
	st         Credentials // nil: no enrollment, no sessions, no tokens
	codes      oneTime[enrollGrant]
	sessionTTL time.Duration
	clk        clock.Clock
}

// enrollGrant is what an enrollment code stands for.
type enrollGrant struct {
	principalID string
	note        string
}

func newAuthority(st Credentials, clk clock.Clock, enrollTTL, sessionTTL time.Duration) *authority {
	clk = clock.Or(clk)
	return &authority{st: st, codes: newOneTime[enrollGrant](enrollTTL, clk), sessionTTL: sessionTTL, clk: clk}
}

func (a *authority) now() time.Time { return a.clk.Now() }

// newSecret returns a fresh "<id>.<secret>" credential and its hash.
func newSecret(id string) (value, hash string) {
	value = id + "." + randomSecret()
	return value, hashSecret(value)
}

func hashSecret(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

// secretID returns the id part of an "<id>.<secret>" credential of the
// given prefix, or "" when value does not have that shape.
func secretID(value, prefix string) string {
	id, secret, ok := strings.Cut(value, ".")
	if !ok || !ids.HasPrefix(id, prefix) || len(id) > 64 || len(secret) != 43 {
		return ""
	}
	return id
}

// hashMatches compares value's hash with stored in constant time. An empty
// stored hash (a revoked credential) never matches.
func hashMatches(value, stored string) bool {
	got := hashSecret(value)
	if len(stored) != len(got) {
		stored = strings.Repeat("-", len(got)) // keep the timing of a compare
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(stored)) == 1
}

// owner returns the owner principal, creating it on first use.
func (a *authority) owner() (Principal, error) {
	if a.st == nil {
		return Principal{}, ErrNoStore
	}
	return a.st.EnsurePrincipal(Principal{ID: ids.New(prefixPrincipal), Name: ownerPrincipal, CreatedAt: a.now().UnixMilli()})
}

// newEnrollCode mints a one-time enrollment code for the owner.
func (a *authority) newEnrollCode(note string) (code string, exp time.Time, principalID string, err error) {
	p, err := a.owner()
	if err != nil {
		return "", time.Time{}, "", err
	}
	code, exp = a.codes.mint(enrollGrant{principalID: p.ID, note: note})
	return code, exp, p.ID, nil
}

// enroll exchanges a code for an enrolled browser and its first session
// and returns the cookie value. The code is spent whatever happens next.
func (a *authority) enroll(code, origin, userAgent string, secure bool) (string, WebSession, error) {
	g, ok := a.codes.take(code)
	if !ok {
		return "", WebSession{}, ErrBadCredential
	}
	if a.st == nil {
		return "", WebSession{}, ErrNoStore
	}
	now := a.now()
	if len(userAgent) > maxUserAgent {
		userAgent = userAgent[:maxUserAgent]
	}
	b := Browser{ID: ids.New(prefixBrowser), PrincipalID: g.principalID, Note: g.note,
		UserAgent: userAgent, Origin: origin, EnrolledAt: now.UnixMilli()}
	id := ids.New(prefixWebSession)
	cookie, hash := newSecret(id)
	ws := WebSession{ID: id, PrincipalID: g.principalID, BrowserID: b.ID, SecretSHA256: hash, Secure: secure,
		CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(a.sessionTTL).UnixMilli()}
	if err := a.st.Enroll(b, ws); err != nil {
		return "", WebSession{}, fmt.Errorf("gateway: enroll: %w", err)
	}
	return cookie, ws, nil
}

// session checks a session cookie presented over a request whose
// effective scheme is https (secure) or http.
func (a *authority) session(cookie string, secure bool) (WebSession, error) {
	id := secretID(cookie, prefixWebSession)
	if id == "" || a.st == nil {
		return WebSession{}, ErrBadCredential
	}
	ws, err := a.st.GetWebSession(id)
	if errors.Is(err, ErrNotFound) {
		hashMatches(cookie, "")
		return WebSession{}, ErrBadCredential
	}
	if err != nil {
		return WebSession{}, err
	}
	now := a.now()
	if !hashMatches(cookie, ws.SecretSHA256) || now.UnixMilli() >= ws.ExpiresAt || ws.Secure != secure {
		return WebSession{}, ErrBadCredential
	}
	if at := now.UnixMilli(); touchDue(ws.LastUsedAt, at) {
		ws.LastUsedAt = at
		if err := a.st.TouchWebSession(id, at); err != nil && !errors.Is(err, ErrNotFound) {
			return WebSession{}, err
		}
	}
	return ws, nil
}

// sessionLive reports whether a session still exists and has not expired.
func (a *authority) sessionLive(id string) bool {
	if a.st == nil {
		return false
	}
	ws, err := a.st.GetWebSession(id)
	return err == nil && a.now().UnixMilli() < ws.ExpiresAt
}

// createToken creates an API token for the owner; the token is returned
// this once.
func (a *authority) createToken(note string) (string, APICredential, error) {
	p, err := a.owner()
	if err != nil {
		return "", APICredential{}, err
	}
	id := ids.New(prefixToken)
	token, hash := newSecret(id)
	c := APICredential{ID: id, PrincipalID: p.ID, Note: note, SecretSHA256: hash, CreatedAt: a.now().UnixMilli()}
	if err := a.st.CreateAPICredential(c); err != nil {
		return "", APICredential{}, fmt.Errorf("gateway: create token: %w", err)
	}
	c.SecretSHA256 = ""
	return token, c, nil
}

// token checks an API token.
func (a *authority) token(token string) (APICredential, error) {
	id := secretID(token, prefixToken)
	if id == "" || a.st == nil {
		return APICredential{}, ErrBadCredential
	}
	c, err := a.st.GetAPICredential(id)
	if errors.Is(err, ErrNotFound) {
		hashMatches(token, "")
		return APICredential{}, ErrBadCredential
	}
	if err != nil {
		return APICredential{}, err
	}
	if c.Revoked() || !hashMatches(token, c.SecretSHA256) {
		return APICredential{}, ErrBadCredential
	}
	if at := a.now().UnixMilli(); touchDue(c.LastUsedAt, at) {
		if err := a.st.TouchAPICredential(id, at); err != nil {
			return APICredential{}, err
		}
		c.LastUsedAt = at
	}
	return c, nil
}

// tokenLive reports whether a token exists and is not revoked.
func (a *authority) tokenLive(id string) bool {
	if a.st == nil {
		return false
	}
	c, err := a.st.GetAPICredential(id)
	return err == nil && !c.Revoked()
}

// pruneSessions forgets expired sessions (at startup).
func (a *authority) pruneSessions() ([]string, error) {
	if a.st == nil {
		return nil, nil
	}
	now := a.now().UnixMilli()
	return a.st.DeleteWebSessions(func(ws WebSession) bool { return now >= ws.ExpiresAt })
}
