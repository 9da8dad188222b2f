package treediff

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestParseHandWritten covers input git writes rarely or that only other
// tools write, and input git never writes.
func TestParseHandWritten(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		want      []string
		malformed bool
		check     func(*testing.T, *Result)
	}{
		{
			name: "hunk header without counts",
			in: "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n" +
				"@@ -1 +1 @@\n-a\n+b\n",
			want: []string{"modified x +1 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				h := res.Files[0].Hunks[0]
				if h.OldLines != 1 || h.NewLines != 1 || h.Lines[0].OldNo != 1 || h.Lines[1].NewNo != 1 {
					t.Fatalf("hunk %+v", h)
				}
			},
		},
		{
			name: "mixed header counts and context",
			in: "diff --git a/x b/x\n--- a/x\n+++ b/x\n" +
				"@@ -5,2 +5 @@ func f() {\n ctx\n-gone\n",
			want: []string{"modified x +0 -1 hunks=1"},
			check: func(t *testing.T, res *Result) {
				h := res.Files[0].Hunks[0]
				want := []Line{{Kind: KindCtx, Text: "ctx", OldNo: 5, NewNo: 5}, {Kind: KindDel, Text: "gone", OldNo: 6}}
				if h.Header != "@@ -5,2 +5 @@ func f() {" || !reflect.DeepEqual(h.Lines, want) {
					t.Fatalf("hunk %s", js(h))
				}
			},
		},
		{
			name: "rename with mixed quoting",
			in: "diff --git a/plain \"b/sp\\303\\251\"\nsimilarity index 90%\n" +
				"rename from plain\nrename to \"sp\\303\\251\"\n--- a/plain\n+++ \"b/sp\\303\\251\"\n@@ -1 +1 @@\n-a\n+b\n",
			want: []string{"renamed spé<-plain +1 -1 hunks=1"},
		},
		{
			name: "binary without paths but a git line",
			in:   "diff --git a/a b/c.png b/a b/c.png\nindex 1..2 100644\nBinary files a/a b/c.png and b/a b/c.png differ\n",
			want: []string{"modified a b/c.png bin +0 -0"},
		},
		{
			name: "git binary patch",
			in: "diff --git a/i.bin b/i.bin\nnew file mode 100644\nindex 0..1\nGIT binary patch\nliteral 3\nKcmZ?wWB>pF01N;C\n\n" +
				"literal 0\nHcmV?d00001\n\n",
			want: []string{"added i.bin bin +0 -0 mode >100644"},
		},
		{
			name: "copy is an added file",
			in:   "diff --git a/a b/b\nsimilarity index 100%\ncopy from a\ncopy to b\n",
			want: []string{"added b +0 -0"},
		},
		{
			name: "plain diff -u without git lines",
			in: "--- x.orig\t2024-01-01 00:00:00\n+++ x\t2024-01-01 00:00:01\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n" +
				"--- /dev/null\n+++ y\n@@ -0,0 +1 @@\n+new\n",
			want: []string{"modified x +1 -1 hunks=1", "added y +1 -0 hunks=1"},
		},
		{
			name: "text before the first file is ignored",
			in:   "commit abc\nAuthor: t\n\n    msg\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b",
			want: []string{"modified x +1 -1 hunks=1"},
		},
		{
			name: "submodule",
			in: "diff --git a/sub b/sub\nindex 1111111..2222222 160000\n--- a/sub\n+++ b/sub\n@@ -1 +1 @@\n" +
				"-Subproject commit 1111111111111111111111111111111111111111\n+Subproject commit 2222222222222222222222222222222222222222\n",
			want: []string{"modified sub +1 -1 hunks=1"},
		},
		{
			name:      "hunk cut short by the next file",
			in:        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-c\n+d\n",
			want:      []string{"modified x +0 -1 hunks=1", "modified y +1 -1 hunks=1"},
			malformed: true,
		},
		{
			name:      "input ends inside a hunk",
			in:        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n",
			want:      []string{"modified x +0 -0 hunks=1"},
			malformed: true,
		},
		{
			name:      "bad hunk header",
			in:        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -a +b @@\n-a\n",
			want:      []string{"modified x +0 -0"},
			malformed: true,
		},
		{
			name:      "bad quoted path",
			in:        "diff --git \"a/x b/x\n--- \"a/x\n+++ \"b/\\x\"\n",
			want:      []string{},
			malformed: true,
		},
		{
			name: "empty input",
			in:   "",
			want: []string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Parse([]byte(tc.in), Limits{})
			if tc.malformed != (err != nil) || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("err %v, want malformed %v", err, tc.malformed)
			}
			checkInvariants(t, res, Limits{})
			if got := summary(res); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("files:\n got %q\nwant %q", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// TestParseLimits checks both caps: past the byte cap lines stop being
// kept but counts stay exact; past the file cap files are dropped but
// counted.
func TestParseLimits(t *testing.T) {
	var in strings.Builder
	for _, name := range []string{"a", "b", "c"} {
		in.WriteString("diff --git a/" + name + " b/" + name + "\n--- a/" + name + "\n+++ b/" + name + "\n@@ -1,10 +1,10 @@\n")
		for i := 0; i < 10; i++ {
			in.WriteString("-old\n+new\n")
		}
	}
	raw := []byte(in.String())

	full, err := Parse(raw, Limits{})
	if err != nil || full.Truncated || full.Additions != 30 || full.Deletions != 30 {
		t.Fatalf("uncapped: %v %+v", err, full)
	}

	t.Run("bytes", func(t *testing.T) {
		lim := Limits{MaxBytes: 60} // the header and 10 lines
		res, err := Parse(raw, lim)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, res, lim)
		if !res.Truncated || res.Additions != 30 || res.Deletions != 30 || res.FileCount != 3 || len(res.Files) != 3 {
			t.Fatalf("result %+v", res)
		}
		if !res.Files[0].Truncated || res.Files[0].Additions != 10 || len(res.Files[0].Hunks[0].Lines) == 0 {
			t.Fatalf("first file %s", js(res.Files[0]))
		}
		if f := res.Files[2]; !f.Truncated || len(f.Hunks) != 0 || f.Additions != 10 {
			t.Fatalf("last file %s", js(f))
		}
		if res.Bytes != 18+10*4 {
			t.Fatalf("bytes %d", res.Bytes)
		}
	})
	t.Run("files", func(t *testing.T) {
		lim := Limits{MaxFiles: 2}
		res, err := Parse(raw, lim)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, res, lim)
		if !res.Truncated || len(res.Files) != 2 || res.FileCount != 3 || res.Additions != 30 || res.Files[1].Truncated {
			t.Fatalf("result %+v", res)
		}
	})
}

// TestJSONShape pins the wire names (snake_case, see the package doc) and
// that hunks and lines are arrays, never null.
func TestJSONShape(t *testing.T) {
	res, err := Parse([]byte("diff --git a/a b/b\nold mode 100644\nnew mode 100755\nsimilarity index 90%\nrename from a\nrename to b\n--- a/a\n+++ b/b\n@@ -1 +1 @@\n-x\n+y\n\\ No newline at end of file\n"+
		"diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\n"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got := js(res)
	want := `{"files":[{"path":"b","old_path":"a","status":"renamed","binary":false,"additions":1,"deletions":1,"old_mode":"100644","new_mode":"100755",` +
		`"hunks":[{"header":"@@ -1 +1 @@","old_start":1,"old_lines":1,"new_start":1,"new_lines":1,"lines":[{"kind":"del","text":"x","old_no":1},{"kind":"add","text":"y","new_no":1,"no_newline":true}]}]},` +
		`{"path":"e","status":"added","binary":false,"additions":0,"deletions":0,"new_mode":"100644","hunks":[]}],` +
		`"file_count":2,"additions":1,"deletions":1,"truncated":false,"bytes":16}`
	if got != want {
		t.Fatalf("json:\n got %s\nwant %s", got, want)
	}
}
