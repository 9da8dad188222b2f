package treediff

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse feeds Parse arbitrary input. The seeds are real `git diff`
// outputs (testdata/fuzz/FuzzParse, written by TestParseRealDiffs) and
// the hand-written edge cases. Parse must never panic, must return a
// Result that keeps every invariant (checkInvariants: exact counts when not
// truncated, consecutive line numbers in a hunk, caps held) under both the
// default and tiny limits, may only fail with ErrMalformed, and its Result
// must encode to JSON.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n",
		"diff --git \"a/sp\\303\\251 x\" \"b/sp\\303\\251 x\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/sp\\303\\251 x\"\t\n@@ -0,0 +1,2 @@\n+a\n+\n",
		"diff --git a/a b/b\nold mode 100644\nnew mode 100755\nsimilarity index 90%\nrename from a\nrename to b\n",
		"diff --git a/i b/i\nindex 1..2 100644\nBinary files a/i and b/i differ\n",
		"--- x\n+++ y\n@@ -1,2 +1 @@ ctx\n a\n\n",
		"@@ -4294967295,4294967295 +1 @@\n-\n",
	} {
		f.Add([]byte(s))
	}
	tiny := Limits{MaxBytes: 64, MaxFiles: 2}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range []Limits{{}, tiny} {
			res, err := Parse(data, lim)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			checkInvariants(t, res, lim)
			if _, err := json.Marshal(res); err != nil {
				t.Fatalf("marshal: %v", err)
			}
		}
	})
}
