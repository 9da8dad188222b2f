package client

import "errors"

// ErrClosed is returned by Send and Request after Close, and by Err when the
// connection ended because Close was called.
var ErrClosed = errors.New("client: connection closed")

// errNoType is returned by Request for a message whose Header.Type is empty.
var errNoType = errors.New("client: message has no type (set Header.Type, e.g. protocol.TypeAgentList)")
