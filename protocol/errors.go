package protocol

import (
	"errors"
	"fmt"
)

// ErrHandshake is wrapped by every error of the handshake parsers
// (handshake.go): a Host, Origin, Sec-WebSocket-Protocol, Authorization or
// forwarded header that is not in its canonical form.
var ErrHandshake = errors.New("protocol: malformed handshake header")

// ErrorCode is a registered protocol error code (docs/protocol.md §8). Codes
// are stable strings on the wire; new ones are added, never reused.
type ErrorCode string

// The error-code registry of docs/protocol.md §8.
const (
	CodeInvalidRequest     ErrorCode = "INVALID_REQUEST"
	CodeNotFound           ErrorCode = "NOT_FOUND"
	CodeNotAttached        ErrorCode = "NOT_ATTACHED"
	CodePermissionDenied   ErrorCode = "PERMISSION_DENIED"
	CodeProtocolError      ErrorCode = "PROTOCOL_ERROR"
	CodeTimeout            ErrorCode = "TIMEOUT"
	CodeRuntimeStartFailed ErrorCode = "RUNTIME_START_FAILED"
	CodeSessionCorrupt     ErrorCode = "SESSION_CORRUPT"
	CodeInternal           ErrorCode = "INTERNAL_ERROR"
	CodeProviderError      ErrorCode = "PROVIDER_ERROR"
	CodeToolError          ErrorCode = "TOOL_ERROR"
	CodeConflict           ErrorCode = "CONFLICT"
	// CodeUnsupported: the runtime cannot do what the command asks (a
	// third-party agent that offers no modes, models or mid-turn steer).
	// Shard's additive code (docs/protocol.md §8), not in the contract's
	// registry that Codes lists.
	CodeUnsupported ErrorCode = "UNSUPPORTED"
	// CodeNodeUnavailable: in a cluster, the command names an agent (or,
	// in agent.create, a node) of another node that this node cannot
	// reach now: declared dead, not answering, or its connection lost.
	// The error's data is {"node": <name>}; a retry may succeed once the
	// node is back. Shard's additive code (docs/protocol.md §8, §13
	// "Agents of other nodes").
	CodeNodeUnavailable ErrorCode = "NODE_UNAVAILABLE"
)

// Codes lists every code of the contract's registry, in its order
// (docs/protocol.md §8); UNSUPPORTED, Shard's own, is not among them.
func Codes() []ErrorCode {
	return []ErrorCode{
		CodeInvalidRequest, CodeNotFound, CodeNotAttached, CodePermissionDenied,
		CodeProtocolError, CodeTimeout, CodeRuntimeStartFailed, CodeSessionCorrupt,
		CodeInternal, CodeProviderError, CodeToolError, CodeConflict,
	}
}

// Error is a protocol error: the `{code, message, data?}` object carried by a
// failed response (docs/protocol.md §9.3). It is also a Go error, so code
// travels with the error value through wrapping and is recovered with CodeOf.
//
// An Error built by Errorf with a %w verb also keeps the wrapped error as its
// cause, so errors.Is and errors.As see through it (Unwrap). The cause is
// local to the process: it is never encoded (only code, message and data go
// on the wire), and an Error decoded from the wire has none.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	Data    any       `json:"data,omitempty"`

	// cause is what Errorf's %w operands wrap: the fmt.Errorf value, whose
	// own Unwrap yields them. nil without %w. Unexported, so never marshalled.
	cause error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the errors wrapped with %w by Errorf (nil when there are
// none), so the chain below a protocol error stays inspectable.
func (e *Error) Unwrap() error { return e.cause }

// Errorf builds an *Error with a formatted message. It formats like
// fmt.Errorf: a %w operand is printed as %v would print it and is kept as the
// Error's cause (see Unwrap), so wrapping with %w keeps the chain where %v
// would drop it. The message text is the same either way.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Message: err.Error()}
	if wrapsAny(err) {
		e.cause = err
	}
	return e
}

// wrapsAny reports whether err (a fmt.Errorf result) wraps anything.
func wrapsAny(err error) bool {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return u.Unwrap() != nil
	case interface{ Unwrap() []error }:
		return len(u.Unwrap()) > 0
	}
	return false
}

// CodeOf returns the protocol code carried anywhere in err's chain, or
// CodeInternal when err carries none. A nil error has no code ("").
func CodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternal
}

// AsError converts any error into the wire error object. An error without a
// protocol code becomes INTERNAL_ERROR; its message is kept because Shard's
// own errors never carry prompts, tokens or task text. A nil err (a bug in
// the caller) still yields a well-formed INTERNAL_ERROR.
func AsError(err error) *Error {
	if err == nil {
		return &Error{Code: CodeInternal, Message: "unknown error"}
	}
	var pe *Error
	if errors.As(err, &pe) {
		if pe.Message == "" || err.Error() == pe.Error() {
			return pe
		}
		return &Error{Code: pe.Code, Message: pe.Message, Data: pe.Data}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
