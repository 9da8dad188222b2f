package protocol

import (
	"errors"
	"fmt"
)

// ErrHandshake is wrapped by every error of the handshake parsers
// (handshake.go): a Host, Origin, Sec-WebSocket-Protocol, Authorization or
// forwarded header that is not in its canonical form.
var ErrHandshake = errors.New("protocol: malformed handshake header")

// ErrorCode is a registered protocol error code (spec §8). Codes are stable
// strings on the wire; new ones are added, never reused.
type ErrorCode string

// The error-code registry of spec §8.
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
)

// Codes lists every registered code in spec order.
func Codes() []ErrorCode {
	return []ErrorCode{
		CodeInvalidRequest, CodeNotFound, CodeNotAttached, CodePermissionDenied,
		CodeProtocolError, CodeTimeout, CodeRuntimeStartFailed, CodeSessionCorrupt,
		CodeInternal, CodeProviderError, CodeToolError, CodeConflict,
	}
}

// Error is a protocol error: the `{code, message, data?}` object carried by a
// failed response (spec §9.3). It is also a Go error, so code travels with the
// error value through wrapping and is recovered with CodeOf.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	Data    any       `json:"data,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
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
