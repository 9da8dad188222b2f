package tools

import (
	"fmt"
	"strings"
	"testing"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name, text string
		max        int
		want       string
		cut        bool
	}{
		{"fits", "a\nb\n", 4, "a\nb\n", false},
		{"at line", "aa\nbb\ncc\n", 7, "aa\nbb\n[… truncated 3 bytes (1 line) …]", true},
		{"partial last line", "aa\nbb\ncc", 7, "aa\nbb\n[… truncated 2 bytes (1 line) …]", true},
		{"many lines", "a\nb\nc\nd\n", 2, "a\n[… truncated 6 bytes (3 lines) …]", true},
		{"mid line", "abcdef\n", 3, "abc\n[… truncated 4 bytes (1 line) …]", true},
		{"rune boundary", "ééé", 3, "é\n[… truncated 4 bytes (1 line) …]", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Truncate(tt.text, tt.max)
			if got != tt.want || cut != tt.cut {
				t.Fatalf("Truncate = %q, %v; want %q, %v", got, cut, tt.want, tt.cut)
			}
		})
	}
	long := strings.Repeat("x", DefaultMaxOutput+10)
	if got, cut := Truncate(long, 0); !cut || !strings.HasSuffix(got, "[… truncated 10 bytes (1 line) …]") {
		t.Fatalf("default max: %v, %q", cut, got[len(got)-40:])
	}
}

func TestHeadTail(t *testing.T) {
	t.Run("fits", func(t *testing.T) {
		w := newHeadTail(100)
		fmt.Fprint(w, "hello\n")
		fmt.Fprint(w, "world\n")
		if got := w.finish(); got != "hello\nworld\n" {
			t.Fatalf("finish = %q", got)
		}
	})
	t.Run("keeps head and tail", func(t *testing.T) {
		w := newHeadTail(400) // 100 bytes of head, 300 of tail
		var all strings.Builder
		for i := range 10000 {
			line := fmt.Sprintf("line %05d\n", i) // 11 bytes
			all.WriteString(line)
			// Write in odd-sized pieces.
			fmt.Fprint(w, line[:3])
			fmt.Fprint(w, line[3:])
		}
		got := w.finish()
		head, rest, ok := strings.Cut(got, "[… truncated ")
		if !ok {
			t.Fatalf("no marker in %q", got)
		}
		// The head is cut after its last whole line: 9 lines (99 bytes).
		if head != all.String()[:99] {
			t.Fatalf("head = %q", head)
		}
		counts, tail, _ := strings.Cut(rest, " …]\n")
		// The tail starts at a line: 27 whole lines fit in 300 bytes.
		if tail != all.String()[all.Len()-27*11:] {
			t.Fatalf("tail = %q", tail)
		}
		wantCounts := fmt.Sprintf("%d bytes (%d lines)", all.Len()-99-27*11, 10000-9-27)
		if counts != wantCounts {
			t.Fatalf("counts = %q, want %q", counts, wantCounts)
		}
		if len(got) > 400+100 {
			t.Fatalf("len = %d", len(got))
		}
	})
	t.Run("no newlines", func(t *testing.T) {
		w := newHeadTail(40)
		fmt.Fprint(w, strings.Repeat("é", 100))
		got := w.finish()
		if got != "ééééé\n[… truncated 160 bytes (1 line) …]\n"+strings.Repeat("é", 15) {
			t.Fatalf("finish = %q", got)
		}
		w = newHeadTail(41) // the tail starts mid-rune
		fmt.Fprint(w, strings.Repeat("é", 100))
		if got := w.finish(); got != "ééééé\n[… truncated 160 bytes (1 line) …]\n"+strings.Repeat("é", 15) {
			t.Fatalf("finish = %q", got)
		}
	})
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		nomatch []string
	}{
		{"*.go", []string{"a.go", "x/y/b.go"}, []string{"a.gox", "go"}},
		{"**/*.go", []string{"a.go", "x/y/b.go"}, []string{"a.txt"}},
		{"x/*.go", []string{"x/a.go"}, []string{"x/y/a.go", "a.go"}},
		{"x/**/a.go", []string{"x/a.go", "x/y/z/a.go"}, []string{"y/a.go"}},
		{"x/**", []string{"x/a", "x/a/b"}, []string{"x", "y/x/a"}},
		{"*.{ts,tsx}", []string{"a.ts", "b/a.tsx"}, []string{"a.t", "a.tsxx"}},
		{"{a,b{c,d}}.txt", []string{"a.txt", "bc.txt", "bd.txt"}, []string{"b.txt"}},
		{"?.md", []string{"a.md"}, []string{"ab.md"}},
		{"[!a]*.md", []string{"b.md"}, []string{"a.md"}},
		{"[a-c].md", []string{"b.md"}, []string{"d.md"}},
		{"a+b(1).txt", []string{"a+b(1).txt"}, []string{"aab1.txt"}},
		{`\*.txt`, []string{"*.txt"}, []string{"a.txt"}},
		{"./src/*.c", []string{"src/a.c"}, []string{"a.c"}},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tt.pattern, err)
		}
		for _, p := range tt.match {
			if !g.match(p) {
				t.Errorf("%q does not match %q", tt.pattern, p)
			}
		}
		for _, p := range tt.nomatch {
			if g.match(p) {
				t.Errorf("%q matches %q", tt.pattern, p)
			}
		}
	}
	if _, err := compileGlob("{a,b"); err == nil {
		t.Error("unclosed brace compiled")
	}
}
