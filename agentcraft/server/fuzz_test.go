package server

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSlug: whatever an agent or a repository is named, its id is made of
// lowercase ASCII letters, digits and single inner dashes, at most 32
// bytes, and making it twice gives the same.
func FuzzSlug(f *testing.F) {
	for _, s := range []string{"kit", "Kit Carson", "lead", "", "--", "Ünïcode", "a/b\\c", strings.Repeat("x", 40), "user", "日本語 name"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got := slug(name)
		if len(got) > 32 || strings.HasPrefix(got, "-") || strings.HasSuffix(got, "-") || strings.Contains(got, "--") {
			t.Fatalf("slug(%q) = %q", name, got)
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				t.Fatalf("slug(%q) = %q has %q", name, got, r)
			}
		}
		if slug(got) != got {
			t.Fatalf("slug not stable: %q → %q → %q", name, got, slug(got))
		}
	})
}

// FuzzEcho: an echoed value is valid UTF-8 once quoted, and never longer
// than echoMax bytes of what was sent.
func FuzzEcho(f *testing.F) {
	for _, s := range []string{"kitt", strings.Repeat("é", 100), "\xff\xfe", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		q := echo(v)
		if !utf8.ValidString(q) {
			t.Fatalf("echo(%q) = %q is not UTF-8", v, q)
		}
		if len(v) > echoMax && !strings.HasSuffix(q, `…"`) {
			t.Fatalf("echo(%q) = %q not cut", v, q)
		}
	})
}
