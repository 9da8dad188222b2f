package treediff_test

import (
	"fmt"

	"github.com/shard-dev/shard/workspaces/treediff"
)

// ExampleParse parses one file's git diff and walks its numbered lines.
func ExampleParse() {
	raw := "diff --git a/main.go b/main.go\n" +
		"index 3b18e51..a9f2c3d 100644\n" +
		"--- a/main.go\n" +
		"+++ b/main.go\n" +
		"@@ -1,3 +1,3 @@ package main\n" +
		" func main() {\n" +
		"-\tprintln(\"hi\")\n" +
		"+\tprintln(\"hello\")\n" +
		" }\n"
	res, err := treediff.Parse([]byte(raw), treediff.Limits{})
	if err != nil {
		panic(err)
	}
	for _, f := range res.Files {
		fmt.Printf("%s %s +%d -%d\n", f.Status, f.Path, f.Additions, f.Deletions)
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				fmt.Printf("%-3s old=%d new=%d %q\n", l.Kind, l.OldNo, l.NewNo, l.Text)
			}
		}
	}
	fmt.Printf("total +%d -%d truncated=%v\n", res.Additions, res.Deletions, res.Truncated)
	// Output:
	// modified main.go +1 -1
	// ctx old=1 new=1 "func main() {"
	// del old=2 new=0 "\tprintln(\"hi\")"
	// add old=0 new=2 "\tprintln(\"hello\")"
	// ctx old=3 new=3 "}"
	// total +1 -1 truncated=false
}
