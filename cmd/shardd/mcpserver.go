package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/runtime/shardmcp"
)

// newMCPCommand is `shardd mcp`: Shard's orchestration as an MCP server on
// stdio (runtime/shardmcp), acting as the agent SHARD_AGENT_ID on the
// daemon socket SHARD_SOCKET. The ACP adapter offers it to the agents it
// hosts, which launch it themselves; run by hand it needs both variables.
// Its log goes to stderr, which an MCP host keeps apart from the protocol.
func newMCPCommand(stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Shard's subagent and team tools as an MCP server on stdio, as the agent SHARD_AGENT_ID",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "shard-mcp")
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return shardmcp.ServeStdio(ctx, shardmcp.Options{Socket: os.Getenv("SHARD_SOCKET"), AgentID: os.Getenv("SHARD_AGENT_ID"),
				Version: version, Log: log})
		},
	}
}
