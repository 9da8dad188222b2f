package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseWebTokens: $SHARD_TOKEN is the --url node's token, with
// node=token entries for the nodes attach may fail over to.
func TestParseWebTokens(t *testing.T) {
	w, err := parseWebTokens(" tok-a.x , n1=tok-1.y,n3=tok-3.z,")
	if err != nil {
		t.Fatal(err)
	}
	if w.def != "tok-a.x" || !reflect.DeepEqual(w.byNode, map[string]string{"n1": "tok-1.y", "n3": "tok-3.z"}) {
		t.Fatalf("parsed %+v", w)
	}
	if got := []string{w.forNode("n1"), w.forNode("n2"), w.forNode("n3")}; !reflect.DeepEqual(got, []string{"tok-1.y", "tok-a.x", "tok-3.z"}) {
		t.Fatalf("forNode: %q", got)
	}
	for _, bad := range []string{"a,b", "=tok", "n1="} {
		if _, err := parseWebTokens(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if w, err := parseWebTokens(""); err != nil || w.def != "" || w.forNode("n1") != "" {
		t.Fatalf("empty: %+v %v", w, err)
	}
}

// TestWSEndpoint: --url takes a node's web address or its WebSocket.
func TestWSEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7420":     "ws://127.0.0.1:7420/ws",
		"https://shard.example/n2/": "wss://shard.example/n2/ws",
		"ws://127.0.0.1:7420/ws":    "ws://127.0.0.1:7420/ws",
		"127.0.0.1:7420":            "",
		"ftp://h":                   "",
	} {
		got, err := wsEndpoint(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("wsEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// FuzzParseWebTokens: any $SHARD_TOKEN either fails or yields entries
// that are each named in it, none empty.
func FuzzParseWebTokens(f *testing.F) {
	f.Add("tok-a.x,n1=tok-1.y")
	f.Add("a,b")
	f.Add("=,=x,n=")
	f.Fuzz(func(t *testing.T, v string) {
		w, err := parseWebTokens(v)
		if err != nil {
			return
		}
		for n, tok := range w.byNode {
			if n == "" || tok == "" || !strings.Contains(v, n+"="+tok) {
				t.Fatalf("%q: entry %q=%q", v, n, tok)
			}
		}
		if w.def != "" && (strings.ContainsAny(w.def, "=,") || !strings.Contains(v, w.def)) {
			t.Fatalf("%q: token %q", v, w.def)
		}
	})
}
