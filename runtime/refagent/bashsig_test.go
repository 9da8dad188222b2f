package refagent

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestAnalyzeBash(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want string // the signatures' String()s joined by " | "; "" refused
	}{
		{"go test ./b", "go test …"},
		{"go test -run X ./a", "go test -run …"},
		{"go test -run=X -v -v ./a", "go test -run -v …"},
		{"go  test\t'./a b'", "go test …"},
		{"git -C dir status", "git dir -C …"},
		{"go test ./... && go vet ./...", "go test … | go vet …"},
		{"go test ./a | tee out.txt; ls -la", "go test … | tee … | ls -la …"},
		{"make || make", "make …"},
		{"rm -rf build", "rm -rf …"},
		{"ls -- -x", "ls …"},
		{"./run.sh --fast", "./run.sh --fast …"},
		{"", ""},
		{"go test ./a &", ""},
		{"go test ./a && ", ""},
		{"; ls", ""},
		{"echo $HOME", ""},
		{"echo \"$HOME\"", ""},
		{"echo `id`", ""},
		{"ls > out", ""},
		{"ls *.go", ""},
		{"(ls)", ""},
		{"FOO=1 go test", ""},
		{"bash -c 'rm -rf /'", ""},
		{"go test ./a\nrm -rf /", ""},
		{"echo 'unterminated", ""},
		{"sudo ls", ""},
		{"/usr/bin/env ls", ""},
		{"npx some@latest", ""},
		{"ls # comment", ""},
		{"ls \\; rm x", ""},
		{"go test ./a |& tee x", ""},
		{"'go' test", ""},
	} {
		sigs, err := analyzeBash(tc.cmd)
		var got []string
		for _, s := range sigs {
			got = append(got, s.String())
		}
		if tc.want == "" {
			if err == nil || !errors.Is(err, errUnanalyzable) {
				t.Errorf("analyzeBash(%q) = %v, %v; want refused", tc.cmd, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, " | ") != tc.want {
			t.Errorf("analyzeBash(%q) = %q, %v; want %q", tc.cmd, strings.Join(got, " | "), err, tc.want)
		}
		for _, s := range sigs {
			if !s.valid() {
				t.Errorf("analyzeBash(%q) made an invalid signature %+v", tc.cmd, s)
			}
		}
	}
}

// TestSignatureGrantsMatch: a grant made from one command line allows any
// line made only of granted signatures, and nothing else.
func TestSignatureGrantsMatch(t *testing.T) {
	g, err := loadGrants(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := analyzeBash("go test ./b")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.addSignatures(sigs, time.Now()); err != nil {
		t.Fatal(err)
	}
	bash := func(cmd string) toolCallReq {
		return toolCallReq{name: "bash", args: map[string]any{"command": cmd}}
	}
	for cmd, want := range map[string]bool{
		"go test ./a":                true,
		"go test ./a && go test ./c": true,
		"go test -run X ./a":         false,
		"go test ./a && rm -rf x":    false,
		"go vet ./a":                 false,
		"rm go test":                 false,
		"go test $(rm -rf /)":        false,
	} {
		if got := g.allows(bash(cmd)); got != want {
			t.Errorf("allows(%q) = %v, want %v", cmd, got, want)
		}
	}
	if g.allows(toolCallReq{name: "write", args: map[string]any{"command": "go test ./a"}}) {
		t.Errorf("a bash signature allowed another tool")
	}
}

// FuzzAnalyzeBash: any command line is either refused or reduced to valid
// signatures, and a line with an expansion or redirection character
// outside quotes is never reduced.
func FuzzAnalyzeBash(f *testing.F) {
	for _, s := range []string{"go test ./...", "git commit -m 'x y'", "a | b && c; d", "echo \"$x\"", "ls > x", "FOO=1 make"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		sigs, err := analyzeBash(cmd)
		if err != nil {
			return
		}
		if len(sigs) == 0 {
			t.Fatalf("%q: no signatures and no error", cmd)
		}
		for _, s := range sigs {
			if !s.valid() {
				t.Fatalf("%q: invalid signature %+v", cmd, s)
			}
		}
	})
}

// FuzzDecodeGrant: any grants.jsonl line decodes to a grant whose rule is
// well formed, or is refused; never a panic.
func FuzzDecodeGrant(f *testing.F) {
	f.Add([]byte(`{"tool":"write","args":{"path":"a"},"granted_at":1}`))
	f.Add([]byte(`{"kind":"bash_signature","version":1,"tool":"bash","args":null,"signatures":[{"exe":"go","sub":"test","flags":[]}],"granted_at":1}`))
	f.Add([]byte(`{"kind":"bash_signature","version":2,"tool":"bash","signatures":[{"exe":"go","flags":[]}]}`))
	f.Add([]byte(`{"kind":"glob","tool":"bash"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := decodeGrant(line)
		if err != nil {
			return
		}
		switch rec.Kind {
		case "", grantExact:
			if rec.Tool == "" || rec.Args == nil {
				t.Fatalf("exact grant without tool or args: %s", line)
			}
		case grantBashSignature:
			for _, s := range rec.Signatures {
				if !s.valid() {
					t.Fatalf("invalid signature accepted: %s", line)
				}
			}
		default:
			t.Fatalf("unknown kind accepted: %s", line)
		}
	})
}
