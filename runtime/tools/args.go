package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Argument accessors. Arguments arrive decoded from JSON (numbers as
// float64); values built in Go (int, int64) and json.Number are accepted
// too, and so are numbers and booleans sent as strings ("20", "true"),
// which real models produce now and then. Unknown arguments are ignored.

// stringArg returns the required string argument key.
func stringArg(args map[string]any, key string) (string, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return "", fmt.Errorf("%w: %q is required", ErrInvalidArgs, key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q must be a string", ErrInvalidArgs, key)
	}
	return s, nil
}

// nonEmptyArg returns the required, non-empty string argument key.
func nonEmptyArg(args map[string]any, key string) (string, error) {
	s, err := stringArg(args, key)
	if err == nil && s == "" {
		err = fmt.Errorf("%w: %q must not be empty", ErrInvalidArgs, key)
	}
	return s, err
}

// optStringArg returns the optional string argument key, or def.
func optStringArg(args map[string]any, key, def string) (string, error) {
	if v, ok := args[key]; !ok || v == nil {
		return def, nil
	}
	s, err := stringArg(args, key)
	if err == nil && s == "" {
		s = def
	}
	return s, err
}

// optIntArg returns the optional integer argument key, or def; a given
// value must be at least lo.
func optIntArg(args map[string]any, key string, def, lo int64) (int64, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return def, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, fmt.Errorf("%w: %q must be an integer", ErrInvalidArgs, key)
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(n, 64); err != nil {
			return 0, fmt.Errorf("%w: %q must be an integer", ErrInvalidArgs, key)
		}
	default:
		return 0, fmt.Errorf("%w: %q must be an integer", ErrInvalidArgs, key)
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%w: %q must be an integer", ErrInvalidArgs, key)
	}
	if int64(f) < lo {
		return 0, fmt.Errorf("%w: %q must be at least %d", ErrInvalidArgs, key, lo)
	}
	return int64(f), nil
}

// optBoolArg returns the optional boolean argument key, or false.
func optBoolArg(args map[string]any, key string) (bool, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return false, nil
	}
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		if p, err := strconv.ParseBool(b); err == nil {
			return p, nil
		}
	}
	return false, fmt.Errorf("%w: %q must be a boolean", ErrInvalidArgs, key)
}
