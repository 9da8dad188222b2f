package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
	"github.com/shard-dev/shard/runtime/adapter/acp"
	"github.com/shard-dev/shard/runtime/adapter/pi"
)

// runAdapter is `shardd agent --adapter <kind> -- <command…>`:
// the runtime of an acp profile. It reads what the reference runtime reads
// from the daemon's environment (SHARD_SESSION_DIR, the headless timeout,
// SHARD_AGENT_MODE/_PROVIDER/_MODEL: the selection it restores)
// plus SHARD_ADAPTER_MODELS (the profile's models) and
// SHARD_ACP_AUTH_METHOD (an ACP authenticate method, set in the profile's
// env), SHARD_ACP_FS (off: the adapter offers no fs/* to the agent) and,
// for acp, SHARD_MCP_SERVERS (the MCP servers it passes in session/new,
// with Shard's own `shard` server unless SHARD_ACP_SHARD_MCP is off);
// the agent inherits the whole environment but SHARD_MCP_SERVERS
// (SHARD_AGENT_ID and SHARD_HOME included, so the daemon's sweep finds its
// processes).
func runAdapter(ctx context.Context, kind string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(command) == 0 {
		return fmt.Errorf("--adapter %s: no agent command after --", kind)
	}
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	home, _ := os.UserHomeDir()
	cfg, err := config.Load(fs, os.Environ(), home)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("adapter", kind)
	// What the agent starts and leaves behind is the adapter's to wait
	// for, so that the daemon's kill of the group after the adapter exits
	// does not cut its shutdown short.
	if err := adapter.AdoptOrphans(); err != nil {
		log.Warn("the agent's orphans are not waited for", "err", err)
	}
	var b adapter.Backend
	switch kind {
	case config.KindACP:
		// The MCP servers go to the agent in session/new, not in its
		// environment.
		mcps, err := acp.DecodeMCPServers(os.Getenv(acp.EnvMCPServers))
		if err != nil {
			log.Warn("no MCP servers", "err", err)
		}
		// Shard's own MCP server, so that the agent can run Shard
		// subagents and work in a team; a declared server of the same
		// name wins, as the most specific declaration does.
		exe, _ := os.Executable()
		if name, s, ok := shardMCPServer(os.Getenv, exe); ok && mcps[name].Command == "" && mcps[name].URL == "" {
			if mcps == nil {
				mcps = map[string]protocol.MCPServer{}
			}
			mcps[name] = s
		}
		b = acp.New(acp.Options{Command: command, Cwd: cwd, Env: acp.WithoutEnv(os.Environ(), acp.EnvMCPServers), Stderr: stderr,
			SessionDir: os.Getenv("SHARD_SESSION_DIR"), AuthMethod: os.Getenv("SHARD_ACP_AUTH_METHOD"),
			NoFS: os.Getenv("SHARD_ACP_FS") == "off", MCPServers: mcps, Log: log})
	case config.KindPi:
		b = pi.New(pi.Options{Command: command, Cwd: cwd, Env: os.Environ(), Stderr: stderr, Log: log})
	default:
		return fmt.Errorf("--adapter %q: want acp or pi", kind)
	}
	var models []string
	if v := os.Getenv("SHARD_ADAPTER_MODELS"); v != "" {
		models = strings.Split(v, ",")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	in, restore := pollable(stdin)
	defer restore()
	return adapter.Run(ctx, adapter.Options{Stdin: in, Stdout: stdout, Log: log, ServerVersion: version,
		HeadlessTimeout: cfg.Headless.Timeout, Models: models, SessionDir: os.Getenv("SHARD_SESSION_DIR"),
		Mode: os.Getenv("SHARD_AGENT_MODE"), Provider: os.Getenv("SHARD_AGENT_PROVIDER"), Model: os.Getenv("SHARD_AGENT_MODEL")}, b)
}

// pollable returns stdin, when it is a file the Go runtime's poller can
// serve (the pipe the daemon gives its runtimes), as a non-blocking copy
// of its descriptor: closing that ends a read in progress, which is how
// adapter.Run stops its reader when the agent exits before the daemon
// closes stdin (a blocking read would hold Run until then). restore puts
// the descriptor back in blocking mode, for whoever shares it (a
// terminal, when run by hand). Anything else is returned as it is.
func pollable(stdin io.Reader) (r io.Reader, restore func()) {
	f, ok := stdin.(*os.File)
	if !ok {
		return stdin, func() {}
	}
	orig := int(f.Fd())
	fd, err := syscall.Dup(orig)
	if err != nil {
		return stdin, func() {}
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return stdin, func() {}
	}
	nf := os.NewFile(uintptr(fd), f.Name())
	return nf, func() {
		_ = nf.Close()
		_ = syscall.SetNonblock(orig, false)
	}
}
