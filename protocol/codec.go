package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxRecord bounds one JSONL record. The spec sets no hard limit
// (§2.3) but a daemon must not buffer an endless line; 32 MiB is far above any
// message Shard itself produces.
const DefaultMaxRecord = 32 << 20

// ErrRecordTooLong is returned by Reader.Next for a record over the limit.
// The oversized record is consumed, so the stream stays usable.
var ErrRecordTooLong = errors.New("protocol: record exceeds size limit")

// Reader splits a JSONL stream into records following spec §2.1: records
// end at '\n' only (U+2028/U+2029 never split), one trailing '\r' is
// stripped, and blank lines are skipped.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewReader returns a Reader over r. max <= 0 means DefaultMaxRecord.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxRecord
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next record. The returned slice is valid only until the
// next call. At the end of the stream it returns io.EOF; a final record
// without a newline is still returned first.
func (r *Reader) Next() ([]byte, error) {
	for {
		r.buf = r.buf[:0]
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = r.br.ReadSlice('\n')
			if !tooLong {
				if len(r.buf)+len(frag) > r.max+2 { // +2: room for "\r\n"
					tooLong = true
					r.buf = r.buf[:0]
				} else {
					r.buf = append(r.buf, frag...)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			break
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if tooLong {
			return nil, ErrRecordTooLong
		}
		line := trimEOL(r.buf)
		if len(line) > r.max { // before the blank check: the limit holds for any line
			return nil, ErrRecordTooLong
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err == io.EOF {
				return nil, io.EOF
			}
			continue
		}
		return line, nil
	}
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
