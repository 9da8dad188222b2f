package tools

import "errors"

// ErrInvalidArgs is wrapped by every error a Tool's Check returns: the
// arguments do not fit the tool's schema. The runtime turns it into a tool
// error result without asking for permission.
var ErrInvalidArgs = errors.New("tools: invalid arguments")
