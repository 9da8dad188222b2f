package refagent

import "errors"

// ErrInvalidOptions is returned by Run, wrapped with the offending field,
// when Options cannot be used.
var ErrInvalidOptions = errors.New("agent: invalid options")

// errTurnAborted ends a provider call or tool run when the current turn was
// aborted (by `abort`, by shutdown, or because Run's context is done). It
// never reaches the wire: the turn simply ends with turn_end.
var errTurnAborted = errors.New("agent: turn aborted")
