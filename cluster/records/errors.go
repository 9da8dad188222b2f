package records

import (
	"errors"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// Sentinels for errors.Is. Every error of this package that has one of
// these meanings wraps the sentinel and also carries the protocol code a
// command would answer with (protocol.CodeOf), so a caller can both branch
// on the condition and pass the error to a client unchanged.
var (
	// ErrNotFound means the key holds no record (never written, or
	// deleted). Code NOT_FOUND.
	ErrNotFound = errors.New("records: not found")
	// ErrExists means Create found the key already holding a record.
	// Code CONFLICT: the protocol has no separate "already exists".
	ErrExists = errors.New("records: already exists")
	// ErrConflict means a compare-and-set lost: the record's revision is
	// no longer the one the caller read, because another writer (on any
	// node) wrote it in between. Nothing was written; re-read and decide
	// again. Code CONFLICT.
	ErrConflict = errors.New("records: revision conflict")
	// ErrUnavailable means the cluster did not acknowledge a write (or
	// answer a read) before the context ended: no stream leader was
	// reachable from this connection, which is what a node cut off from
	// the majority sees (no quorum); such a node's write is never
	// committed. In general the outcome of an unacknowledged write is
	// unknown (its acknowledgement may have been lost with the
	// connection after it committed), so a caller re-reads before it
	// decides again, and never assumes either way. Code TIMEOUT.
	ErrUnavailable = errors.New("records: cluster unavailable (no quorum)")
	// ErrDecode means stored bytes are not a record this build can read:
	// bad JSON, an unknown field, a wrong kind, or a version it does not
	// know. Nothing is written over such a record. Code INTERNAL_ERROR.
	ErrDecode = errors.New("records: undecodable record")
	// ErrInvalid means a key or record failed validation before anything
	// was sent. Code INVALID_REQUEST.
	ErrInvalid = errors.New("records: invalid")
)

// codeOf is the protocol code each sentinel carries.
func codeOf(sentinel error) protocol.ErrorCode {
	switch sentinel {
	case ErrNotFound:
		return protocol.CodeNotFound
	case ErrExists, ErrConflict:
		return protocol.CodeConflict
	case ErrUnavailable:
		return protocol.CodeTimeout
	case ErrInvalid:
		return protocol.CodeInvalidRequest
	}
	return protocol.CodeInternal
}

// fail builds this package's error: a protocol error with the sentinel's
// code whose chain holds the sentinel and, when given, the cause (the
// nats error), both wrapped with %w.
func fail(sentinel error, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		return protocol.Errorf(codeOf(sentinel), "%s: %w: %w", msg, sentinel, cause)
	}
	return protocol.Errorf(codeOf(sentinel), "%s: %w", msg, sentinel)
}
