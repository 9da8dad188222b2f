package records

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Version is the record format this build writes and reads. A change an
// older build could not read faithfully (a field it would drop on
// rewrite is one, since its decoder refuses unknown fields) is a new
// version; a build refuses a record of a version it does not know rather
// than overwrite it.
const Version = 1

// Record is the set of record kinds the layer stores.
type Record interface {
	AgentEntry | JobRecord | RunRecord | AliasEntry | ClaimEntry
}

// validator is what every *T of a Record kind is: its validation, run
// before encoding and after decoding, so neither side trusts the other.
type validator interface{ validate() error }

// envelope is what a value in a bucket is: the format version, the kind
// (so a record written to the wrong bucket is refused, not misread) and
// the record itself.
type envelope struct {
	V    int             `json:"v"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// kindOf names the kind of T in the envelope.
func kindOf[T Record]() string {
	var zero T
	switch any(zero).(type) {
	case AgentEntry:
		return "agent"
	case JobRecord:
		return "job"
	case RunRecord:
		return "run"
	case AliasEntry:
		return "alias"
	case ClaimEntry:
		return "claim"
	}
	panic("records: unknown kind") // unreachable: Record lists the kinds
}

// encode validates v and returns its stored bytes.
func encode[T Record](v *T) ([]byte, error) {
	if err := any(v).(validator).validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", ErrInvalid, kindOf[T](), err)
	}
	return json.Marshal(envelope{V: Version, Kind: kindOf[T](), Data: data})
}

// decode reads stored bytes strictly: one JSON object with no unknown
// field, no trailing data, this build's version, the expected kind, and a
// record that passes validation. Anything else wraps ErrDecode, so the
// caller never acts on (or rewrites) a record it did not fully understand.
func decode[T Record](raw []byte) (T, error) {
	var zero T
	var env envelope
	if err := strictUnmarshal(raw, &env); err != nil {
		return zero, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if env.V != Version {
		return zero, fmt.Errorf("%w: version %d (this build reads %d)", ErrDecode, env.V, Version)
	}
	if env.Kind != kindOf[T]() {
		return zero, fmt.Errorf("%w: kind %q where %q belongs", ErrDecode, env.Kind, kindOf[T]())
	}
	var v T
	if err := strictUnmarshal(env.Data, &v); err != nil {
		return zero, fmt.Errorf("%w: %s: %w", ErrDecode, env.Kind, err)
	}
	if err := any(&v).(validator).validate(); err != nil {
		return zero, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return v, nil
}

// strictUnmarshal decodes exactly one JSON value into v, refusing unknown
// fields and anything after the value.
func strictUnmarshal(raw []byte, v any) error {
	if len(raw) == 0 {
		return fmt.Errorf("empty value")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the value")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); err == nil {
		return fmt.Errorf("data after the value")
	}
	return nil
}

// validToken reports whether s can be one token of a key: non-empty,
// letters, digits, '-', '_' and '=' only. Dots separate tokens, and the
// wildcards '*' and '>' and the rest are not allowed in a key by the
// server; ids (agent-…, job-…, run-…) are tokens as they are.
func validToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '=':
		default:
			return false
		}
	}
	return true
}

// validKey reports whether key is dot-separated valid tokens.
func validKey(key string) bool {
	if key == "" {
		return false
	}
	start := 0
	for i := 0; i <= len(key); i++ {
		if i == len(key) || key[i] == '.' {
			if !validToken(key[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// encodeToken makes any string one valid token (base64url, no padding).
func encodeToken(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
