package treediff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// summary renders a Result's files compactly for table comparisons:
// "status path[<-old][ bin] +a -d[ mode old>new][ hunks=n]".
func summary(res *Result) []string {
	out := []string{}
	for _, f := range res.Files {
		s := string(f.Status) + " " + f.Path
		if f.OldPath != "" {
			s += "<-" + f.OldPath
		}
		if f.Binary {
			s += " bin"
		}
		s += fmt.Sprintf(" +%d -%d", f.Additions, f.Deletions)
		if f.OldMode != "" || f.NewMode != "" {
			s += " mode " + f.OldMode + ">" + f.NewMode
		}
		if len(f.Hunks) > 0 {
			s += fmt.Sprintf(" hunks=%d", len(f.Hunks))
		}
		out = append(out, s)
	}
	return out
}

// checkInvariants asserts what must hold for any Result: counts equal the
// kept lines when nothing was truncated, totals are the sum of the files
// when none was dropped, line numbers run consecutively inside a hunk,
// no hunk holds more lines than its header, and the byte cap holds.
func checkInvariants(t testing.TB, res *Result, lim Limits) {
	t.Helper()
	lim = lim.withDefaults()
	if res == nil || res.Files == nil {
		t.Fatalf("nil result or files: %+v", res)
	}
	if res.Bytes > lim.MaxBytes {
		t.Fatalf("bytes %d over cap %d", res.Bytes, lim.MaxBytes)
	}
	if len(res.Files) > lim.MaxFiles || len(res.Files) > res.FileCount {
		t.Fatalf("%d files kept, cap %d, count %d", len(res.Files), lim.MaxFiles, res.FileCount)
	}
	var adds, dels, bytes int
	for _, f := range res.Files {
		if f.Hunks == nil {
			t.Fatalf("%s: nil hunks", f.Path)
		}
		var fa, fd int
		for _, h := range f.Hunks {
			if h.Lines == nil {
				t.Fatalf("%s %s: nil lines", f.Path, h.Header)
			}
			bytes += len(h.Header) + 1
			oldNo, newNo := h.OldStart, h.NewStart
			var ol, nl int
			for i, l := range h.Lines {
				bytes += len(l.Text) + 1
				switch l.Kind {
				case KindAdd:
					fa++
					nl++
					if l.NewNo != newNo || l.OldNo != 0 {
						t.Fatalf("%s %s line %d: add numbered %d/%d, want new %d", f.Path, h.Header, i, l.OldNo, l.NewNo, newNo)
					}
					newNo++
				case KindDel:
					fd++
					ol++
					if l.OldNo != oldNo || l.NewNo != 0 {
						t.Fatalf("%s %s line %d: del numbered %d/%d, want old %d", f.Path, h.Header, i, l.OldNo, l.NewNo, oldNo)
					}
					oldNo++
				case KindCtx:
					ol++
					nl++
					if l.OldNo != oldNo || l.NewNo != newNo {
						t.Fatalf("%s %s line %d: ctx numbered %d/%d, want %d/%d", f.Path, h.Header, i, l.OldNo, l.NewNo, oldNo, newNo)
					}
					oldNo++
					newNo++
				default:
					t.Fatalf("%s: line kind %q", f.Path, l.Kind)
				}
			}
			if ol > h.OldLines || nl > h.NewLines {
				t.Fatalf("%s %s: %d old and %d new lines kept, header says %d and %d", f.Path, h.Header, ol, nl, h.OldLines, h.NewLines)
			}
		}
		if f.Truncated && !res.Truncated {
			t.Fatalf("%s truncated but the result is not", f.Path)
		}
		if !f.Truncated && (fa != f.Additions || fd != f.Deletions) {
			t.Fatalf("%s: counts +%d -%d, kept lines +%d -%d", f.Path, f.Additions, f.Deletions, fa, fd)
		}
		if fa > f.Additions || fd > f.Deletions {
			t.Fatalf("%s: more kept lines (+%d -%d) than counted (+%d -%d)", f.Path, fa, fd, f.Additions, f.Deletions)
		}
		adds += f.Additions
		dels += f.Deletions
	}
	if bytes != res.Bytes {
		t.Fatalf("bytes %d, kept text is %d", res.Bytes, bytes)
	}
	if len(res.Files) == res.FileCount && (adds != res.Additions || dels != res.Deletions) {
		t.Fatalf("totals +%d -%d, files sum to +%d -%d", res.Additions, res.Deletions, adds, dels)
	}
	if !res.Truncated && len(res.Files) != res.FileCount {
		t.Fatalf("%d of %d files kept without truncation", len(res.Files), res.FileCount)
	}
}

