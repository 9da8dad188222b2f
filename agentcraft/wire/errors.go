package wire

import (
	"errors"
	"fmt"
)

// Code tells apart the ways a frame can fail to decode, so that a server
// and its tests can act on the kind of failure without reading the text.
// The dialect's error message has no code field; the code stays on this
// side of the wire and the text of the error goes into Error.Message.
type Code string

// The decode failure codes.
const (
	// CodeBadJSON: the frame is not one JSON object (syntax error,
	// trailing data, an array or a scalar).
	CodeBadJSON Code = "bad_json"
	// CodeBadVersion: "v" (or hello's "protocol") is not Version.
	CodeBadVersion Code = "bad_version"
	// CodeUnknownType: "type" names no message of this direction.
	CodeUnknownType Code = "unknown_type"
	// CodeMissingField: a required field is absent or null.
	CodeMissingField Code = "missing_field"
	// CodeWrongType: a field holds the wrong JSON type.
	CodeWrongType Code = "wrong_type"
	// CodeBadEnum: an enum field holds a value the dialect does not define.
	CodeBadEnum Code = "bad_enum"
)

// The sentinels a *DecodeError matches with errors.Is, one per Code, so
// that callers test the kind of failure without reading its text.
var (
	// ErrBadJSON is CodeBadJSON's sentinel.
	ErrBadJSON = errors.New("agentcraft wire: not a JSON object")
	// ErrBadVersion is CodeBadVersion's sentinel.
	ErrBadVersion = errors.New("agentcraft wire: unsupported version")
	// ErrUnknownType is CodeUnknownType's sentinel.
	ErrUnknownType = errors.New("agentcraft wire: unknown message type")
	// ErrMissingField is CodeMissingField's sentinel.
	ErrMissingField = errors.New("agentcraft wire: missing required field")
	// ErrWrongType is CodeWrongType's sentinel.
	ErrWrongType = errors.New("agentcraft wire: wrong field type")
	// ErrBadEnum is CodeBadEnum's sentinel.
	ErrBadEnum = errors.New("agentcraft wire: bad enum value")
)

// DecodeError is why a frame did not decode. It carries what a server
// needs to answer: the code, the message type and field when known, and
// the frame's correlation id (ID) when it could be read, for Error.Re and
// the failed Ack.
type DecodeError struct {
	// Code is what was wrong.
	Code Code
	// Type is the frame's "type" when it could be read.
	Type Type
	// Field is the JSON path of the field at fault, e.g. "task.deps[0]".
	Field string
	// ID is the frame's "id" when it could be read, else "".
	ID string
	// Detail is a short human-readable addition (the bad value, ...).
	Detail string
	// Err is the underlying encoding/json error, if any.
	Err error
}

// Error renders the failure; it is what Replies puts in the error message.
func (e *DecodeError) Error() string {
	msg := sentinel(e.Code).Error()
	if e.Type != "" {
		msg += " in " + string(e.Type)
	}
	if e.Field != "" {
		msg += fmt.Sprintf(" (field %q)", e.Field)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the code's sentinel and the underlying error, so that
// errors.Is(err, ErrMissingField) and errors.As on a json error both work.
func (e *DecodeError) Unwrap() []error {
	if e.Err != nil {
		return []error{sentinel(e.Code), e.Err}
	}
	return []error{sentinel(e.Code)}
}

// sentinel returns the sentinel of c.
func sentinel(c Code) error {
	switch c {
	case CodeBadVersion:
		return ErrBadVersion
	case CodeUnknownType:
		return ErrUnknownType
	case CodeMissingField:
		return ErrMissingField
	case CodeWrongType:
		return ErrWrongType
	case CodeBadEnum:
		return ErrBadEnum
	}
	return ErrBadJSON
}

// CodeOf returns the Code of a decode failure anywhere in err's chain, or
// "" if err is not one.
func CodeOf(err error) Code {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Code
	}
	return ""
}

// Replies returns what the server sends back for a client message that was
// invalid (a *DecodeError, whose ID is used) or failed: an error message,
// then, when the message had an id, a failed ack.
func (e *DecodeError) Replies() []ServerMessage { return Failure(e.ID, e) }

// Failure returns the replies to the client message whose id is id (""
// if it had none) when it was invalid or failed with err: an Error with
// Re = id, then, if id is set, an Ack{Re: id, OK: false, Error: ...}.
// Choice: both are sent, error first, whenever the message had an id; the
// dialect says invalid messages get error "and a failed ack if they had
// an id", and that error is "also sent as ack.ok=false".
func Failure(id string, err error) []ServerMessage {
	msg := err.Error()
	out := []ServerMessage{Error{Message: msg, Re: id}}
	if id != "" {
		out = append(out, Ack{Re: id, OK: false, Error: msg})
	}
	return out
}
