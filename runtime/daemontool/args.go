package daemontool

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Arguments come from a model's JSON (numbers as float64) or from a sim
// directive (numbers as json.Number). Absent and null are the same.

// optString returns args[key] as a string, "" when absent.
func optString(args map[string]any, key string) (string, error) {
	switch v := args[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("argument %q must be a string", key)
}

// readStrings reads optional string arguments: pairs of a destination and the
// argument's name.
func readStrings(args map[string]any, pairs ...any) error {
	for i := 0; i < len(pairs); i += 2 {
		v, err := optString(args, pairs[i+1].(string))
		if err != nil {
			return err
		}
		*pairs[i].(*string) = v
	}
	return nil
}

// stringList returns args[key] as a list of strings; a single string is a
// list of one.
func stringList(args map[string]any, key string) ([]string, error) {
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []string:
		return v, nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("argument %q: element %d must be a string", key, i)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument %q must be a list of strings", key)
}

// optSeconds returns args[key] as a number of seconds, nil when absent. A
// numeric string is accepted.
func optSeconds(args map[string]any, key string) (*float64, error) {
	var f float64
	var err error
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case float64:
		f = v
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case json.Number:
		f, err = v.Float64()
	case string:
		f, err = strconv.ParseFloat(v, 64)
	default:
		err = errors.New("not a number")
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("argument %q must be a number of seconds", key)
	}
	return &f, nil
}

// optBool returns args[key] as a bool, false when absent.
func optBool(args map[string]any, key string) (bool, error) {
	switch v := args[key].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	}
	return false, fmt.Errorf("argument %q must be true or false", key)
}

// optInt returns args[key] as an integer, 0 when absent. A model's JSON
// gives float64, a sim directive json.Number; a fraction is refused.
func optInt(args map[string]any, key string) (int, error) {
	if args[key] == nil {
		return 0, nil
	}
	n, ok := toInt(args[key])
	if !ok {
		return 0, fmt.Errorf("argument %q must be an integer", key)
	}
	return n, nil
}

// optIntPtr is optInt that tells absent (nil) from 0.
func optIntPtr(args map[string]any, key string) (*int, error) {
	if args[key] == nil {
		return nil, nil
	}
	n, err := optInt(args, key)
	return &n, err
}

// intList returns args[key] as a list of integers; a single number is a
// list of one.
func intList(args map[string]any, key string) ([]int, error) {
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]int, len(v))
		for i, e := range v {
			n, ok := toInt(e)
			if !ok {
				return nil, fmt.Errorf("argument %q: element %d must be an integer", key, i)
			}
			out[i] = n
		}
		return out, nil
	case []int:
		return v, nil
	}
	if n, ok := toInt(args[key]); ok {
		return []int{n}, nil
	}
	return nil, fmt.Errorf("argument %q must be a list of integers", key)
}

// toInt converts a JSON number (float64 or json.Number) or an int to an
// int, refusing fractions and what does not fit in 32 bits.
func toInt(v any) (int, bool) {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case float64:
		f = n
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 32)
		if err == nil {
			return int(i), true
		}
		if f, err = n.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}
