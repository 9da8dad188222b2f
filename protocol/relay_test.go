package protocol

// Tests of the relay hot path's helpers against the straightforward
// versions they replace: the results must not change by a byte.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// decodeEventSlow is DecodeEvent without its fast path.
func decodeEventSlow(rec []byte) (Typed, error) {
	h, err := DecodeHeader(rec)
	if err != nil {
		return nil, err
	}
	ev := newEvent(h.Type)
	if ev == nil {
		return &Unknown{Header: h, Raw: append(json.RawMessage(nil), rec...)}, nil
	}
	if err := json.Unmarshal(rec, ev); err != nil {
		return nil, Errorf(CodeInvalidRequest, "%s", jsonErrText(err))
	}
	return ev, nil
}

func sameDecoding(t *testing.T, rec []byte) {
	t.Helper()
	got, gerr := DecodeEvent(rec)
	want, werr := decodeEventSlow(rec)
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("DecodeEvent(%q) error %v, want %v", rec, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeEvent(%q) = %#v, want %#v", rec, got, want)
	}
}

var decodeSeeds = []string{
	`{"type":"message_delta","message_id":"m","block_index":0,"kind":"text","text_delta":"hi"}`,
	`{"type":"message_delta","agent_id":"a-1","kind":"thinking","text_delta":"\u2028"}`,
	`{"type":"status","status":"idle","id":"x"}`,
	`{"type":"status","status":"idle","id":5}`,
	`{"type":"status","status":"idle","agent_id":null}`,
	`{"type":"status","agent_id":["a"]}`,
	`{"type":"status","status":"idle","type":"turn_end"}`,
	`{"type":"status","TYPE":"usage"}`,
	`{"type":"status","ID":7}`,
	`{"type":"status","status":7}`,
	`{"type":"response","id":"c-1","command":"prompt","success":true}`,
	`{"type":"response","id":"c-1","success":"yes"}`,
	`{"type":"no_such_event","x":1}`,
	`{"type":"","x":1}`,
	`{"type":"st\u0061tus","status":"idle"}`,
	`{"type":"status"`,
	`{"type":"status"} trailing`,
	`{"type":"status"}{}`,
	` {"type":"status"}`,
	`{"id":"x","type":"status"}`,
	`{"type":null}`,
	`[]`,
	`{"type":"sync","status":"idle","live_window":{"messages":[{"id":"m","role":"user","content":[]}]},"pending_requests":[]}`,
	`{"type":"hello","protocol_version":"0.1.0","capabilities":["a"]}`,
	`{"type":"error","code":"INTERNAL_ERROR","message":"x","fatal":true}`,
}

func TestDecodeEventFastPathIsExact(t *testing.T) {
	for _, s := range decodeSeeds {
		sameDecoding(t, []byte(s))
	}
}

func FuzzDecodeEventFastPath(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, rec []byte) { sameDecoding(t, rec) })
}

