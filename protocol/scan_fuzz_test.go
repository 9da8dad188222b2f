package protocol_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
)

// FuzzArrayOfObjects: for valid JSON, ArrayOfObjects is exactly "a compact
// array whose elements are all objects"; for anything else it must not
// panic.
func FuzzArrayOfObjects(f *testing.F) {
	for _, s := range []string{`[]`, `[{}]`, `[{},{"a":[1,{"b":"]"}]}]`, `[ {}]`, `[{},1]`, `[[]]`, `{}`, `null`,
		`[{"id":"m1","role":"assistant","content":[{"type":"text","text":"hi \"there\""}]}]`, `[{"a":"\\"}]`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := protocol.ArrayOfObjects(b)
		if !json.Valid(b) {
			return
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			t.Fatal(err)
		}
		want := bytes.Equal(compact.Bytes(), b) && b[0] == '['
		if want {
			var elems []json.RawMessage
			if err := json.Unmarshal(b, &elems); err != nil {
				t.Fatal(err)
			}
			for _, e := range elems {
				want = want && e[0] == '{'
			}
		}
		if got != want {
			t.Fatalf("ArrayOfObjects(%s) = %v, want %v", b, got, want)
		}
	})
}

// FuzzCutSyncResponse: what it accepts is the template around id and data,
// and, when the record is valid JSON, decodes as that response; every
// record built from the template with a plain id is accepted.
func FuzzCutSyncResponse(f *testing.F) {
	const head, mid = `{"type":"response","id":"`, `","command":"get_sync","success":true,"data":`
	f.Add([]byte(head+`d-7`+mid+`{"status":"idle","live_window":{"messages":[]}}}`), "d-1", []byte(`{}`))
	f.Add([]byte(head+`d-7`+mid+`{},"error":{}}`), "", []byte(`null`))
	f.Add([]byte(`{"type":"response","id":"d\"7","command":"get_sync","success":true,"data":{}}`), `x"`, []byte(`[1]`))
	f.Add([]byte(head+`d-7`+mid), "d-2", []byte(``))
	f.Fuzz(func(t *testing.T, line []byte, buildID string, buildData []byte) {
		id, data, ok := protocol.CutSyncResponse(line)
		if ok {
			if rebuilt := head + id + mid + string(data) + "}"; rebuilt != string(line) {
				t.Fatalf("CutSyncResponse(%s) = %q, %s: not its parts", line, id, data)
			}
			if json.Valid(data) && json.Valid(line) {
				var resp protocol.Response
				if err := json.Unmarshal(line, &resp); err != nil {
					t.Fatal(err)
				}
				if resp.ID != id || resp.Command != protocol.TypeGetSync || !resp.Success || !bytes.Equal(resp.Data, data) {
					t.Fatalf("CutSyncResponse(%s) = %q, %s; decoded %+v", line, id, data, resp)
				}
			}
		}
		if bytes.ContainsAny([]byte(buildID), `"\`) || len(buildData) == 0 {
			return
		}
		rec := []byte(head + buildID + mid + string(buildData) + "}")
		if id, data, ok := protocol.CutSyncResponse(rec); !ok || id != buildID || !bytes.Equal(data, buildData) {
			t.Fatalf("CutSyncResponse(%s) = %q, %s, %v; want %q, %s", rec, id, data, ok, buildID, buildData)
		}
	})
}

// FuzzWholeObject: every valid JSON object whose type PeekType reads
// passes, and what passes is at least framed as an object.
func FuzzWholeObject(f *testing.F) {
	seedFrames(f)
	f.Add([]byte(`{"type":"status"`))
	f.Add([]byte(` {"x":1,"type":"late"} `))
	f.Fuzz(func(t *testing.T, line []byte) {
		typ := protocol.PeekType(line)
		got := protocol.WholeObject(line, typ)
		if got {
			trimmed := bytes.TrimSpace(line)
			if trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' || typ == "" {
				t.Fatalf("WholeObject(%q) accepted it", line)
			}
		}
		if json.Valid(line) && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) && typ != "" && !got {
			t.Fatalf("WholeObject(%q) refused an object with type %q", line, typ)
		}
	})
}

// memberSeeds are records for the member rewriters, with keys to touch.
func memberSeeds(f *testing.F, withValue bool) {
	recs := append([]string{
		`{"id":"c-1","type":"prompt","agent_id":"a-3","message":"hi"}`,
		`{"id":"a","id":"b","ID":"c","\u0069d":"d"}`,
		" {\n\t\"type\" : \"steer\" , \"message\":\"x\\\"y\" } ",
		`{}`, `{"a":{"id":1},"b":[{"id":2}]}`,
		`{"é":1,"type":"x"}`,
	}, specFrames...)
	for _, r := range recs {
		for _, k := range []string{"id", "agent_id", "source", "strict", "é"} {
			if withValue {
				f.Add([]byte(r), k, []byte(`"d-1"`))
				f.Add([]byte(r), k, []byte(`{"x": [1, true]}`))
			} else {
				f.Add([]byte(r), k, []byte(nil))
			}
		}
	}
}

// decodeObject is the decode→map view of a JSON object: encoding/json's
// semantics (last duplicate wins), values compacted.
func decodeObject(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			t.Fatal(err)
		}
		out[k] = c.String()
	}
	return out
}

// topKeys lists the top-level keys of a JSON object in order.
func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dec.Token(); err != nil && err != io.EOF { // }
		t.Fatal(err)
	}
	return keys
}

// checkRewrite compares out with the decode→map→set/delete result.
func checkRewrite(t *testing.T, data, out []byte, key string, value []byte, set bool) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("rewrite of %s = %s: not valid JSON", data, out)
	}
	want := decodeObject(t, data)
	for k := range want {
		if foldEqual(k, key) { // variants but for case go too
			delete(want, k)
		}
	}
	if set {
		var c bytes.Buffer
		if err := json.Compact(&c, value); err != nil {
			t.Fatal(err)
		}
		want[key] = c.String()
	}
	got := decodeObject(t, out)
	if len(got) != len(want) {
		t.Fatalf("rewrite of %s (key %q) = %s: %d keys, want %d", data, key, out, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("rewrite of %s (key %q) = %s: %q is %s, want %s", data, key, out, k, got[k], v)
		}
	}
	keys := topKeys(t, out)
	n := 0
	for _, k := range keys {
		if foldEqual(k, key) {
			n++
		}
	}
	switch {
	case set && (n != 1 || keys[len(keys)-1] != key):
		t.Fatalf("SetMember(%s, %q) = %s: want the key once, last", data, key, out)
	case !set && n != 0:
		t.Fatalf("DeleteMember(%s, %q) = %s: key still there", data, key, out)
	}
}

// FuzzSetMember: for every JSON object the result means what decoding it,
// setting the key and encoding again means, with the key once and last.
func FuzzSetMember(f *testing.F) {
	memberSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte, key string, value []byte) {
		out, err := protocol.SetMember(data, key, value)
		var obj map[string]json.RawMessage
		if !json.Valid(data) || json.Unmarshal(data, &obj) != nil || obj == nil || !json.Valid(value) || !utf8.ValidString(key) {
			return // outside the precondition: only no panic
		}
		if err != nil {
			t.Fatalf("SetMember(%s, %q, %s): %v", data, key, value, err)
		}
		checkRewrite(t, data, out, key, value, true)
	})
}

// FuzzDeleteMember: as FuzzSetMember, for deleting.
func FuzzDeleteMember(f *testing.F) {
	memberSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte, key string, _ []byte) {
		out, err := protocol.DeleteMember(data, key)
		var obj map[string]json.RawMessage
		if !json.Valid(data) || json.Unmarshal(data, &obj) != nil || obj == nil || !utf8.ValidString(key) {
			return
		}
		if err != nil {
			t.Fatalf("DeleteMember(%s, %q): %v", data, key, err)
		}
		checkRewrite(t, data, out, key, nil, false)
	})
}

// foldEqual is how encoding/json matches a key to a struct field.
func foldEqual(a, b string) bool {
	return strings.ToLower(strings.ToUpper(a)) == strings.ToLower(strings.ToUpper(b))
}
