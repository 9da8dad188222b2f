package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
)

// Configuration errors, returned by New.
var (
	// ErrUnknownProvider: Config.Name is neither "openai" nor "anthropic".
	ErrUnknownProvider = errors.New("provider: unknown provider")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("provider: invalid config")
)

// Stream failures, found with errors.Is in the PROVIDER_ERROR a Stream
// returns.
var (
	// ErrStreamClosed: Next was called after (or while) Close.
	ErrStreamClosed = errors.New("provider: stream closed")
	// ErrTruncated: the service's stream ended (the connection closed)
	// before the answer was complete.
	ErrTruncated = errors.New("provider: stream ended unexpectedly")
	// ErrInvalidRequest: the Request cannot be sent (an unknown reasoning
	// level, a tool schema that is not a JSON object).
	ErrInvalidRequest = errors.New("provider: invalid request")
)

// maxServerMessage caps how much of a service's error message is kept.
const maxServerMessage = 500

// providerError is the PROVIDER_ERROR every failure of this package is. It unwraps to
// the *protocol.Error (so protocol.CodeOf and protocol.AsError see the code
// and message) and to its cause, when there is one.
type providerError struct {
	pe     *protocol.Error
	status int   // HTTP status of the failed request; 0 when none
	cause  error // nil for service answers (their SDK errors hold the request)
}

func (e *providerError) Error() string { return e.pe.Error() }

func (e *providerError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.pe}
	}
	return []error{e.pe, e.cause}
}

// HTTPStatus returns the HTTP status code of the service answer that caused
// err (for example 429 or 500), or 0 when err did not come from one.
func HTTPStatus(err error) int {
	var e *providerError
	if errors.As(err, &e) {
		return e.status
	}
	return 0
}

// failure builds a PROVIDER_ERROR whose message is "<name>: <what>". what
// passes through redact first.
func failure(name, apiKey string, status int, cause error, format string, args ...any) error {
	msg := redact(fmt.Sprintf(format, args...), apiKey)
	return &providerError{
		pe:     protocol.Errorf(protocol.CodeProviderError, "%s: %s", name, msg),
		status: status,
		cause:  cause,
	}
}

// apiFailure describes a failed service answer: the HTTP status in words and
// the service's own message, if it sent one.
func apiFailure(name, apiKey string, status int, kind, message string) error {
	var what string
	switch {
	case status == http.StatusTooManyRequests:
		what = "rate limited (429)"
	case status == http.StatusUnauthorized:
		what = "authentication failed (401)"
	case status == http.StatusForbidden:
		what = "permission denied (403)"
	case status == 529:
		what = "overloaded (529)"
	case status >= 400:
		what = fmt.Sprintf("HTTP %d", status)
		if text := http.StatusText(status); text != "" {
			what += " " + text
		}
	default:
		// An error event inside a 200 stream.
		what = "error while streaming"
		status = 0
	}
	detail := strings.TrimSpace(message)
	if kind != "" && !strings.Contains(detail, kind) {
		if detail == "" {
			detail = kind
		} else {
			detail = kind + ": " + detail
		}
	}
	if detail != "" {
		what += ": " + truncate(detail, maxServerMessage)
	}
	return failure(name, apiKey, status, nil, "%s", what)
}

// classify turns an error of the SDK or of a stream into a PROVIDER_ERROR.
// ctx is the caller's context: when it is done, the failure is reported as a
// cancellation whatever the transport said. apiErr extracts a service answer
// (status, error type, message) from an SDK error.
func classify(ctx context.Context, name, apiKey string, err error,
	apiErr func(error) (status int, kind, message string, ok bool)) error {
	var pe *providerError
	switch {
	case errors.As(err, &pe):
		return err
	case errors.Is(err, ErrStreamClosed):
		return failure(name, apiKey, 0, ErrStreamClosed, "stream closed")
	case ctx.Err() != nil:
		cause := context.Cause(ctx)
		if errors.Is(cause, context.DeadlineExceeded) {
			return failure(name, apiKey, 0, cause, "request timed out")
		}
		return failure(name, apiKey, 0, cause, "request cancelled")
	}
	if status, kind, message, ok := apiErr(err); ok {
		return apiFailure(name, apiKey, status, kind, message)
	}
	if errors.Is(err, ErrTruncated) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return failure(name, apiKey, 0, ErrTruncated, "stream ended unexpectedly")
	}
	return failure(name, apiKey, 0, err, "request failed: %s", err.Error())
}

// redact removes the API key from s. Keys shorter than 8 bytes are not
// searched for: they are not secrets worth mangling messages over.
func redact(s, apiKey string) string {
	if len(apiKey) < 8 {
		return s
	}
	return strings.ReplaceAll(s, apiKey, "[redacted]")
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