// withFieldOld is WithField as it was before AppendWithField.
func withFieldOld(rec, field []byte) []byte {
	i := bytes.IndexByte(rec, '{')
	if i < 0 {
		return rec
	}
	out := make([]byte, 0, len(rec)+len(field)+1)
	const typePrefix = `{"type":"`
	if bytes.HasPrefix(rec[i:], []byte(typePrefix)) {
		rest := rec[i+len(typePrefix):]
		if end := bytes.IndexByte(rest, '"'); end >= 0 && bytes.IndexByte(rest[:end], '\\') < 0 {
			cut := i + len(typePrefix) + end + 1
			out = append(out, rec[:cut]...)
			out = append(append(out, ','), field...)
			return append(out, rec[cut:]...)
		}
	}
	out = append(append(out, rec[:i+1]...), field...)
	rest := bytes.TrimLeft(rec[i+1:], " \t\r\n")
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

func sameSplice(t *testing.T, rec []byte, id string) {
	t.Helper()
	field := AgentIDField(id)
	want := withFieldOld(rec, field)
	if got := WithField(rec, field); !bytes.Equal(got, want) {
		t.Fatalf("WithField(%q) = %q, want %q", rec, got, want)
	}
	// Into a buffer with room and into one without; what is already there
	// stays.
	for _, out := range [][]byte{make([]byte, 3, 3+len(want)), []byte("abc")} {
		copy(out, "abc")
		got := AppendWithField(out, rec, field)
		if string(got[:3]) != "abc" || !bytes.Equal(got[3:], want) {
			t.Fatalf("AppendWithField(%q) = %q, want abc%q", rec, got, want)
		}
	}
}

var spliceSeeds = []string{
	`{"type":"status","status":"idle"}`, `{"type":"status"}`, `{}`, ` { } `, `{ "a":1}`, "{\n\t\"a\":1}",
	`{"type":"a\"b","x":1}`, `{"type":"","x":1}`, `{"type":"x`, `"x"`, ``, `x{"type":"y"}`, `{"a":{"type":"b"}}`,
}

func TestWithFieldUnchanged(t *testing.T) {
	for _, s := range spliceSeeds {
		sameSplice(t, []byte(s), "01J0AGENT")
	}
}

func FuzzAppendWithField(f *testing.F) {
	for _, s := range spliceSeeds {
		f.Add([]byte(s), "a-3")
	}
	f.Fuzz(func(t *testing.T, rec []byte, id string) { sameSplice(t, rec, id) })
}

func TestMarshalWith(t *testing.T) {
	type head struct {
		Header
		N int `json:"n"`
	}
	type full struct {
		Header
		N int             `json:"n"`
		W json.RawMessage `json:"live_window"`
		P json.RawMessage `json:"pending"`
	}
	w := []byte(`{"messages":[{"text":"a` + "\u2028" + `<&>"}]}`)
	p := []byte(`[]`)
	got, err := MarshalWith(head{Header: Header{Type: "sync", AgentID: "a"}, N: 3},
		RawMember{Key: "live_window", Value: w}, RawMember{Key: "pending", Value: p})
	if err != nil {
		t.Fatal(err)
	}
	want := MustMarshal(full{Header: Header{Type: "sync", AgentID: "a"}, N: 3, W: w, P: p})
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalWith = %s\nwant          %s", got, want)
	}
	if got, _ := MarshalWith(struct{}{}, RawMember{Key: "k", Value: []byte(`1`)}); string(got) != `{"k":1}` {
		t.Fatalf("MarshalWith(empty) = %s", got)
	}
	if _, err := MarshalWith([]int{1}); err == nil {
		t.Fatal("MarshalWith of an array succeeded")
	}
}

// readSpec splits a stream the way docs/protocol.md §2.1 says, for comparison
// with Reader: records end at '\n', one trailing '\r' goes, blank lines are
// skipped, a last line without newline counts.
func readSpec(in string) []string {
	var out []string
	lines := strings.Split(in, "\n")
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, l)
	}
	return out
}

// TestReaderBufferEdges: records right around the read buffer's size take
// the in-place path or the assembled one; both give the same records.
func TestReaderBufferEdges(t *testing.T) {
	const buf = 64 << 10
	var parts []string
	for _, n := range []int{buf - 3, buf - 2, buf - 1, buf, buf + 1, 2*buf - 1, 2 * buf, 2*buf + 1, 1, 0} {
		for _, eol := range []string{"\n", "\r\n", "\n\n  \n"} {
			parts = append(parts, strings.Repeat(string(rune('a'+n%26)), n)+eol)
		}
	}
	in := strings.Join(parts, "") + "tail"
	want := readSpec(in)
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(in),
		"one byte": iotest.OneByteReader(strings.NewReader(in)),
		"half":     iotest.HalfReader(strings.NewReader(in)),
	} {
		rd := NewReader(r, 0)
		var got []string
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// In place when the record and its line end fit the read
			// buffer; assembled (and owned) otherwise, and at EOF.
			if len(rec) >= buf && !rd.Owned() || len(rec) < buf-2 && rd.Owned() && string(rec) != "tail" {
				t.Errorf("%s: %d-byte record: Owned = %v", name, len(rec), rd.Owned())
			}
			got = append(got, string(rec))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d records, want %d (or contents differ)", name, len(got), len(want))
		}
	}
}

