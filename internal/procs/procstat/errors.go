package procstat

import "errors"

// ErrMalformed is returned, wrapped, for a stat line that does not have
// the shape proc(5) gives it: no parenthesised command name, too few
// fields, or a field that is not a number.
var ErrMalformed = errors.New("procstat: malformed stat line")
