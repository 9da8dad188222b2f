package plan_test

import (
	"fmt"

	"github.com/shard-dev/shard/team/plan"
)

// The diamond of docs/sim.md: two tasks in parallel, a third after both.
func ExampleParse() {
	tasks, err := plan.Parse(`Add a --version flag, split in three.

- version constant: sim: tool write {"path":"version.go","content":"package main\n"}
- flag: sim: say adding the flag
  sim: tool edit {"path":"main.go","old":"flag.Parse()","new":"flag.Parse()"}
- docs: sim: say documenting it (after 1, 2)
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, t := range tasks {
		fmt.Printf("%d %s after %v: %q\n", i+1, t.Title, t.After, t.Prompt)
	}
	// Output:
	// 1 version constant after []: "sim: tool write {\"path\":\"version.go\",\"content\":\"package main\\n\"}"
	// 2 flag after []: "sim: say adding the flag\nsim: tool edit {\"path\":\"main.go\",\"old\":\"flag.Parse()\",\"new\":\"flag.Parse()\"}"
	// 3 docs after [1 2]: "sim: say documenting it"
}
