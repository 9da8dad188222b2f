package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/acpface"
)

// acpOptions are the flags of shardctl acp: how the agents its sessions
// create are made.
type acpOptions struct {
	g         *globalOptions
	profile   string
	model     string
	provider  string
	mode      string
	workspace bool
	verbose   bool
}

func newACPCommand(g *globalOptions) *cobra.Command {
	o := &acpOptions{g: g}
	cmd := &cobra.Command{
		Use:   "acp",
		Short: "Serve the Agent Client Protocol on stdio, for editors",
		Long: `Run as an ACP agent on stdin/stdout, fronting the daemon: the command an
editor (Zed, JetBrains, Neovim plugins, acpx) launches as a custom agent.

session/new creates a durable Shard agent in the session's cwd (the sessionId
is its agent id); session/list lists the agents under a cwd; session/load
attaches and replays the transcript, session/resume attaches without it.
Prompts stream text, thinking and tool calls with their diffs; the agent's
permission requests are the editor's session/request_permission, answered
first-wins with every other client. Closing the editor leaves the agent
running. Diagnostics go to stderr, never prompts or text.

--profile, --model, --provider and --mode are agent.create's fields for the
agents it creates; --workspace creates each in a workspace of its own (a git
worktree on a new branch, like shardctl workspace create), as does the
session/new _meta key "shard.dev/workspace": true.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			socket, err := o.g.socketPath()
			if err != nil {
				return err
			}
			level := slog.LevelWarn
			if o.verbose {
				level = slog.LevelInfo
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return acpface.Serve(cmd.Context(), acpface.Options{
				Socket: socket, DialTimeout: o.g.timeout,
				Runtime: o.profile, Model: o.model, Provider: o.provider, Mode: o.mode,
				Workspace: o.workspace, Version: clientVersion, Log: log,
			}, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.profile, "profile", "", "runtime profile of the agents it creates (config runtimes:; default shard)")
	fs.StringVar(&o.model, "model", "", "model of the agents it creates: a name or a provider/model id from shardctl models")
	fs.StringVar(&o.provider, "provider", "", "provider of the agents it creates")
	fs.StringVar(&o.mode, "mode", "", "initial mode of the agents it creates (build or plan)")
	fs.BoolVar(&o.workspace, "workspace", false, "create each session's agent in a workspace of its own (a git worktree)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log sessions opened and agents created on stderr")
	return cmd
}
