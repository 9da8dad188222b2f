package treediff

import "errors"

// Errors of this package. Parse wraps ErrMalformed; Workspace returns
// protocol errors (protocol.CodeOf gives their code) that wrap these or the
// runner's error.
var (
	// ErrMalformed marks input that is not the unified diff git produces: a
	// hunk header that does not parse, a hunk shorter than its header says,
	// or a file header whose paths cannot be found. The Result returned with
	// it is still usable (best effort).
	ErrMalformed = errors.New("diff: malformed unified diff")

	// ErrBadBase is returned by Workspace when base is empty, looks like an
	// option, or does not name a commit in the repository.
	ErrBadBase = errors.New("diff: base is not a commit")
)
