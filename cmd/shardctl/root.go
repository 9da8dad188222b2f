package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/client"
)

// Defaults of the global flags.
const (
	defaultHomeDir = ".shard"        // under the user's home directory
	socketName     = "daemon.sock"   // under the Shard home
	defaultTimeout = 5 * time.Second // for connecting to the daemon
)

const rootLong = `shardctl inspects and steers a running shardd over its unix socket.

The socket is <home>/daemon.sock, where <home> is --home, else $SHARD_HOME,
else ~/.shard; --socket overrides the whole path.

Exit codes:
  0    success
  1    the command failed: the daemon answered with a protocol error
       (printed as "shardctl: CODE: message"), an agent reported an error
       event, or the connection was lost
  2    usage error: unknown command, bad flag or argument
  3    cannot reach the daemon: the socket is missing or refuses
       connections, or the daemon did not say hello in time (--timeout)
  130  interrupted (Ctrl-C) while a prompt was running; the turn is aborted`

// globalOptions are the flags every command shares.
type globalOptions struct {
	home    string
	socket  string
	noColor bool
	timeout time.Duration
}

// AddFlags registers the global flags on fs (the root's persistent flags).
func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.home, "home", "", "Shard home directory (default $SHARD_HOME, else ~/.shard)")
	fs.StringVar(&o.socket, "socket", "", "daemon socket path (default <home>/daemon.sock)")
	fs.BoolVar(&o.noColor, "no-color", false, "disable colored output (also NO_COLOR=1)")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long to wait while connecting to the daemon")
}

// socketPath resolves --socket, --home, $SHARD_HOME and ~/.shard, in that
// order of precedence.
func (o *globalOptions) socketPath() (string, error) {
	if o.socket != "" {
		return o.socket, nil
	}
	home := o.home
	if home == "" {
		home = os.Getenv("SHARD_HOME")
	}
	if home == "" {
		uh, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the Shard home (set --home or SHARD_HOME): %w", err)
		}
		home = filepath.Join(uh, defaultHomeDir)
	}
	return filepath.Join(home, socketName), nil
}

// connect dials the daemon. The connect timeout bounds the dial and the
// wait for hello only. Failures are *unreachableError (exit 3).
func (o *globalOptions) connect(ctx context.Context) (*client.Conn, error) {
	path, err := o.socketPath()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	conn, err := client.Dial(dctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &unreachableError{socket: path, err: err}
	}
	return conn, nil
}

// oneShot connects, runs fn, and closes. Events are discarded: a one-shot
// command only needs its responses, and draining keeps the client's reader
// from ever blocking on a full event buffer.
func (o *globalOptions) oneShot(ctx context.Context, fn func(ctx context.Context, conn *client.Conn) error) error {
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	go func() {
		for range conn.Events() {
		}
	}()
	return fn(ctx, conn)
}

// newRootCommand builds the whole command tree. It holds no state outside
// the returned command, so tests build a fresh tree per run.
func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:           "shardctl",
		Short:         "Inspect and steer a running shardd",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	g.AddFlags(root.PersistentFlags())
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.timeout <= 0 {
			return usageErrorf("--timeout must be positive, got %s", g.timeout)
		}
		return nil
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%w", err) })

	root.AddCommand(
		newStatusCommand(g),
		newAgentsCommand(g),
		newPromptCommand(g),
		newWatchCommand(g),
		newShutdownCommand(g),
	)
	wrapRunE(root)
	return root
}

// groupRunE is the RunE of a command that only groups subcommands: it shows
// help, and rejects an unknown subcommand as a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}
