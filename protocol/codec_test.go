package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shard-dev/shard/protocol"
)

// readResult is one call of Reader.Next: a record or an error.
type readResult struct {
	rec string
	err error
}

// readAll calls Next until io.EOF (or another error that is not
// ErrRecordTooLong) and returns every result, the terminal error included.
// Records are copied because Next reuses its buffer.
func readAll(t testing.TB, r io.Reader, max int) []readResult {
	t.Helper()
	jr := protocol.NewReader(r, max)
	var out []readResult
	for i := 0; ; i++ {
		if i > 1<<20 {
			t.Fatal("Reader.Next never reached EOF")
		}
		rec, err := jr.Next()
		if err != nil {
			out = append(out, readResult{err: err})
			if errors.Is(err, protocol.ErrRecordTooLong) {
				continue
			}
			return out
		}
		out = append(out, readResult{rec: string(rec)})
	}
}

func (r readResult) String() string {
	if r.err != nil {
		return "error(" + r.err.Error() + ")"
	}
	return strconv.Quote(r.rec)
}

func recs(ss ...string) []readResult {
	out := make([]readResult, 0, len(ss)+1)
	for _, s := range ss {
		out = append(out, readResult{rec: s})
	}
	return append(out, readResult{err: io.EOF})
}

var tooLong = readResult{err: protocol.ErrRecordTooLong}

func TestReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		max  int
		want []readResult
	}{
		{name: "empty", in: "", want: recs()},
		{name: "two records", in: "a\nb\n", want: recs("a", "b")},
		{name: "final record without newline", in: "a\nb", want: recs("a", "b")},
		{name: "only newlines", in: "\n\n\n", want: recs()},
		{name: "blank lines skipped", in: "\n  \n\t\r\na\n \n\r\n", want: recs("a")},
		{name: "record keeps inner spaces", in: " a b \n", want: recs(" a b ")},
		{name: "CRLF", in: "a\r\nb\r\n", want: recs("a", "b")},
		{name: "only one CR stripped", in: "a\r\r\n", want: recs("a\r")},
		{name: "CR at EOF stripped", in: "a\r", want: recs("a")},
		{name: "lone CR is not a separator", in: "a\rb\n", want: recs("a\rb")},
		{name: "U+2028 and U+2029 do not split", in: "a\u2028b\u2029c\nd\n", want: recs("a\u2028b\u2029c", "d")},
		{
			name: "raw U+2028 inside a JSON string",
			in:   `{"type":"message_delta","text_delta":"x` + "\u2028" + `y` + "\u2029" + `z"}` + "\n",
			want: recs(`{"type":"message_delta","text_delta":"x` + "\u2028" + `y` + "\u2029" + `z"}`),
		},
		{name: "NEL and VT do not split", in: "a\u0085b\vc\fd\n", want: recs("a\u0085b\vc\fd")},
		{name: "exactly at limit", in: "12345678\n", max: 8, want: recs("12345678")},
		{name: "at limit with CRLF", in: "12345678\r\n", max: 8, want: recs("12345678")},
		{name: "one over limit", in: "123456789\nok\n", max: 8, want: []readResult{tooLong, {rec: "ok"}, {err: io.EOF}}},
		{name: "one over limit with CR", in: "123456789\r\nok\n", max: 8, want: []readResult{tooLong, {rec: "ok"}, {err: io.EOF}}},
		{name: "far over limit", in: strings.Repeat("x", 100) + "\nok\n", max: 8, want: []readResult{tooLong, {rec: "ok"}, {err: io.EOF}}},
		{name: "over limit at EOF", in: "ok\n" + strings.Repeat("x", 9), max: 8, want: []readResult{{rec: "ok"}, tooLong, {err: io.EOF}}},
		{name: "two oversized in a row", in: strings.Repeat("x", 9) + "\n" + strings.Repeat("y", 30) + "\nz\n", max: 8, want: []readResult{tooLong, tooLong, {rec: "z"}, {err: io.EOF}}},
		{name: "oversized blank line is still oversized", in: strings.Repeat(" ", 9) + "\nok\n", max: 8, want: []readResult{tooLong, {rec: "ok"}, {err: io.EOF}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := readAll(t, strings.NewReader(tt.in), tt.max)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("records of %q (max %d):\n got %v\nwant %v", tt.in, tt.max, got, tt.want)
			}
			// Reading one byte at a time yields the same records.
			got1 := readAll(t, iotest.OneByteReader(strings.NewReader(tt.in)), tt.max)
			if !reflect.DeepEqual(got1, tt.want) {
				t.Errorf("one byte at a time, records of %q:\n got %v\nwant %v", tt.in, got1, tt.want)
			}
			gotHalf := readAll(t, iotest.HalfReader(strings.NewReader(tt.in)), tt.max)
			if !reflect.DeepEqual(gotHalf, tt.want) {
				t.Errorf("half reads, records of %q:\n got %v\nwant %v", tt.in, gotHalf, tt.want)
			}
		})
	}
}

