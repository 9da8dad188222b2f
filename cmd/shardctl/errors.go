package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/protocol"
)

// Exit codes. They are documented in the root command's Long help; keep the
// two in step.
const (
	exitOK          = 0
	exitFailed      = 1   // the command failed: a protocol error, an error event, a lost connection
	exitUsage       = 2   // bad flags or arguments
	exitUnreachable = 3   // the daemon's socket is missing, refuses, or never says hello
	exitNotComplete = 4   // jobs wait: the runs ended, not all completed
	exitWaitTimeout = 5   // jobs wait: timed out
	exitDaemonUp    = 6   // --offline while the daemon holds the database
	exitProblems    = 7   // doctor: a check failed
	exitInterrupted = 130 // Ctrl-C during a command that does not end on it (prompt, jobs wait, plain attach)
)

// exitError carries an exit code with the error that caused it.
type exitError struct {
	code int
	err  error
	// printed means the message was already shown to the user.
	printed bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// failed marks err as a failed command (exit 1).
func failed(err error) error { return &exitError{code: exitFailed, err: err} }

// exitWith marks err with an exit code; printed says the command already
// told the user.
func exitWith(code int, err error, printed bool) error {
	return &exitError{code: code, err: err, printed: printed}
}

// usageErrorf is a usage error (exit 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// unreachableError says the daemon could not be reached at socket.
type unreachableError struct {
	socket string
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon: %v", e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// wrapRunE makes every RunE in the tree return an *exitError: errors a
// command returns unclassified are command failures (exit 1). Anything else
// reaching execute comes from cobra itself — unknown commands, bad flags,
// wrong argument counts — and is a usage error.
func wrapRunE(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if err == nil {
				return nil
			}
			var ee *exitError
			if errors.As(err, &ee) {
				return err
			}
			var ue *unreachableError
			if errors.As(err, &ue) {
				return &exitError{code: exitUnreachable, err: err}
			}
			if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
				return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
			}
			return failed(err)
		}
	}
	for _, sub := range c.Commands() {
		wrapRunE(sub)
	}
}

// execute runs root and turns its outcome into an exit code, printing the
// error as "shardctl: CODE: message" (protocol errors) or "shardctl: message".
func execute(ctx context.Context, root *cobra.Command) int {
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	stderr := root.ErrOrStderr()
	var ee *exitError
	if !errors.As(err, &ee) {
		fmt.Fprintf(stderr, "shardctl: %v\n", err)
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	if !ee.printed {
		printError(stderr, ee.err)
		if ee.code == exitUsage {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return ee.code
}

// printError writes err as one "shardctl: …" line.
func printError(w io.Writer, err error) {
	var ue *unreachableError
	if errors.As(err, &ue) {
		cause := ue.err
		var se *os.SyscallError
		if errors.As(cause, &se) {
			cause = se
		}
		fmt.Fprintf(w, "shardctl: cannot reach the daemon: is shardd running? (socket %s): %v\n", ue.socket, cause)
		return
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		fmt.Fprintf(w, "shardctl: %s: %s\n", pe.Code, pe.Message)
		return
	}
	fmt.Fprintf(w, "shardctl: %v\n", err)
}
