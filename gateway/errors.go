package gateway

import "errors"

// Sentinels for errors.Is. Their text is safe to show a client: none ever
// carries a secret.
var (
	// ErrDaemonRunning reports a live daemon on the socket path.
	ErrDaemonRunning = errors.New("gateway: another shardd is serving on this socket")
	// ErrPolicy reports an unusable WebPolicy (Listen).
	ErrPolicy = errors.New("gateway: invalid web policy")
	// ErrBadCredential means an enrollment code, session cookie or API
	// token is unknown, expired, revoked or malformed; the caller does not
	// learn which.
	ErrBadCredential = errors.New("gateway: invalid, expired or revoked credential")
	// ErrNoStore means the gateway was built without Credentials, so
	// browser enrollment and API tokens are unavailable.
	ErrNoStore = errors.New("gateway: no security store configured")
	// ErrNotFound is what a Credentials implementation's errors wrap when
	// the record asked for does not exist (an unknown session or token id):
	// the gateway answers NOT_FOUND for it without knowing the store.
	ErrNotFound = errors.New("gateway: credential not found")
)
