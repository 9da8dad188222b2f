package acp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/runtime/adapter"
)

// askEvents answers every Ask with answer (empty: cancelled) and keeps the
// asks.
type askEvents struct {
	nopEvents
	mu     sync.Mutex
	answer string
	asks   []adapter.Ask
}

func (e *askEvents) Ask(_ context.Context, a adapter.Ask) adapter.Answer {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asks = append(e.asks, a)
	if e.answer == "" {
		return adapter.Answer{Cancelled: true}
	}
	return adapter.Answer{OptionID: e.answer}
}

// fsTree is an agent cwd (reached through a symlink, as a user's path may
// be) beside a directory the agent must not reach, with symlinks inside
// the cwd that point out of it.
type fsTree struct {
	cwd, real, out string
}

func newFSTree(t *testing.T) fsTree {
	t.Helper()
	base := t.TempDir()
	tr := fsTree{real: filepath.Join(base, "work"), out: filepath.Join(base, "out"), cwd: filepath.Join(base, "cwd-link")}
	for _, d := range []string{tr.real, tr.out, filepath.Join(base, "work-evil"), filepath.Join(tr.real, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(tr.real, "in.txt"):       "a\nb\nc\n",
		filepath.Join(tr.real, "sub", "s.txt"): "sub\n",
		filepath.Join(tr.out, "secret.txt"):    "secret\n",
		filepath.Join(base, "work-evil", "x"):  "evil\n",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		tr.cwd:                                  tr.real,
		filepath.Join(tr.real, "outdir"):        tr.out,
		filepath.Join(tr.real, "outfile"):       filepath.Join(tr.out, "secret.txt"),
		filepath.Join(tr.real, "insidelink"):    filepath.Join(tr.real, "in.txt"),
		filepath.Join(tr.real, "sub", "uplink"): "../..", // relative, to base
		filepath.Join(tr.real, "dangling"):      filepath.Join(tr.out, "created-through-link"),
	}
	for l, target := range links {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// escapes are paths that name something outside the cwd, each a way out.
func (tr fsTree) escapes() map[string]string {
	return map[string]string{
		"absolute outside":     filepath.Join(tr.out, "secret.txt"),
		"dot-dot":              filepath.Join(tr.cwd, "..", "out", "secret.txt"),
		"relative dot-dot":     filepath.Join("..", "out", "secret.txt"),
		"dot-dot inside first": filepath.Join(tr.cwd, "sub", "..", "..", "out", "secret.txt"),
		"symlinked dir":        filepath.Join(tr.cwd, "outdir", "secret.txt"),
		"symlinked file":       filepath.Join(tr.cwd, "outfile"),
		"relative symlink up":  filepath.Join(tr.cwd, "sub", "uplink", "out", "secret.txt"),
		"shared name prefix":   filepath.Join(filepath.Dir(tr.real), "work-evil", "x"),
		"root":                 "/etc/hostname",
		"dangling symlink":     filepath.Join(tr.cwd, "dangling"),
		"under a dangling one": filepath.Join(tr.cwd, "dangling", "x"),
	}
}

// refused checks err is ACP's invalid params (the path refused before any
// I/O), not a failed read or write.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	var re *sdk.RequestError
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("%s: err = %v, want invalid params (outside the cwd)", what, err)
	}
}

// TestFSReadConfinedToCwd drives fs/read_text_file directly: paths inside
// the cwd (absolute, relative, through the cwd's own symlink, through a
// symlink that stays inside, with line/limit) are read; every escape
// (.., a symlinked directory or file pointing out, a sibling sharing the
// cwd's name as a prefix, an absolute path elsewhere) is refused.
func TestFSReadConfinedToCwd(t *testing.T) {
	tr := newFSTree(t)
	c := &client{b: &Backend{opts: Options{Cwd: tr.cwd}, ev: nopEvents{}}}
	line, limit := 2, 1
	for _, tc := range []struct {
		what string
		req  sdk.ReadTextFileRequest
		want string
	}{
		{"absolute via the cwd link", sdk.ReadTextFileRequest{Path: filepath.Join(tr.cwd, "in.txt")}, "a\nb\nc\n"},
		{"absolute real", sdk.ReadTextFileRequest{Path: filepath.Join(tr.real, "in.txt")}, "a\nb\nc\n"},
		{"relative", sdk.ReadTextFileRequest{Path: "sub/s.txt"}, "sub\n"},
		{"dot-dot staying inside", sdk.ReadTextFileRequest{Path: filepath.Join(tr.cwd, "sub", "..", "in.txt")}, "a\nb\nc\n"},
		{"symlink inside", sdk.ReadTextFileRequest{Path: filepath.Join(tr.cwd, "insidelink")}, "a\nb\nc\n"},
		{"line and limit", sdk.ReadTextFileRequest{Path: "in.txt", Line: &line, Limit: &limit}, "b\n"},
	} {
		res, err := c.ReadTextFile(context.Background(), tc.req)
		if err != nil || res.Content != tc.want {
			t.Fatalf("%s: %q, %v; want %q", tc.what, res.Content, err, tc.want)
		}
	}
	for what, p := range tr.escapes() {
		res, err := c.ReadTextFile(context.Background(), sdk.ReadTextFileRequest{Path: p})
		refused(t, "read "+what, err)
		if res.Content != "" {
			t.Fatalf("read %s leaked %q", what, res.Content)
		}
	}
	if _, err := c.ReadTextFile(context.Background(), sdk.ReadTextFileRequest{Path: "missing.txt"}); err == nil {
		t.Fatal("reading a missing file inside the cwd succeeded")
	}
}

// TestFSWriteConfinedAndGated drives fs/write_text_file directly: an
// escape is refused before anything is asked or written; inside the cwd
// every write asks first (a write call with the old and new text as its
// diff), and only "allow" writes; deny and a cancelled request leave the
// file as it was.
func TestFSWriteConfinedAndGated(t *testing.T) {
	tr := newFSTree(t)
	ev := &askEvents{answer: "allow"}
	c := &client{b: &Backend{opts: Options{Cwd: tr.cwd}, ev: ev}}
	for what, p := range tr.escapes() {
		_, err := c.WriteTextFile(context.Background(), sdk.WriteTextFileRequest{Path: p, Content: "pwned\n"})
		refused(t, "write "+what, err)
	}
	if len(ev.asks) != 0 {
		t.Fatalf("an escaping write asked: %+v", ev.asks)
	}
	for _, p := range []string{filepath.Join(tr.out, "secret.txt"), filepath.Join(filepath.Dir(tr.real), "work-evil", "x")} {
		if data, _ := os.ReadFile(p); string(data) == "pwned\n" {
			t.Fatalf("%s was written", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(tr.out, "created-through-link")); !os.IsNotExist(err) {
		t.Fatalf("a write through a dangling symlink created its target: %v", err)
	}

	target := filepath.Join(tr.real, "in.txt")
	for _, tc := range []struct {
		answer string
		want   string
	}{{"deny", "a\nb\nc\n"}, {"", "a\nb\nc\n"}, {"allow", "new\n"}} {
		ev.answer, ev.asks = tc.answer, nil
		_, err := c.WriteTextFile(context.Background(), sdk.WriteTextFileRequest{Path: filepath.Join(tr.cwd, "in.txt"), Content: "new\n"})
		if (err == nil) != (tc.answer == "allow") {
			t.Fatalf("answer %q: err = %v", tc.answer, err)
		}
		if len(ev.asks) != 1 {
			t.Fatalf("answer %q: %d asks", tc.answer, len(ev.asks))
		}
		a := ev.asks[0]
		if a.Tool.Name != "write" || len(a.Tool.Diffs) != 1 || a.Tool.Diffs[0].Old != "a\nb\nc\n" || a.Tool.Diffs[0].New != "new\n" ||
			len(a.Options) != 2 || a.Options[0].Kind != adapter.AllowOnce || a.Options[1].Kind != adapter.RejectOnce {
			t.Fatalf("answer %q: ask = %+v", tc.answer, a)
		}
		if data, _ := os.ReadFile(target); string(data) != tc.want {
			t.Fatalf("answer %q: in.txt = %q, want %q", tc.answer, data, tc.want)
		}
	}

	// A new file inside (its name does not exist yet) is allowed too.
	ev.answer = "allow"
	if _, err := c.WriteTextFile(context.Background(), sdk.WriteTextFileRequest{Path: "sub/new.txt", Content: "n\n"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(tr.real, "sub", "new.txt")); string(data) != "n\n" {
		t.Fatalf("sub/new.txt = %q", data)
	}
}
