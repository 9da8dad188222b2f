package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/internal/logfile"
)

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shardd",
		Short: "Run the Shard daemon",
		Long: `shardd hosts durable coding agents, runs each agent's runtime as a child
process, and lets any number of clients attach over the unix socket
($SHARD_HOME/daemon.sock) or the WebSocket endpoint (ws://127.0.0.1:7420/ws).

Every setting can come from $SHARD_HOME/config.yaml, a SHARD_* environment
variable (dots and dashes become underscores) or the flag below, in that order
of precedence (flags win). With no configuration shardd keeps its state under
~/.shard, uses the offline "sim" model and listens on loopback only.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd, stderr)
		},
	}
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().SortFlags = true
	cmd.AddCommand(newAgentCommand(stdin, stdout, stderr))
	cmd.AddCommand(newMCPCommand(stderr))
	return cmd
}

func loadConfig(cmd *cobra.Command) (*config.Config, error) {
	home, _ := os.UserHomeDir()
	return config.Load(cmd.Flags(), os.Environ(), home)
}

// serve runs the daemon until SIGTERM/SIGINT or daemon.shutdown. A first
// signal shuts down gracefully; a second one forces.
func serve(cmd *cobra.Command, stderr io.Writer) error {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return err
	}
	// Refused cluster settings (a non-loopback address without a token,
	// say) fail before anything is written to the home.
	if err := daemon.CheckCluster(cfg); err != nil {
		return err
	}
	// The home is checked before the log file is created in it: a home
	// that is not owner-only is refused as it was found.
	if err := daemon.PrepareHome(cfg); err != nil {
		return err
	}
	logger, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	defer closeLog()

	stopProfile, err := startCPUProfile(os.Getenv(cpuProfileEnv))
	if err != nil {
		return err
	}
	defer func() {
		if err := stopProfile(); err != nil {
			logger.Error("write CPU profile", "err", err)
		}
	}()

	// Signals are caught before the socket accepts anything: a SIGTERM
	// that arrives while starting (a supervisor stopping a service it has
	// just seen accept connections) still shuts down cleanly.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	path, args, err := runtimeCommand(cfg)
	if err != nil {
		return err
	}
	// Under a service manager (systemd Type=notify), readiness and the
	// beginning of a stop are reported on $NOTIFY_SOCKET.
	notifySocket := os.Getenv(notifySocketEnv)
	notify := func(state string) {
		if err := sdNotify(notifySocket, state); err != nil {
			logger.Warn("service manager notification failed", "state", state, "err", err)
		}
	}
	// The adapter of acp/pi runtime profiles is this executable's
	// `agent --adapter`, whatever runtime.command says.
	adapter, err := os.Executable()
	if err != nil {
		return fmt.Errorf("resolve own executable for the adapter: %w", err)
	}
	d, err := daemon.New(cfg, daemon.Options{
		Version: version, RuntimePath: path, RuntimeArgs: args, AdapterPath: adapter,
		Environ: withoutEnv(withoutEnv(withoutEnv(os.Environ(), notifySocketEnv), cpuProfileEnv), heapProfileEnv), Logger: logger,
		OnShutdown: func() { notify("STOPPING=1") },
		// A cluster node's route port, printed before the node waits for
		// the others (with cluster.listen port 0 it is picked then):
		// scripts and tests point their routes or relays at it.
		ClusterRouteBound: func(addr string) {
			fmt.Fprintf(stderr, "shardd: cluster node %s takes routes on %s\n", cfg.Cluster.Node, addr)
		},
	})
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		d.Shutdown(true)
		return err
	}
	// Start has bound the unix socket and the web listener and serves both:
	// clients connecting from now on are accepted.
	notify(fmt.Sprintf("READY=1\nSTATUS=listening on %s and %s/ws", cfg.SocketPath(), d.WebURL()))
	userHome, _ := os.UserHomeDir()
	fmt.Fprint(stderr, banner(cfg, d.WebURL(), d.BrowserURL(), userHome))

	select {
	case <-d.Done():
		return nil
	case sig := <-sigs:
		logger.Info("signal received; shutting down", "signal", sig.String())
	}
	// The heap as the daemon ran, before shutdown releases its actors.
	if err := writeHeapProfile(os.Getenv(heapProfileEnv)); err != nil {
		logger.Error("write heap profile", "err", err)
	}
	go func() {
		if _, ok := <-sigs; ok {
			logger.Warn("second signal; forcing shutdown")
			d.Shutdown(true)
		}
	}()
	d.Shutdown(false)
	return nil
}

// banner is what shardd prints once it serves. The first line names the
// unix socket and the WebSocket endpoint (scripts read it); the second is
// for a person: where the dashboard is, and the command that signs a
// browser in, which the dashboard needs first. The command names the home
// unless it is the default one, and in remote mode says to run it on this
// machine (it works over the unix socket only) while the dashboard's URL
// is the public one browsers use. userHome is the user's home directory.
func banner(cfg *config.Config, webURL, browserURL, userHome string) string {
	enroll := "shardctl web enroll"
	if userHome == "" || cfg.Home != filepath.Join(userHome, ".shard") {
		enroll = "shardctl --home " + shellQuote(cfg.Home) + " web enroll"
	}
	if cfg.Web.Remote() {
		enroll += ", run on this machine"
	}
	return fmt.Sprintf("shardd %s listening on %s and %s/ws (home %s)\n", version, cfg.SocketPath(), webURL, cfg.Home) +
		fmt.Sprintf("dashboard: %s/ (sign a browser in with: %s)\n", browserURL, enroll)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runtimeCommand resolves runtime.command; empty means this executable.
func runtimeCommand(cfg *config.Config) (string, []string, error) {
	if fields := strings.Fields(cfg.Runtime.Command); len(fields) > 0 {
		return fields[0], fields[1:], nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("resolve own executable for the runtime: %w", err)
	}
	return exe, []string{"agent", "--headless"}, nil
}

// newLogger logs JSON to $SHARD_HOME/logs/shardd.log (rotated by size:
// log.max_bytes, log.backups), and text to stderr too when running in the foreground
// (--foreground: containers, where stderr is the log and is no terminal) or
// on a terminal.
func newLogger(cfg *config.Config, stderr io.Writer) (*slog.Logger, func(), error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return nil, nil, fmt.Errorf("log level %q: %w", cfg.Log.Level, err)
	}
	if err := os.MkdirAll(cfg.LogDir(), 0o700); err != nil {
		return nil, nil, fmt.Errorf("create log dir: %w", err)
	}
	f, err := logfile.Open(filepath.Join(cfg.LogDir(), "shardd.log"), int64(cfg.Log.MaxBytes), cfg.Log.Backups)
	if err != nil {
		return nil, nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(f, opts)
	if cfg.Foreground || isTerminal(stderr) {
		h = slog.NewMultiHandler(h, slog.NewTextHandler(stderr, opts))
	}
	return slog.New(h), func() { f.Close() }, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