func TestReaderLargeRecords(t *testing.T) {
	t.Parallel()
	// 200 KiB is well past the Reader's 64 KiB bufio buffer.
	big := strings.Repeat("0123456789abcdef", 200<<10/16)
	bigSep := big[:len(big)/2] + "\u2028" + big[len(big)/2:]

	t.Run("default limit", func(t *testing.T) {
		t.Parallel()
		in := big + "\r\n" + bigSep + "\nsmall\n" + big
		want := recs(big, bigSep, "small", big)
		if got := readAll(t, strings.NewReader(in), 0); !reflect.DeepEqual(got, want) {
			t.Errorf("got %d results, want %d (or contents differ)", len(got), len(want))
		}
		if got := readAll(t, iotest.OneByteReader(strings.NewReader(in)), 0); !reflect.DeepEqual(got, want) {
			t.Errorf("one byte at a time: got %d results, want %d (or contents differ)", len(got), len(want))
		}
	})
	t.Run("oversized record spanning several buffers", func(t *testing.T) {
		t.Parallel()
		in := big + "\nnext\n" + big + "\n" + "last"
		want := []readResult{tooLong, {rec: "next"}, tooLong, {rec: "last"}, {err: io.EOF}}
		if got := readAll(t, strings.NewReader(in), 1<<10); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", trunc(got), want)
		}
	})
	t.Run("limit above buffer size", func(t *testing.T) {
		t.Parallel()
		lim := len(big)
		in := big + "\n" + big + "x\n" + "ok\n"
		want := []readResult{{rec: big}, tooLong, {rec: "ok"}, {err: io.EOF}}
		if got := readAll(t, strings.NewReader(in), lim); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want a record, a too-long error, ok", trunc(got))
		}
	})
}

func trunc(rs []readResult) []readResult {
	out := make([]readResult, len(rs))
	for i, r := range rs {
		if len(r.rec) > 20 {
			r.rec = r.rec[:20] + "…"
		}
		out[i] = r
	}
	return out
}

func TestReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := protocol.NewReader(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom)), 0)
	rec, err := r.Next()
	if err != nil || string(rec) != "a" {
		t.Fatalf("Next = %q, %v; want a, nil", rec, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next error = %v, want %v", err, boom)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := protocol.NewWriter(&buf)
	msgs := []protocol.Typed{
		&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: "1"}, Message: "line1\nline2\u2028line3"},
		&protocol.Status{Header: protocol.Header{Type: protocol.TypeStatus, AgentID: "a-1"}, Status: protocol.StatusIdle},
	}
	for _, m := range msgs {
		if err := w.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteRecord([]byte(`{"type":"abort"}`)); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 3 {
		t.Fatalf("stream has %d newlines, want one per record (3): %q", n, buf.String())
	}
	got := readAll(t, &buf, 0)
	if len(got) != 4 || got[3].err != io.EOF {
		t.Fatalf("read back %v, want 3 records then EOF", got)
	}
	cmd, _, err := protocol.DecodeCommand([]byte(got[0].rec))
	if err != nil {
		t.Fatal(err)
	}
	if p := cmd.(*protocol.Prompt); p.Message != "line1\nline2\u2028line3" {
		t.Errorf("prompt message = %q", p.Message)
	}
	if got[2].rec != `{"type":"abort"}` {
		t.Errorf("raw record = %q", got[2].rec)
	}
}

func TestWriterError(t *testing.T) {
	t.Parallel()
	w := protocol.NewWriter(errWriter{})
	if err := w.WriteRecord([]byte("{}")); err == nil {
		t.Error("WriteRecord to a failing writer returned nil")
	}
	if err := w.Encode(func() {}); err == nil {
		t.Error("Encode of a func returned nil")
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("write failed") }

// assertNoRawSeparators fails when b holds a raw LF, U+2028 or U+2029.
func assertNoRawSeparators(t testing.TB, b []byte) {
	t.Helper()
	for _, sep := range []string{"\n", "\u2028", "\u2029"} {
		if bytes.Contains(b, []byte(sep)) {
			t.Errorf("record contains raw %q: %q", sep, b)
		}
	}
}

func TestMarshal(t *testing.T) {
	t.Parallel()
	const tricky = "a\nb\r\nc\u2028d\u2029e<f>&g\"h\\i\tj"
	tests := []struct {
		name string
		v    any
	}{
		{"plain map", map[string]any{"s": tricky}},
		{"typed message", &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt}, Message: tricky}},
		{"content block", &protocol.MessageComplete{
			Header:    protocol.Header{Type: protocol.TypeMessageComplete},
			MessageID: "m1",
			Message: protocol.Message{ID: "m1", Role: "assistant", Content: []protocol.ContentBlock{
				{Type: protocol.BlockText, Text: tricky},
				{Type: protocol.BlockToolCall, ID: "tc1", Name: "bash", Args: map[string]any{"cmd": tricky}},
			}},
		}},
		{"raw JSON with raw separators", &protocol.Sync{
			Header:          protocol.Header{Type: protocol.TypeSync},
			PendingRequests: []json.RawMessage{json.RawMessage(`{"type":"ui_request","message":"x` + "\u2028<&>\u2029" + `y"}`)},
		}},
		{"raw value", &protocol.UIResponse{
			Header: protocol.Header{Type: protocol.TypeUIResponse}, RequestID: "r",
			Value: json.RawMessage(`"` + "\u2028<&>\u2029" + `"`),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := protocol.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			assertNoRawSeparators(t, b)
			if !json.Valid(b) {
				t.Fatalf("invalid JSON: %q", b)
			}
			if !bytes.Contains(b, []byte("<")) || !bytes.Contains(b, []byte("&")) {
				t.Errorf("record lost its literal < and &: %q", b)
			}
			for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
				if bytes.Contains(b, []byte(esc)) {
					t.Errorf("record is HTML-escaped (%s): %q", esc, b)
				}
			}
			// Escaping must not change the value.
			var a, c any
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			plain, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(plain, &c); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, c) {
				t.Errorf("Marshal changed the value:\n got %v\nwant %v", a, c)
			}
		})
	}
}

func TestMarshalError(t *testing.T) {
	t.Parallel()
	if _, err := protocol.Marshal(make(chan int)); err == nil {
		t.Error("Marshal(chan) returned nil error")
	}
	defer func() {
		if recover() == nil {
			t.Error("MustMarshal(chan) did not panic")
		}
	}()
	protocol.MustMarshal(make(chan int))
}
