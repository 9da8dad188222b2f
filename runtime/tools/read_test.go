package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	env := setup(t, map[string]string{
		"a.go":      "package a\n\nfunc A() {}\n",
		"ten.txt":   numbered(10),
		"empty.txt": "",
		"bin.dat":   "PNG\x00\x01\x02",
		"dir/x":     "x",
	})

	t.Run("whole file", func(t *testing.T) {
		res := call(t, env, "read", map[string]any{"path": "a.go"})
		if got := wantText(t, res); got != "package a\n\nfunc A() {}\n" {
			t.Fatalf("text = %q", got)
		}
		r := res.Render
		if r == nil || r.Kind != "code" || r.Path != "a.go" || r.Text != "package a\n\nfunc A() {}\n" || r.Lang != "go" {
			t.Fatalf("render = %+v", r)
		}
	})
	t.Run("window", func(t *testing.T) {
		res := call(t, env, "read", map[string]any{"path": "ten.txt", "offset": 3.0, "limit": 2.0})
		want := "line 3\nline 4\n[lines 3-4 of 10; use offset=5 to read on]"
		if got := wantText(t, res); got != want {
			t.Fatalf("text = %q, want %q", got, want)
		}
		if res.Render.Text != "line 3\nline 4\n" {
			t.Fatalf("render text = %q", res.Render.Text)
		}
	})
	t.Run("window to the end", func(t *testing.T) {
		res := call(t, env, "read", map[string]any{"path": "ten.txt", "offset": 9.0, "limit": 5.0})
		if got := wantText(t, res); got != "line 9\nline 10\n" {
			t.Fatalf("text = %q", got)
		}
	})
	t.Run("offset past the end", func(t *testing.T) {
		msg := wantError(t, call(t, env, "read", map[string]any{"path": "ten.txt", "offset": 11.0}))
		if !strings.Contains(msg, "past the end") || !strings.Contains(msg, "10 lines") {
			t.Fatalf("message = %q", msg)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		res := call(t, env, "read", map[string]any{"path": "empty.txt"})
		if got := wantText(t, res); got != "(empty file)" || res.Render.Text != "" {
			t.Fatalf("text = %q, render = %+v", got, res.Render)
		}
	})
	t.Run("directory", func(t *testing.T) {
		msg := wantError(t, call(t, env, "read", map[string]any{"path": "dir"}))
		if !strings.Contains(msg, "is a directory") {
			t.Fatalf("message = %q", msg)
		}
	})
	t.Run("binary", func(t *testing.T) {
		msg := wantError(t, call(t, env, "read", map[string]any{"path": "bin.dat"}))
		if !strings.Contains(msg, "binary") {
			t.Fatalf("message = %q", msg)
		}
	})
	t.Run("missing", func(t *testing.T) {
		msg := wantError(t, call(t, env, "read", map[string]any{"path": "nope.txt"}))
		if msg != "nope.txt: no such file or directory" {
			t.Fatalf("message = %q", msg)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		tool, _ := Lookup("read")
		msg := wantError(t, tool.Run(ctx, env, map[string]any{"path": "ten.txt"}))
		if !strings.Contains(msg, "cancelled") {
			t.Fatalf("message = %q", msg)
		}
	})
}

func TestReadTruncates(t *testing.T) {
	env := setup(t, map[string]string{
		"big.txt":  numbered(1000), // "line N\n": 7-9 bytes a line
		"long.txt": strings.Repeat("é", 600) + "\nnext\n",
	})
	env.MaxOutput = 100

	res := call(t, env, "read", map[string]any{"path": "big.txt"})
	got := wantText(t, res)
	// Lines 1-9 take 63 bytes, 10-13 another 32: 95 bytes fit.
	kept := numbered(13)
	if !strings.HasPrefix(got, kept) {
		t.Fatalf("text = %q", got)
	}
	cut := len(numbered(1000)) - len(kept)
	want := fmt.Sprintf("[… truncated %d bytes (987 lines) … use offset=14 to read on]", cut)
	if marker := strings.TrimPrefix(got, kept); marker != want {
		t.Fatalf("marker = %q, want %q", marker, want)
	}
	if res.Render.Text != kept {
		t.Fatalf("render text = %q", res.Render.Text)
	}

	// A window is cut the same way, counting only the window.
	got = wantText(t, call(t, env, "read", map[string]any{"path": "big.txt", "offset": 101.0, "limit": 20.0}))
	if !strings.HasSuffix(got, "line 111\n[… truncated 81 bytes (9 lines) … use offset=112 to read on]") {
		t.Fatalf("window text = %q", got)
	}

	// A line longer than the cap is cut at a rune boundary.
	got = wantText(t, call(t, env, "read", map[string]any{"path": "long.txt"}))
	first, marker, _ := strings.Cut(got, "\n")
	if first != strings.Repeat("é", 50) {
		t.Fatalf("first = %q", first)
	}
	if want := "[… truncated 1106 bytes (2 lines) … use offset=2 to read on]"; marker != want {
		t.Fatalf("marker = %q, want %q", marker, want)
	}
}
