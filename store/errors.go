package store

import "errors"

// Sentinels for errors.Is. Errors from this package wrap one of them when
// the condition applies, and otherwise wrap the underlying bbolt or OS error.
var (
	// ErrLocked means another process holds the database's file lock and
	// did not release it within Options.Timeout.
	ErrLocked = errors.New("store: database is locked by another process")
	// ErrNotFound means the requested record does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrExists means a record with that key already exists.
	ErrExists = errors.New("store: already exists")
	// ErrInvalid means a record or argument failed validation, such as an
	// Agent without an id.
	ErrInvalid = errors.New("store: invalid")
	// ErrSchema means the file's schema is not one this build can use: a
	// newer schema version, or a missing bucket.
	ErrSchema = errors.New("store: unsupported schema")
	// ErrConflict means a compare-and-set found a record in another state
	// than the caller expected; nothing was written.
	ErrConflict = errors.New("store: state conflict")
)

// sentinels lists every sentinel, for wrapOp.
func sentinels() []error {
	return []error{ErrLocked, ErrNotFound, ErrExists, ErrInvalid, ErrSchema, ErrConflict}
}
