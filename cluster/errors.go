package cluster

import "errors"

// Configuration errors: Validate wraps these with the setting at fault,
// so a caller can tell a refused configuration apart with errors.Is.
var (
	// ErrInvalidConfig is wrapped by every configuration error.
	ErrInvalidConfig = errors.New("cluster: invalid configuration")
	// ErrInsecure is wrapped when a non-loopback address lacks a token
	// or TLS: a node refuses to join an unauthenticated cluster.
	ErrInsecure = errors.New("cluster: non-loopback address without authentication or TLS")
)

// Runtime errors.
var (
	// ErrNotReady is returned by Start when the server, the JetStream
	// meta-leader or the membership bucket is not there within
	// Config.ReadyTimeout.
	ErrNotReady = errors.New("cluster: not ready")
	// ErrClosed is returned by calls on a closed Node.
	ErrClosed = errors.New("cluster: node closed")
	// ErrDuplicateNode is returned by Start when another process runs a
	// node of the same name that is alive in the cluster.
	ErrDuplicateNode = errors.New("cluster: a node of this name is alive in the cluster")
)
