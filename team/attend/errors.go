package attend

import (
	"errors"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// Errors of a Watcher's commands.
var (
	// ErrAnswered is matched (errors.Is) by an *AnsweredError: someone
	// else's answer won, or the request closed another way first.
	ErrAnswered = errors.New("attend: the request was resolved first by another answer")
	// ErrUnknownRequest: the Watcher never saw the request open (or forgot
	// it long after it closed); the error carries NOT_FOUND.
	ErrUnknownRequest = errors.New("attend: no such open request")
	// ErrDetached: the connection was lost before the command was
	// answered, or before the answer's outcome was known. The Watcher
	// attaches again by itself; whether a lost answer took effect shows in
	// the Requests and Resolved of the next sync, so the caller may answer
	// again.
	ErrDetached = errors.New("attend: detached from the agent")
	// ErrStopped: the Watcher has ended (its context ended, or the agent
	// is gone).
	ErrStopped = errors.New("attend: watcher stopped")
	// ErrInvalidOptions: Watch was given incomplete Options.
	ErrInvalidOptions = errors.New("attend: invalid options")
)

// AnsweredError is what AnswerPermission and AnswerQuestion return when
// the request was resolved by something other than this Watcher's answer:
// another client answered first (first response wins, docs/protocol.md
// §6.3), the headless policy did, or the request was withdrawn. It matches
// ErrAnswered, and protocol.CodeOf gives CONFLICT.
type AnsweredError struct {
	// Resolved is how the request was closed, as reported to Events.
	Resolved Resolved
}

// Error names the request and who resolved it.
func (e *AnsweredError) Error() string {
	by := e.Resolved.Source
	if by == "" {
		by = "an unknown answer"
	}
	return fmt.Sprintf("attend: request %s of %s was resolved first by %s", e.Resolved.RequestID, e.Resolved.AgentID, by)
}

// Unwrap gives ErrAnswered and the CONFLICT protocol error.
func (e *AnsweredError) Unwrap() []error {
	return []error{ErrAnswered, protocol.Errorf(protocol.CodeConflict, "request %s is no longer open", e.Resolved.RequestID)}
}

// unknownRequest is ErrUnknownRequest for id, with NOT_FOUND.
func unknownRequest(id string) error {
	return fmt.Errorf("%w %q: %w", ErrUnknownRequest, id, protocol.Errorf(protocol.CodeNotFound, "no open request %s", id))
}

// invalid is an INVALID_REQUEST error about an answer.
func invalid(format string, args ...any) error {
	return protocol.Errorf(protocol.CodeInvalidRequest, format, args...)
}
