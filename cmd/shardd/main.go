package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// version is the build's version string.
const version = "0.1.0-dev"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "shardd:", err)
		os.Exit(1)
	}
}

// run executes shardd with args; it returns an error for a non-zero exit.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
