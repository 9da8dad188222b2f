package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/client"
)

// Defaults of the global flags.
const (
	defaultHomeDir = ".shard"        // under the user's home directory
	socketName     = "daemon.sock"   // under the Shard home
	dbName         = "shard.db"      // under the Shard home
	discoveryName  = "daemon.json"   // under the Shard home
	defaultTimeout = 5 * time.Second // for connecting to the daemon
)

const rootLong = `shardctl inspects and steers a running shardd over its unix socket.

The socket is <home>/daemon.sock, where <home> is --home, else $SHARD_HOME,
else ~/.shard; --socket overrides the whole path (and then <home> defaults to
the socket's directory).

Read commands take -o table|json|yaml. JSON and YAML carry the same stable
snake_case fields; tables are for people (colors and truncation only on a
terminal; --no-color or NO_COLOR=1 turns colors off).

--url connects through the daemon's web listener instead (a node's web
address, http(s)://host:port, or its ws(s)://host:port/ws), with an API token
of that daemon (shardctl token create, on its machine) in $SHARD_TOKEN; in a
cluster, add node=token entries for the nodes attach may fail over to
(SHARD_TOKEN=tok,n1=tok1,n3=tok3). Commands answered on the socket only
(web enroll, token, …) are refused over it.

--offline makes "jobs ls", "jobs show" and "agents ls" read <home>/shard.db
directly, read-only, for forensics while the daemon is down.

Exit codes:
  0    success
  1    the command failed: the daemon answered with a protocol error
       (printed as "shardctl: CODE: message"), an agent reported an error
       event, the connection was lost, or agents rm/prune: an agent was
       refused (the table says why)
  2    usage error: unknown command, bad flag or argument
  3    cannot reach the daemon: the socket is missing or refuses
       connections, or the daemon did not say hello in time (--timeout)
  4    jobs wait: the awaited runs ended, but not all completed (failed,
       timed out, cancelled or interrupted)
  5    jobs wait: the wait timed out (--timeout); nothing was cancelled
  6    --offline: the daemon is running and holds the database; ask it
       instead (drop --offline)
  7    doctor: at least one check failed
  8    workspace: the daemon refused with typed data (dirty, conflict,
       confirmation required, …; printed as "refused: KIND: reason")
  9    workspace: no such workspace
  130  interrupted (Ctrl-C, SIGINT): prompt (its turn is aborted),
       jobs wait (nothing is cancelled), attach when not on a terminal`

// clock is the time source of the commands: tests pin it so that tables
// with times and ages are reproducible.
type clock struct {
	now func() time.Time
	loc *time.Location
}

// systemClock is the real clock in local time.
func systemClock() clock { return clock{now: time.Now, loc: time.Local} }

// globalOptions are the flags every command shares.
type globalOptions struct {
	home      string
	socket    string
	noColor   bool
	noHeaders bool
	offline   bool
	url       string // --url: a node's web listener instead of the socket (weburl.go)
	timeout   time.Duration
	clock     clock
}

// AddFlags registers the global flags on fs (the root's persistent flags).
func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.home, "home", "", "Shard home directory (default $SHARD_HOME, else ~/.shard)")
	fs.StringVar(&o.socket, "socket", "", "daemon socket path (default <home>/daemon.sock)")
	fs.BoolVar(&o.noColor, "no-color", false, "disable colored output (also NO_COLOR=1)")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "print list tables without their header line")
	fs.BoolVar(&o.offline, "offline", false, "read <home>/shard.db read-only instead of asking the daemon (jobs ls, jobs show, agents ls; the daemon must be stopped)")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long to wait while connecting to the daemon")
	fs.StringVar(&o.url, "url", "", "connect through the daemon's web listener (http(s)://host:port or ws(s)://host:port/ws) instead of its socket, with the API token in $SHARD_TOKEN")
}

// homeDir resolves the Shard home: --home, else the directory of --socket,
// else $SHARD_HOME, else ~/.shard.
func (o *globalOptions) homeDir() (string, error) {
	switch {
	case o.home != "":
		return o.home, nil
	case o.socket != "":
		return filepath.Dir(o.socket), nil
	}
	if h := os.Getenv("SHARD_HOME"); h != "" {
		return h, nil
	}
	uh, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the Shard home (set --home or SHARD_HOME): %w", err)
	}
	return filepath.Join(uh, defaultHomeDir), nil
}

// socketPath resolves --socket, --home, $SHARD_HOME and ~/.shard, in that
// order of precedence.
func (o *globalOptions) socketPath() (string, error) {
	if o.socket != "" {
		return o.socket, nil
	}
	home, err := o.homeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, socketName), nil
}

// dbPath is <home>/shard.db.
func (o *globalOptions) dbPath() (string, error) {
	home, err := o.homeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, dbName), nil
}

// connect dials the daemon. The connect timeout bounds the dial and the
// wait for hello only. Failures are *unreachableError (exit 3).
func (o *globalOptions) connect(ctx context.Context) (*client.Conn, error) {
	if o.url != "" {
		return o.connectWeb(ctx)
	}
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

// offlineAnnotation marks the commands that support --offline.
const offlineAnnotation = "shardctl/offline"

// newRootCommand builds the whole command tree. It holds no state outside
// the returned command, so tests build a fresh tree per run.
func newRootCommand() *cobra.Command { return newRoot(systemClock()) }

// newRoot is newRootCommand with a given clock.
func newRoot(clk clock) *cobra.Command {
	g := &globalOptions{clock: clk}
	root := &cobra.Command{
		Use:           "shardctl",
		Short:         "Inspect and steer a running shardd",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true // see completion.go
	cobra.AddTemplateFunc("flagUsages", flagUsages)
	tmpl := root.UsageTemplate()
	tmpl = strings.ReplaceAll(tmpl, ".LocalFlags.FlagUsages", "flagUsages .LocalFlags")
	tmpl = strings.ReplaceAll(tmpl, ".InheritedFlags.FlagUsages", "flagUsages .InheritedFlags")
	root.SetUsageTemplate(tmpl)
	g.AddFlags(root.PersistentFlags())
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if g.timeout <= 0 {
			return usageErrorf("--timeout must be positive, got %s", g.timeout)
		}
		if g.offline && cmd.Annotations[offlineAnnotation] == "" {
			return usageErrorf("--offline works with jobs ls, jobs show and agents ls only, not %q", cmd.CommandPath())
		}
		return nil
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%w", err) })

	root.AddCommand(
		newStatusCommand(g),
		newClusterCommand(g),
		newAgentsCommand(g),
		newModelsCommand(g),
		newJobsCommand(g),
		newPromptCommand(g),
		newWatchCommand(g),
		newAttachCommand(g),
		newShutdownCommand(g),
		newDoctorCommand(g),
		newWebCommand(g),
		newTokenCommand(g),
		newWorkspaceCommand(g),
		newTeamCommand(g),
		newVersionCommand(g),
		newQuestionsCommand(g),
		newLogsCommand(g),
		newACPCommand(g),
		newCompletionCommand(),
	)
	wrapRunE(root)
	return root
}

// flagUsages is pflag's FlagUsages without the "[=true|false]" pflag
// v1.1 writes after every boolean flag ("-h, --help[=true|false]"): a
// boolean flag is set by naming it, as everywhere else. The marker is
// blanked, not cut, so the descriptions stay in one column.
func flagUsages(fs *pflag.FlagSet) string {
	return strings.ReplaceAll(fs.FlagUsages(), "[=true|false]", "             ")
}

// groupRunE is the RunE of a command that only groups subcommands: it shows
// help, and rejects an unknown subcommand as a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}