// TestReaderOwned: a record Owned reports is the caller's: later reads do
// not touch it. A record within the read buffer is not owned.
func TestReaderOwned(t *testing.T) {
	big := strings.Repeat("b", 200<<10)
	rd := NewReader(strings.NewReader(big+"\nsmall\n"+big+"x\n"), 0)
	first, err := rd.Next()
	if err != nil || !rd.Owned() || string(first) != big {
		t.Fatalf("Next = %d bytes, %v, Owned %v", len(first), err, rd.Owned())
	}
	small, err := rd.Next()
	if err != nil || rd.Owned() || string(small) != "small" {
		t.Fatalf("Next = %q, %v, Owned %v", small, err, rd.Owned())
	}
	if _, err := rd.Next(); err != nil || !rd.Owned() {
		t.Fatalf("Next: %v, Owned %v", err, rd.Owned())
	}
	if string(first) != big {
		t.Fatal("an owned record changed after later reads")
	}
}

// TestReaderReady: Ready and Buffered tell what Next can return without
// reading; a partial line or only blank lines never count.
func TestReaderReady(t *testing.T) {
	pr, pw := io.Pipe()
	rd := NewReader(pr, 0)
	go func() { _, _ = pw.Write([]byte("a\nbb\r\n\n  \npart")) }()
	if rec, err := rd.Next(); err != nil || string(rec) != "a" {
		t.Fatalf("Next = %q, %v", rec, err)
	}
	if !rd.Ready() || rd.Buffered() != len("bb\r\n\n  \n") {
		t.Fatalf("Ready %v, Buffered %d", rd.Ready(), rd.Buffered())
	}
	if rec, err := rd.Next(); err != nil || string(rec) != "bb" {
		t.Fatalf("Next = %q, %v", rec, err)
	}
	if rd.Ready() {
		t.Fatal("Ready with only blank lines and a partial one read ahead")
	}
	go func() { _, _ = pw.Write([]byte("ial\n")); pw.Close() }()
	if rec, err := rd.Next(); err != nil || string(rec) != "partial" {
		t.Fatalf("Next = %q, %v", rec, err)
	}
	if rd.Ready() || rd.Buffered() != 0 {
		t.Fatalf("Ready %v, Buffered %d at the end", rd.Ready(), rd.Buffered())
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("Next error %v, want EOF", err)
	}
}

// ---- benchmarks ----

// BenchmarkReaderLargeRecord: a 5 MB record (a flood's message_complete)
// read from a pipe-sized stream.
func BenchmarkReaderLargeRecord(b *testing.B) {
	line := append(bytes.Repeat([]byte("a"), 5<<20), '\n')
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		rd := NewReader(bytes.NewReader(line), 0)
		if _, err := rd.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReaderSmallRecords: 256-byte deltas (no copy on the fast path).
func BenchmarkReaderSmallRecords(b *testing.B) {
	rec := fmt.Sprintf(`{"type":"message_delta","message_id":"m","block_index":0,"kind":"text","text_delta":"%s"}`+"\n", strings.Repeat("a", 256))
	in := []byte(strings.Repeat(rec, 1000))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		rd := NewReader(bytes.NewReader(in), 0)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	rec := []byte(fmt.Sprintf(`{"type":"message_delta","agent_id":"01J0AGENT","message_id":"m","block_index":0,"kind":"text","text_delta":"%s"}`, strings.Repeat("a", 256)))
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeEvent(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two-pass", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeEventSlow(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkWithField(b *testing.B) {
	field := AgentIDField("01J0AGENT0000000000000000")
	for _, size := range []int{256, 5 << 20} {
		rec := []byte(fmt.Sprintf(`{"type":"message_complete","message":{"text":"%s"}}`, strings.Repeat("a", size)))
		b.Run(fmt.Sprint("new/", size), func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				WithField(rec, field)
			}
		})
		b.Run(fmt.Sprint("old/", size), func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				withFieldOld(rec, field)
			}
		})
	}
}
