package protocol

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Strict input rules for client commands (docs/protocol.md §2.3).
// encoding/json is lenient where a client could smuggle a second meaning past
// a check: it replaces invalid UTF-8 and lone surrogate escapes with U+FFFD,
// and of two equal keys it keeps the last, so that a proxy, a log or a
// validator reading the first sees another command than the one executed. A
// command must therefore be UTF-8 (docs/protocol.md §2.3: "UTF-8
// throughout"), spell every character it escapes as a valid UTF-16 sequence,
// and name each key of each object once. In the command object itself, keys
// equal but for case are duplicates too: its members are struct fields, which
// encoding/json matches case-insensitively ({"type":…,"TYPE":…} is two
// types). Deeper down they are left alone: maps (labels, tool input) may hold
// both.

// checkStrict reports the first violation of the rules above in rec, which
// must be syntactically valid JSON, as an INVALID_REQUEST naming the key
// (as a dotted path of the enclosing object keys).
func checkStrict(rec []byte) error {
	if !utf8.Valid(rec) {
		return Errorf(CodeInvalidRequest, "message is not valid UTF-8")
	}
	s := strictScanner{rec: rec}
	return s.run()
}

// strictFrame is one open object or array of the scan.
type strictFrame struct {
	object    bool
	fold      bool     // object: keys compare case-insensitively
	expectKey bool     // object: the next string is a key
	key       string   // object: the key whose value is being scanned
	keys      []string // object: keys seen, while few
	set       map[string]struct{}
}

// seen records key in f and reports whether it was there already.
func (f *strictFrame) seen(key string) bool {
	if f.fold {
		key = foldKey(key)
	}
	if f.set != nil {
		if _, ok := f.set[key]; ok {
			return true
		}
		f.set[key] = struct{}{}
		return false
	}
	for _, k := range f.keys {
		if k == key {
			return true
		}
	}
	f.keys = append(f.keys, key)
	if len(f.keys) > 16 { // many keys: a set from now on
		f.set = make(map[string]struct{}, 2*len(f.keys))
		for _, k := range f.keys {
			f.set[k] = struct{}{}
		}
		f.keys = nil
	}
	return false
}

type strictScanner struct {
	rec   []byte
	stack []strictFrame
}

// path names the key being scanned: the dotted keys of the open objects.
func (s *strictScanner) path(last string) string {
	var parts []string
	for _, f := range s.stack {
		if f.object && !f.expectKey && f.key != "" {
			parts = append(parts, f.key)
		}
	}
	if last != "" {
		parts = append(parts, last)
	}
	for i, p := range parts {
		// Keys are the client's: an error names them, but never sends
		// megabytes of one back.
		if len(p) > maxPathKey {
			parts[i] = strings.ToValidUTF8(p[:maxPathKey], "") + "…"
		}
	}
	return strings.Join(parts, ".")
}

// maxPathKey bounds each key of a path quoted in an error message.
const maxPathKey = MaxNameLen

func (s *strictScanner) run() error {
	rec := s.rec
	for i := 0; i < len(rec); i++ {
		switch c := rec[i]; c {
		case '{':
			s.stack = append(s.stack, strictFrame{object: true, fold: len(s.stack) == 0, expectKey: true})
		case '[':
			s.stack = append(s.stack, strictFrame{})
		case '}', ']':
			if n := len(s.stack); n > 0 {
				s.stack = s.stack[:n-1]
			}
		case ',':
			if n := len(s.stack); n > 0 && s.stack[n-1].object {
				s.stack[n-1].expectKey = true
			}
		case '"':
			end, escaped, err := s.endOfString(i)
			if err != nil {
				return err
			}
			n := len(s.stack)
			if n > 0 && s.stack[n-1].object && s.stack[n-1].expectKey {
				raw := rec[i : end+1]
				key := string(raw[1 : len(raw)-1])
				if escaped {
					if json.Unmarshal(raw, &key) != nil {
						return Errorf(CodeInvalidRequest, "malformed key at offset %d", i)
					}
				}
				f := &s.stack[n-1]
				if f.seen(key) {
					return invalid(s.path(key), "duplicate key")
				}
				f.key, f.expectKey = key, false
			}
			i = end
		}
	}
	return nil
}

// endOfString returns the index of the closing quote of the string opening
// at rec[start], whether it has escapes, and an error for a \u escape that
// is not valid UTF-16 (a lone surrogate), which encoding/json would turn
// into U+FFFD.
func (s *strictScanner) endOfString(start int) (end int, escaped bool, err error) {
	rec := s.rec
	for i := start + 1; i < len(rec); i++ {
		switch rec[i] {
		case '"':
			return i, escaped, nil
		case '\\':
			escaped = true
			if i+1 < len(rec) && rec[i+1] == 'u' {
				r, ok := hex4(rec, i+2)
				switch {
				case !ok:
				case r >= 0xD800 && r <= 0xDBFF:
					low, ok := rune(0), false
					if i+7 < len(rec) && rec[i+6] == '\\' && rec[i+7] == 'u' {
						low, ok = hex4(rec, i+8)
					}
					if !ok || low < 0xDC00 || low > 0xDFFF {
						return 0, false, invalid(s.path(""), "invalid UTF-16 escape (lone surrogate)")
					}
					i += 11 // both escapes
					continue
				case r >= 0xDC00 && r <= 0xDFFF:
					return 0, false, invalid(s.path(""), "invalid UTF-16 escape (lone surrogate)")
				}
				i += 5
				continue
			}
			i++ // the escaped byte
		}
	}
	return len(rec), escaped, nil // unterminated: not valid JSON, not ours to report
}

// hex4 decodes the four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// foldKey maps key to one spelling for all the keys encoding/json matches
// to the same struct field: upper then lower case folds ſ with s and the
// Kelvin sign with k, as its case-insensitive match does.
func foldKey(key string) string { return strings.ToLower(strings.ToUpper(key)) }
