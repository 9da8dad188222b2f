package protocol

// Security commands: Shard extensions for browser enrollment, browser
// sessions and API tokens (docs/protocol.md §4.1). Like ws.ticket they are
// answered on the unix socket only (local trust, §4.2); over a WebSocket they
// fail with PERMISSION_DENIED. Responses that carry a secret (an enrollment
// code, an API token) are the only place that secret ever appears: the daemon
// keeps only its SHA-256 and never logs it.
const (
	TypeWebEnroll         = "web.enroll"
	TypeWebSessionsList   = "web.sessions.list"
	TypeWebSessionsRevoke = "web.sessions.revoke"
	TypeTokenCreate       = "token.create"
	TypeTokenList         = "token.list"
	TypeTokenRevoke       = "token.revoke"
)

// MaxNoteLen bounds the free-text note of an enrollment or a token (see
// limits.go for the other limits).
const MaxNoteLen = 200

// WebEnroll mints a one-time browser enrollment code.
type WebEnroll struct {
	Header
	// Note labels the browser that will use the code (optional).
	Note string `json:"note,omitempty"`
}

// WebEnrollData is the data of a web.enroll response. Code is a secret;
// URL carries it in the fragment (#code=…), which browsers never send to a
// server.
type WebEnrollData struct {
	Code        string `json:"code"`
	URL         string `json:"url"`
	ExpiresAt   int64  `json:"expires_at"`
	PrincipalID string `json:"principal_id"`
}

// WebSessionsList lists live browser sessions.
type WebSessionsList struct{ Header }

// WebSessionInfo describes one browser session, never its secret.
type WebSessionInfo struct {
	SessionID   string `json:"session_id"`
	PrincipalID string `json:"principal_id"`
	BrowserID   string `json:"browser_id"`
	// Note is the enrollment's note, UserAgent the browser's User-Agent at
	// enrollment (truncated).
	Note      string `json:"note,omitempty"`
	UserAgent string `json:"user_agent,omitempty"`
	// Secure: issued over https as a __Host- Secure cookie.
	Secure     bool  `json:"secure"`
	CreatedAt  int64 `json:"created_at"`
	ExpiresAt  int64 `json:"expires_at"`
	LastUsedAt int64 `json:"last_used_at,omitempty"`
	// Connections counts the WebSocket connections open under it.
	Connections int `json:"connections"`
}

// WebSessionsListData is the data of a web.sessions.list response.
type WebSessionsListData struct {
	Sessions []WebSessionInfo `json:"sessions"`
}

// WebSessionsRevoke revokes one session (SessionID) or every one (All);
// exactly one of the two. WebSocket connections opened under a revoked
// session are closed.
type WebSessionsRevoke struct {
	Header
	SessionID string `json:"session_id,omitempty"`
	All       bool   `json:"all,omitempty"`
}

// WebSessionsRevokeData is the data of a web.sessions.revoke response.
type WebSessionsRevokeData struct {
	Revoked []string `json:"revoked"`
	// ClosedConnections counts the connections that were closed.
	ClosedConnections int `json:"closed_connections"`
}

// TokenCreate creates an API token for non-browser clients.
type TokenCreate struct {
	Header
	// Note says what the token is for; required.
	Note string `json:"note"`
}

// TokenCreateData is the data of a token.create response. Token is shown
// this once: the daemon keeps only its hash.
type TokenCreateData struct {
	TokenID   string `json:"token_id"`
	Token     string `json:"token"`
	Note      string `json:"note"`
	CreatedAt int64  `json:"created_at"`
}

// TokenList lists API tokens, revoked ones included.
type TokenList struct{ Header }

// TokenInfo describes one API token, never its secret.
type TokenInfo struct {
	TokenID    string `json:"token_id"`
	Note       string `json:"note"`
	CreatedAt  int64  `json:"created_at"`
	LastUsedAt int64  `json:"last_used_at,omitempty"`
	RevokedAt  int64  `json:"revoked_at,omitempty"`
	// Connections counts the WebSocket connections open with it.
	Connections int `json:"connections"`
}

// TokenListData is the data of a token.list response.
type TokenListData struct {
	Tokens []TokenInfo `json:"tokens"`
}

// TokenRevoke revokes an API token at once: later upgrades with it fail and
// connections open with it are closed.
type TokenRevoke struct {
	Header
	TokenID string `json:"token_id"`
}

// TokenRevokeData is the data of a token.revoke response.
type TokenRevokeData struct {
	TokenID           string `json:"token_id"`
	RevokedAt         int64  `json:"revoked_at"`
	ClosedConnections int    `json:"closed_connections"`
}

// Validate implements Command.
func (c *WebEnroll) Validate() error { return noteLen("note", c.Note) }

// Validate implements Command.
func (c *WebSessionsList) Validate() error { return nil }

// Validate implements Command.
func (c *WebSessionsRevoke) Validate() error {
	if err := maxLen("session_id", c.SessionID, MaxIDLen); err != nil {
		return err
	}
	switch {
	case c.All && c.SessionID != "":
		return invalid("session_id", "must be empty when all is true")
	case !c.All && c.SessionID == "":
		return invalid("session_id", "required (or all: true)")
	}
	return nil
}

// Validate implements Command.
func (c *TokenCreate) Validate() error {
	if err := required("note", c.Note); err != nil {
		return err
	}
	return noteLen("note", c.Note)
}

// Validate implements Command.
func (c *TokenList) Validate() error { return nil }

// Validate implements Command.
func (c *TokenRevoke) Validate() error {
	if err := maxLen("token_id", c.TokenID, MaxIDLen); err != nil {
		return err
	}
	return required("token_id", c.TokenID)
}

func noteLen(field, v string) error { return maxLen(field, v, MaxNoteLen) }
