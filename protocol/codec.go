package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxRecord bounds one JSONL record. The contract sets no hard limit
// (docs/protocol.md §2.3) but a daemon must not buffer an endless line; 32
// MiB is far above any message Shard itself produces.
const DefaultMaxRecord = 32 << 20

// ErrRecordTooLong is returned by Reader.Next for a record over the limit.
// The oversized record is consumed, so the stream stays usable.
var ErrRecordTooLong = errors.New("protocol: record exceeds size limit")

// Reader splits a JSONL stream into records following docs/protocol.md §2.1:
// records end at '\n' only (U+2028/U+2029 never split), one trailing '\r' is
// stripped, and blank lines are skipped.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int
	// chunks holds the pieces of a record longer than the read buffer
	// while it is assembled; owned tells whether the last record returned
	// is in a buffer of its own (see Owned).
	chunks [][]byte
	owned  bool
}

// DefaultReadBuffer is the read buffer of NewReader: records up to this
// size are returned in place, without a copy.
const DefaultReadBuffer = 64 << 10

// NewReader returns a Reader over r with a DefaultReadBuffer read buffer.
// max <= 0 means DefaultMaxRecord.
func NewReader(r io.Reader, max int) *Reader {
	return NewReaderSize(r, DefaultReadBuffer, max)
}

// NewReaderSize is NewReader with a read buffer of size bytes: a smaller
// buffer costs less memory per idle stream (records longer than it are
// still read whole, through a copy). max <= 0 means DefaultMaxRecord.
func NewReaderSize(r io.Reader, size, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxRecord
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// Next returns the next record. The returned slice is valid only until the
// next call, unless Owned reports otherwise. At the end of the stream it
// returns io.EOF; a final record without a newline is still returned first.
func (r *Reader) Next() ([]byte, error) {
	r.owned = false
	for {
		// Fast path: a record within the read buffer is returned in place,
		// without a copy.
		frag, err := r.br.ReadSlice('\n')
		if err == nil {
			line := trimEOL(frag)
			if len(line) > r.max {
				return nil, ErrRecordTooLong
			}
			if isBlank(line) {
				continue
			}
			return line, nil
		}
		// A record longer than the read buffer (or the last one, without a
		// newline): its pieces are copied aside, then joined once into a
		// buffer of the record's exact size that the caller may keep.
		clear(r.chunks)
		r.chunks = r.chunks[:0]
		size, tooLong := 0, false
		for {
			if !tooLong {
				if size+len(frag) > r.max+2 { // +2: room for "\r\n"
					tooLong = true
					clear(r.chunks)
					r.chunks = r.chunks[:0]
				} else if len(frag) > 0 {
					r.chunks = append(r.chunks, bytes.Clone(frag))
					size += len(frag)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
			frag, err = r.br.ReadSlice('\n')
		}
		var rec []byte
		switch len(r.chunks) {
		case 0:
		case 1:
			rec = r.chunks[0]
		default:
			rec = bytes.Join(r.chunks, nil) // one copy, not zeroed first
		}
		clear(r.chunks)
		r.chunks = r.chunks[:0]
		if err != nil && err != io.EOF {
			return nil, err
		}
		if tooLong {
			return nil, ErrRecordTooLong
		}
		line := trimEOL(rec)
		if len(line) > r.max { // before the blank check: the limit holds for any line
			return nil, ErrRecordTooLong
		}
		if isBlank(line) {
			if err == io.EOF {
				return nil, io.EOF
			}
			continue
		}
		r.owned = true
		return line, nil
	}
}

// Owned reports whether the record Next last returned is in a buffer of its
// own, which the Reader neither reuses nor keeps: the caller may keep the
// record without copying it. That is the case for a record longer than the
// read buffer (64 KiB), so that a multi-megabyte record is not copied again.
func (r *Reader) Owned() bool { return r.owned }

// Buffered returns how many bytes of complete lines (up to and including
// the last newline) are already read ahead: an upper bound of the size of
// the records Next can return without reading from the underlying reader.
func (r *Reader) Buffered() int {
	b := r.ahead()
	return bytes.LastIndexByte(b, '\n') + 1
}

// Ready reports whether a whole record is already read ahead, so that Next
// returns without reading from the underlying reader (and so without
// waiting). A relay uses it to batch the records that arrived together.
func (r *Reader) Ready() bool {
	b := r.ahead()
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		if !isBlank(b[:i]) {
			return true // a record, or one too long: either returns at once
		}
		b = b[i+1:] // Next skips a blank line
	}
}

// ahead returns the read-ahead bytes; peeking them reads nothing and moves
// nothing, so a slice Next returned stays valid.
func (r *Reader) ahead() []byte {
	b, _ := r.br.Peek(r.br.Buffered())
	return b
}

// isBlank reports whether b holds only JSON whitespace (and other ASCII
// spaces bytes.TrimSpace would remove); it never allocates.
func isBlank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n', '\v', '\f':
		default:
			if c < 0x80 {
				return false
			}
			return len(bytes.TrimSpace(b)) == 0 // Unicode spaces: the exact rule
		}
	}
	return true
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// Marshal encodes v as one compact JSON record without a trailing newline
// and without HTML escaping. A record never contains a raw line separator:
// encoding/json escapes U+2028/U+2029 in strings it encodes, and Marshal
// escapes those it copies verbatim from json.RawMessage values and
// MarshalJSON output (which encoding/json leaves raw when HTML escaping is
// off).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("protocol: encode: %w", err)
	}
	b := buf.Bytes()
	return escapeLineSeparators(b[:len(b)-1]), nil
}

