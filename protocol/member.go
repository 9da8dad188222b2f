package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotObject is returned by SetMember and DeleteMember for a record that
// is not a JSON object.
var ErrNotObject = errors.New("protocol: record is not a JSON object")

// SetMember returns rec, a JSON object, with its top-level member key set
// to value (valid JSON), without decoding the rest (the hot path stays
// raw): every member named key, or key but for case, is removed and
// `"key":value` is appended as the last member. The variants go too because
// encoding/json decoding into a struct matches keys case-insensitively
// ("ID" sets the id too), and DecodeCommand refuses a command naming both
// (strict.go): a variant left in the record would either win over value or
// get the rewritten command refused. Last, for decoders that keep the last
// of two equal keys. Members and their
// values are copied byte for byte; whitespace between top-level members
// is dropped. rec is not modified.
//
// The daemon uses it to rewrite a client command for the runtime (the id
// the daemon chose, the source of an answer) after DecodeCommand validated
// it: the command is decoded once.
func SetMember(rec []byte, key string, value []byte) ([]byte, error) {
	if !json.Valid(value) {
		return nil, fmt.Errorf("protocol: set member %q: value is not valid JSON", key)
	}
	return rewriteMember(rec, key, value, true)
}

// DeleteMember returns rec, a JSON object, without any top-level member
// named key or key but for case (see SetMember), copying the rest byte for byte (whitespace between top-level
// members is dropped). rec is not modified; when key is absent rec itself
// is returned.
func DeleteMember(rec []byte, key string) ([]byte, error) {
	return rewriteMember(rec, key, nil, false)
}

func rewriteMember(rec []byte, key string, value []byte, set bool) ([]byte, error) {
	open, end, members, err := scanObject(rec)
	if err != nil {
		return nil, fmt.Errorf("protocol: rewrite member %q: %w", key, err)
	}
	kept, size := members[:0:0], 0
	for _, m := range members {
		if !m.named(rec, key) {
			kept = append(kept, m)
			size += m.end - m.start + 1
		}
	}
	if !set && len(kept) == len(members) {
		return rec, nil
	}
	var qkey []byte
	if set {
		qkey = MustMarshal(key)
		size += len(qkey) + len(value) + 2
	}
	out := make([]byte, 0, open+1+size+len(rec)-end)
	out = append(out, rec[:open+1]...)
	for i, m := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, rec[m.start:m.end]...)
	}
	if set {
		if len(kept) > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, qkey...), ':'), value...)
	}
	return append(out, rec[end-1:]...), nil // "}" and what follows it
}

// memberSpan is one top-level member of an object: rec[start:end] is
// `"key":value` (with any whitespace around the colon), rec[start+1:keyEnd]
// the key as written, without its quotes.
type memberSpan struct{ start, keyEnd, end int }

// named reports whether m's key, unescaped, is key but for case (as
// encoding/json and strict.go compare struct keys).
func (m memberSpan) named(rec []byte, key string) bool {
	raw := rec[m.start+1 : m.keyEnd]
	if plain(raw) && plain([]byte(key)) {
		return bytes.EqualFold(raw, []byte(key))
	}
	// An escaped or non-ASCII key (rare): decode just the key, so that it
	// compares as encoding/json sees it (escapes, invalid UTF-8).
	var k string
	return json.Unmarshal(rec[m.start:m.keyEnd+1], &k) == nil && foldKey(k) == foldKey(key)
}

// plain reports whether a key as written is ASCII without escapes: then
// its bytes are the key.
func plain(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

var errSyntax = errors.New("malformed JSON")

// scanObject finds the top-level members of rec, a JSON object with
// optional surrounding whitespace: open is the offset of its '{', end the
// offset just past its '}'. It checks the structure it walks (strings,
// nesting, separators), not every literal: exact for valid JSON, and an
// error rather than a panic for what it can tell is not.
func scanObject(rec []byte) (open, end int, members []memberSpan, err error) {
	i := skipSpace(rec, 0)
	if i >= len(rec) || rec[i] != '{' {
		return 0, 0, nil, ErrNotObject
	}
	open = i
	i = skipSpace(rec, i+1)
	if i < len(rec) && rec[i] == '}' {
		i++
	} else {
		for {
			if i >= len(rec) || rec[i] != '"' {
				return 0, 0, nil, errSyntax
			}
			m := memberSpan{start: i}
			if i, err = skipString(rec, i); err != nil {
				return 0, 0, nil, err
			}
			m.keyEnd = i - 1
			i = skipSpace(rec, i)
			if i >= len(rec) || rec[i] != ':' {
				return 0, 0, nil, errSyntax
			}
			if i, err = skipValue(rec, skipSpace(rec, i+1)); err != nil {
				return 0, 0, nil, err
			}
			m.end = i
			members = append(members, m)
			i = skipSpace(rec, i)
			if i >= len(rec) {
				return 0, 0, nil, errSyntax
			}
			if rec[i] == '}' {
				i++
				break
			}
			if rec[i] != ',' {
				return 0, 0, nil, errSyntax
			}
			i = skipSpace(rec, i+1)
		}
	}
	if skipSpace(rec, i) != len(rec) {
		return 0, 0, nil, errSyntax // something after the object
	}
	return open, i, members, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just past the string starting at b[i] ('"').
func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errSyntax
}

// skipValue returns the offset just past the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errSyntax
	case ',', '}', ']', ':':
		return 0, errSyntax
	}
	start := i // a number or a literal
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			if i == start {
				return 0, errSyntax
			}
			return i, nil
		}
		i++
	}
	return i, nil
}
