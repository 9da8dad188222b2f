package tools_test

import (
	"context"
	"fmt"
	"os"

	"github.com/shard-dev/shard/runtime/tools"
)

// A runtime checks the arguments, asks permission for a mutating call,
// then runs it and reports the result and its render descriptor.
func Example() {
	dir, err := os.MkdirTemp("", "tools-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	env := tools.Env{Cwd: dir}
	ctx := context.Background()

	write, _ := tools.Lookup(tools.NameWrite)
	args := map[string]any{"path": "hello.txt", "content": "hello\nworld\n"}
	if err := write.Check(args); err != nil {
		panic(err)
	}
	prompt, _ := write.Ask(env, args)
	fmt.Println(prompt)
	fmt.Println(write.Run(ctx, env, args).Content.Text)

	edit, _ := tools.Lookup(tools.NameEdit)
	res := edit.Run(ctx, env, map[string]any{"path": "hello.txt", "old_string": "world", "new_string": "shard"})
	fmt.Println(res.Content.Text)
	for _, h := range res.Render.Hunks {
		fmt.Printf("@@ -%d,%d +%d,%d @@\n", h.OldStart, h.OldLines, h.NewStart, h.NewLines)
		for _, l := range h.Lines {
			fmt.Println(l)
		}
	}

	bash, _ := tools.Lookup(tools.NameBash)
	res = bash.Run(ctx, env, map[string]any{"command": "cat hello.txt; exit 1"})
	fmt.Printf("%q is_error=%v exit_code=%d\n", res.Content.Text, res.IsError, *res.ExitCode)

	// Output:
	// Allow write to hello.txt?
	// Created hello.txt (12 bytes)
	// Edited hello.txt: replaced 1 occurrence
	// @@ -1,2 +1,2 @@
	//  hello
	// -world
	// +shard
	// "hello\nshard\n" is_error=true exit_code=1
}