// RawMember is an object member whose value is already encoded: valid,
// compact JSON.
type RawMember struct {
	Key   string
	Value []byte
}

// MarshalWith is Marshal(v) for a v that encodes as a JSON object, with
// members appended after v's own, in order, their values copied verbatim.
// The record is the one Marshal would produce had v these members as
// json.RawMessage fields last (Marshal compacts a RawMessage, which is why
// values must already be compact), without the cost of compacting a large
// value again: raw U+2028/U+2029 in values are escaped like everywhere else.
func MarshalWith(v any, members ...RawMember) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("protocol: encode: %T does not encode as an object", v)
	}
	n := len(b)
	keys := make([][]byte, len(members))
	for i, m := range members {
		if keys[i], err = Marshal(m.Key); err != nil {
			return nil, err
		}
		n += len(keys[i]) + len(m.Value) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, b[:len(b)-1]...)
	for i, m := range members {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, keys[i]...), ':'), m.Value...)
	}
	return escapeLineSeparators(append(out, '}')), nil
}

// escapeLineSeparators rewrites raw U+2028/U+2029 in valid JSON as \u2028
// and \u2029. Outside strings valid JSON is ASCII, so every such sequence
// is inside a string, where the escape means the same character.
func escapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte("\u2028")) && !bytes.Contains(b, []byte("\u2029")) {
		return b
	}
	b = bytes.ReplaceAll(b, []byte("\u2028"), []byte(`\u2028`))
	return bytes.ReplaceAll(b, []byte("\u2029"), []byte(`\u2029`))
}

// MustMarshal is Marshal for values that cannot fail to encode (typed
// messages of this package). It panics on error, which signals a bug.
func MustMarshal(v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Writer writes JSONL records. It is not safe for concurrent use.
type Writer struct{ w io.Writer }

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteRecord writes one already-encoded record followed by '\n'.
func (w *Writer) WriteRecord(rec []byte) error {
	line := make([]byte, 0, len(rec)+1)
	line = append(append(line, rec...), '\n')
	_, err := w.w.Write(line)
	return err
}

// Encode marshals v and writes it as one record.
func (w *Writer) Encode(v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	return w.WriteRecord(b)
}
