package tools

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func hunk(oldStart, oldLines, newStart, newLines int, lines ...string) protocol.Hunk {
	return protocol.Hunk{OldStart: oldStart, OldLines: oldLines, NewStart: newStart, NewLines: newLines, Lines: lines}
}

func TestDiffHunks(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     []protocol.Hunk
	}{
		{"equal", "a\nb\n", "a\nb\n", nil},
		{"create", "", "a\nb\n", []protocol.Hunk{hunk(0, 0, 1, 2, "+a", "+b")}},
		{"delete all", "a\nb\n", "", []protocol.Hunk{hunk(1, 2, 0, 0, "-a", "-b")}},
		{"change middle", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nV\n6\n7\n8\n9\n",
			[]protocol.Hunk{hunk(2, 7, 2, 7, " 2", " 3", " 4", "-5", "+V", " 6", " 7", " 8")}},
		{"insert", "a\nb\n", "a\nx\nb\n", []protocol.Hunk{hunk(1, 2, 1, 3, " a", "+x", " b")}},
		{"pure insert at top", "a\n", "x\na\n", []protocol.Hunk{hunk(1, 1, 1, 2, "+x", " a")}},
		{"no newline at end", "a\nb", "a\nb\n", []protocol.Hunk{hunk(1, 2, 1, 2, " a", "-b", noNewline, "+b")}},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "X\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\nY\n",
			[]protocol.Hunk{
				hunk(1, 4, 1, 4, "-1", "+X", " 2", " 3", " 4"),
				hunk(9, 4, 9, 4, " 9", " 10", " 11", "-12", "+Y"),
			}},
		{"close changes merge", "1\n2\n3\n4\n5\n6\n7\n8\n", "X\n2\n3\n4\n5\n6\n7\nY\n",
			[]protocol.Hunk{hunk(1, 8, 1, 8, "-1", "+X", " 2", " 3", " 4", " 5", " 6", " 7", "-8", "+Y")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diffHunks(tt.old, tt.new); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("diffHunks =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// apply replays hunks on old, checking their numbers on the way.
func apply(t *testing.T, old string, hunks []protocol.Hunk) string {
	t.Helper()
	a := splitLines(old)
	var out []string
	pos := 0 // lines of a consumed
	for _, h := range hunks {
		start := h.OldStart - 1
		if h.OldLines == 0 {
			start = h.OldStart
		}
		out = append(out, a[pos:start]...)
		pos = start
		oldN, newN := 0, 0
		for i, l := range h.Lines {
			if l == noNewline {
				continue
			}
			nl := "\n"
			if i+1 < len(h.Lines) && h.Lines[i+1] == noNewline {
				nl = ""
			}
			switch l[0] {
			case ' ':
				if a[pos] != l[1:]+nl {
					t.Fatalf("context %q != %q", l, a[pos])
				}
				out = append(out, a[pos])
				pos++
				oldN++
				newN++
			case '-':
				if a[pos] != l[1:]+nl {
					t.Fatalf("removed %q != %q", l, a[pos])
				}
				pos++
				oldN++
			case '+':
				out = append(out, l[1:]+nl)
				newN++
			}
		}
		if oldN != h.OldLines || newN != h.NewLines {
			t.Fatalf("hunk %+v counts %d,%d", h, oldN, newN)
		}
	}
	out = append(out, a[pos:]...)
	return strings.Join(out, "")
}

func TestDiffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "d\n", "e\n"}
	gen := func() string {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	for range 500 {
		old, new := gen(), gen()
		if got := apply(t, old, diffHunks(old, new)); got != new {
			t.Fatalf("apply(diff(%q, %q)) = %q", old, new, got)
		}
	}
	// Past the edit budget the middle is replaced wholesale, still correctly.
	var x, y strings.Builder
	for i := range 3000 {
		x.WriteString(words[i%3])
		y.WriteString(words[3+i%2])
	}
	if got := apply(t, x.String(), diffHunks(x.String(), y.String())); got != y.String() {
		t.Fatal("large diff does not apply")
	}
}

func TestCapHunks(t *testing.T) {
	hunks := diffHunks("", strings.Repeat("line\n", 100)) // 100 lines of 6 bytes with newline
	got, cut := capHunks(hunks, 60)
	if !cut || len(got) != 1 || len(got[0].Lines) != 10 || got[0].NewLines != 10 || got[0].OldLines != 0 {
		t.Fatalf("capHunks = %+v, %v", got, cut)
	}
	if got, cut := capHunks(hunks, 1000); cut || !reflect.DeepEqual(got, hunks) {
		t.Fatal("capHunks cut what fits")
	}
}