// TestParseRealDiffs parses what the installed git really prints for each
// kind of change.
func TestParseRealDiffs(t *testing.T) {
	binary := "\x00\x01\x02binary\x00"
	cases := []struct {
		name  string
		base  func(r *repo) // committed state
		edit  func(r *repo) // the change, staged by stagedDiff
		extra []string      // git options before the diff flags
		want  []string      // summary
		check func(*testing.T, *Result)
	}{
		{
			name: "multiple hunks",
			base: func(r *repo) { r.write("f.txt", lines(30)) },
			edit: func(r *repo) {
				s := strings.Replace(lines(30), "line 2\n", "line two\n", 1)
				s = strings.Replace(s, "line 25\n", "line 25\nline 25b\n", 1)
				r.write("f.txt", s)
			},
			want: []string{"modified f.txt +2 -1 hunks=2"},
			check: func(t *testing.T, res *Result) {
				h := res.Files[0].Hunks
				want0 := Hunk{Header: "@@ -1,5 +1,5 @@", OldStart: 1, OldLines: 5, NewStart: 1, NewLines: 5, Lines: []Line{
					{Kind: KindCtx, Text: "line 1", OldNo: 1, NewNo: 1},
					{Kind: KindDel, Text: "line 2", OldNo: 2},
					{Kind: KindAdd, Text: "line two", NewNo: 2},
					{Kind: KindCtx, Text: "line 3", OldNo: 3, NewNo: 3},
					{Kind: KindCtx, Text: "line 4", OldNo: 4, NewNo: 4},
					{Kind: KindCtx, Text: "line 5", OldNo: 5, NewNo: 5},
				}}
				if !reflect.DeepEqual(h[0], want0) {
					t.Fatalf("hunk 0:\n got %s\nwant %s", js(h[0]), js(want0))
				}
				if h[1].OldStart != 23 || h[1].NewStart != 23 || h[1].OldLines != 6 || h[1].NewLines != 7 || h[1].Header != "@@ -23,6 +23,7 @@ line 22" {
					t.Fatalf("hunk 1 header %q: %+v", h[1].Header, h[1])
				}
				if l := h[1].Lines[3]; l.Kind != KindAdd || l.Text != "line 25b" || l.NewNo != 26 {
					t.Fatalf("added line: %+v", l)
				}
			},
		},
		{
			name: "function context in header",
			base: func(r *repo) {
				r.write("m.go", "package m\n\nfunc run() {\n"+strings.Repeat("\tx()\n", 10)+"}\n")
			},
			edit: func(r *repo) {
				r.write("m.go", "package m\n\nfunc run() {\n"+strings.Repeat("\tx()\n", 8)+"\ty()\n\tx()\n}\n")
			},
			want: []string{"modified m.go +1 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				if h := res.Files[0].Hunks[0].Header; !strings.HasSuffix(h, " @@ func run() {") {
					t.Fatalf("header %q lacks the function context", h)
				}
			},
		},
		{
			name: "added deleted and empty new file",
			base: func(r *repo) { r.write("gone.txt", "a\nb\n") },
			edit: func(r *repo) {
				os.Remove(filepath.Join(r.dir, "gone.txt"))
				r.write("new.txt", "x\n")
				r.write("empty.txt", "")
			},
			want: []string{
				"added empty.txt +0 -0 mode >100644",
				"deleted gone.txt +0 -2 mode 100644> hunks=1",
				"added new.txt +1 -0 mode >100644 hunks=1",
			},
			check: func(t *testing.T, res *Result) {
				if h := res.Files[2].Hunks[0]; h.OldStart != 0 || h.OldLines != 0 || h.NewStart != 1 || h.NewLines != 1 || h.Header != "@@ -0,0 +1 @@" {
					t.Fatalf("new file hunk %+v", h)
				}
				if l := res.Files[1].Hunks[0].Lines[1]; l.Kind != KindDel || l.OldNo != 2 || l.Text != "b" {
					t.Fatalf("deleted line %+v", l)
				}
			},
		},
		{
			name: "pure rename",
			base: func(r *repo) { r.write("old.txt", lines(5)) },
			edit: func(r *repo) { r.mv("old.txt", "dir/new.txt") },
			want: []string{"renamed dir/new.txt<-old.txt +0 -0"},
		},
		{
			name: "rename with edits",
			base: func(r *repo) { r.write("old.txt", lines(20)) },
			edit: func(r *repo) {
				r.git("mv", "old.txt", "new.txt")
				r.write("new.txt", strings.Replace(lines(20), "line 10\n", "line ten\n", 1))
			},
			want: []string{"renamed new.txt<-old.txt +1 -1 hunks=1"},
		},
		{
			name: "mode change only",
			base: func(r *repo) { r.write("run.sh", "echo hi\n") },
			edit: func(r *repo) { os.Chmod(filepath.Join(r.dir, "run.sh"), 0o755) },
			want: []string{"modified run.sh +0 -0 mode 100644>100755"},
		},
		{
			name: "binary added and modified",
			base: func(r *repo) { r.write("img.bin", binary) },
			edit: func(r *repo) {
				r.write("img.bin", binary+"more")
				r.write("new.bin", binary)
			},
			want: []string{"modified img.bin bin +0 -0", "added new.bin bin +0 -0 mode >100644"},
		},
		{
			name: "no newline at end",
			base: func(r *repo) { r.write("n.txt", "a\nb") },
			edit: func(r *repo) { r.write("n.txt", "a\nc") },
			want: []string{"modified n.txt +1 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				ls := res.Files[0].Hunks[0].Lines
				want := []Line{
					{Kind: KindCtx, Text: "a", OldNo: 1, NewNo: 1},
					{Kind: KindDel, Text: "b", OldNo: 2, NoNewline: true},
					{Kind: KindAdd, Text: "c", NewNo: 2, NoNewline: true},
				}
				if !reflect.DeepEqual(ls, want) {
					t.Fatalf("lines:\n got %s\nwant %s", js(ls), js(want))
				}
			},
		},
		{
			name: "newline added at end",
			base: func(r *repo) { r.write("n.txt", "a") },
			edit: func(r *repo) { r.write("n.txt", "a\n") },
			want: []string{"modified n.txt +1 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				ls := res.Files[0].Hunks[0].Lines
				if !ls[0].NoNewline || ls[1].NoNewline {
					t.Fatalf("lines %s", js(ls))
				}
			},
		},
		{
			name: "quoted unicode path",
			base: func(r *repo) { r.write("spécial.txt", lines(10)) },
			edit: func(r *repo) {
				r.write("spécial.txt", strings.Replace(lines(10), "line 5\n", "line five\n", 1))
				r.mv("spécial.txt", "dír/spécial ünï.txt")
				r.write("tab\there.txt", "t\n")
			},
			want: []string{"renamed dír/spécial ünï.txt<-spécial.txt +1 -1 hunks=1", "added tab\there.txt +1 -0 mode >100644 hunks=1"},
		},
		{
			name:  "unquoted unicode path (core.quotePath=false)",
			base:  func(r *repo) { r.write("spécial.txt", "a\n") },
			edit:  func(r *repo) { r.write("spécial.txt", "b\n"); r.write("ünï bin", binary) },
			extra: []string{"-c", "core.quotePath=false"},
			want:  []string{"modified spécial.txt +1 -1 hunks=1", "added ünï bin bin +0 -0 mode >100644"},
		},
		{
			name: "paths with spaces",
			base: func(r *repo) { r.write("my file.txt", "a\n"); r.write("a b/c d.txt", "x\n") },
			edit: func(r *repo) {
				r.write("my file.txt", "b\n")
				r.git("mv", "a b/c d.txt", "a b/e f.txt")
				os.Chmod(filepath.Join(r.dir, "a b/e f.txt"), 0o755)
			},
			want: []string{"renamed a b/e f.txt<-a b/c d.txt +0 -0 mode 100644>100755", "modified my file.txt +1 -1 hunks=1"},
		},
		{
			name: "crlf content",
			base: func(r *repo) { r.write("w.txt", "a\r\nb\r\n") },
			edit: func(r *repo) { r.write("w.txt", "a\r\nc\r\n") },
			want: []string{"modified w.txt +1 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				if l := res.Files[0].Hunks[0].Lines[2]; l.Text != "c\r" || l.NewNo != 2 {
					t.Fatalf("crlf line %+v", l)
				}
			},
		},
		{
			name:  "blank context lines suppressed (treediff.suppressBlankEmpty)",
			base:  func(r *repo) { r.write("b.txt", "a\n\nb\n\nc\n") },
			edit:  func(r *repo) { r.write("b.txt", "a\n\nB\n\nc\n") },
			extra: []string{"-c", "treediff.suppressBlankEmpty=true"},
			want:  []string{"modified b.txt +1 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				ls := res.Files[0].Hunks[0].Lines
				if len(ls) != 6 || ls[1].Kind != KindCtx || ls[1].Text != "" || ls[5].NewNo != 5 {
					t.Fatalf("lines %s", js(ls))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t)
			tc.base(r)
			r.commitAll("base")
			tc.edit(r)
			raw := r.stagedDiff(tc.extra...)
			writeCorpus(t, "real-"+tc.name, raw)
			res, err := Parse(raw, Limits{})
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, raw)
			}
			checkInvariants(t, res, Limits{})
			if got := summary(res); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("files:\n got %q\nwant %q\n%s", got, tc.want, raw)
			}
			if res.Truncated || res.FileCount != len(tc.want) {
				t.Fatalf("truncated %v, file count %d", res.Truncated, res.FileCount)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// writeCorpus saves raw as a FuzzParse seed under testdata/fuzz when
// SHARD_DIFF_WRITE_CORPUS=1 (how the committed real-diff seeds were made;
// rerun it after changing the cases).
func writeCorpus(t *testing.T, name string, raw []byte) {
	t.Helper()
	if os.Getenv("SHARD_DIFF_WRITE_CORPUS") != "1" {
		return
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(raw)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
