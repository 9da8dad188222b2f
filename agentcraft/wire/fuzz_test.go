package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// seedVectors adds every vector to f's corpus, with its halves.
func seedVectors(f *testing.F) {
	for _, v := range vectors {
		b, err := os.ReadFile(filepath.Join("testdata", v.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
}

// FuzzDecodeClient: DecodeClient never panics, and whatever it decodes
// re-encodes to a frame that decodes to the same value, with a stable
// encoding.
func FuzzDecodeClient(f *testing.F) {
	seedVectors(f)
	for _, s := range []string{
		`{"v":1,"type":"decision.answer","decisionId":"d1","option":0}`,
		`{"v":1,"type":"decision.answer","decisionId":"d1","option":-0}`,
		`{"v":1,"type":"goal.submit","text":"\ud800 \u0000","Text":"y","repoId":null}`,
		`{"v":1,"type":"task.action","taskId":"t","action":"cancel","arg":""}`,
		`{"v":1,"type":"hello","modVersion":"","protocol":1,"client":"cli"}`,
		`{"v":1,"type":"user.message","to":"all","text":"@kit hi","id":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeClient(data)
		if err != nil {
			if m != nil {
				t.Fatalf("message %#v with error %v", m, err)
			}
			if CodeOf(err) == "" {
				t.Fatalf("error %v carries no code", err)
			}
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("encode %#v: %v", m, err)
		}
		m2, err := DecodeClient(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the value\n was %#v\n now %#v", m, m2)
		}
		b2, err := json.Marshal(m2)
		if err != nil || string(b2) != string(b) {
			t.Fatalf("encoding not stable: %s then %s (%v)", b, b2, err)
		}
	})
}

// FuzzDecodeServer: the same property for DecodeServer and Encode.
func FuzzDecodeServer(f *testing.F) {
	seedVectors(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeServer(data)
		if err != nil {
			if m != nil || CodeOf(err) == "" {
				t.Fatalf("message %#v, error %v", m, err)
			}
			return
		}
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("encode %#v: %v", m, err)
		}
		m2, err := DecodeServer(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the value\n was %#v\n now %#v", m, m2)
		}
	})
}
