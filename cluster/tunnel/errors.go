package tunnel

import "errors"

// Errors a Conn, Dial or a Listener returns. Read and Write wrap them in a
// *net.OpError; errors.Is finds them through it.
var (
	// ErrPeerSilent ends a connection whose peer sent nothing (not even a
	// keepalive) for Options.PeerTimeout: its node died, its NATS
	// connection closed, or the route between the two servers broke.
	ErrPeerSilent = errors.New("tunnel: peer silent past the bound")
	// ErrPeerClosed is what Write returns once the peer closed the
	// connection entirely (Close, not CloseWrite): nothing it would be sent
	// would be read.
	ErrPeerClosed = errors.New("tunnel: peer closed the connection")
	// ErrNoListener is what Dial returns when nothing listens on the
	// subject (NATS had no responder for the open request).
	ErrNoListener = errors.New("tunnel: no listener on the subject")
	// ErrRefused is what Dial returns when the listener answered but did
	// not take the connection: it is closing, or its accept backlog is
	// full.
	ErrRefused = errors.New("tunnel: connection refused")
	// ErrNATSClosed ends a connection whose own NATS connection is closed
	// or draining: nothing it sends would leave.
	ErrNATSClosed = errors.New("tunnel: NATS connection closed")
)
