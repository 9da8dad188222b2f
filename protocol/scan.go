package protocol

import "bytes"

// The scanners below look at raw records on the relay's hot path (records
// stay raw: decoding every event the daemon passes on would cost more than
// everything else it does with it) without decoding them. Each scans its
// input once and allocates nothing; each is exact for the inputs its doc
// names and merely conservative (never panicking) for any other.

// ArrayOfObjects reports whether b, valid JSON, is a compact array (no
// whitespace outside strings) whose elements are all objects, an empty
// array included: then it is what encoding a slice of structs (such as
// []Message) with Marshal gives, as far as one can tell without decoding
// the elements. The agent relays a live window that passes it as the
// runtime wrote it, instead of decoding and encoding it again.
func ArrayOfObjects(b []byte) bool {
	depth, inString, escaped, element := 0, false, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if depth == 0 && c != '[' {
			return false // not an array, or not compact
		}
		if element { // the first byte of an element, or the "]" of []
			element = false
			if c != '{' && c != ']' {
				return false
			}
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			return false
		case '"':
			inString = true
		case '[':
			element = depth == 0
			depth++
		case '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			element = depth == 1
		}
	}
	return len(b) > 0
}

// CutSyncResponse splits a successful get_sync response written the way
// Shard runtimes write it (Marshal of Response: `{"type":"response","id":
// "<id>","command":"get_sync","success":true,"data":<data>}`, the id
// without escapes) into id and data, so that the agent decodes data
// straight into its snapshot instead of decoding the whole record first.
// ok is false for any other record. data still has to be checked to be one
// JSON value (members after it would be cut into it): then the record is
// exactly that response.
func CutSyncResponse(line []byte) (id string, data []byte, ok bool) {
	const head, mid = `{"type":"response","id":"`, `","command":"get_sync","success":true,"data":`
	rest, ok := bytes.CutPrefix(line, []byte(head))
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	id = string(rest[:end])
	data, ok = bytes.CutPrefix(rest[end:], []byte(mid))
	if !ok || len(data) < 2 || data[len(data)-1] != '}' {
		return "", nil, false
	}
	return id, data[:len(data)-1], true
}

// WholeObject is the relay's framing check of a runtime record whose type
// PeekType read as typ, cheap enough for the hot path (the records' syntax is
// not checked): a JSON object with a readable type that is not cut short. A
// record failing it would break every client's framing (docs/protocol.md §2),
// so the agent drops it. Every valid JSON object whose type PeekType reads
// passes.
func WholeObject(line []byte, typ string) bool {
	line = bytes.TrimSpace(line)
	return typ != "" && len(line) >= 2 && line[0] == '{' && line[len(line)-1] == '}'
}
