package main

import "github.com/spf13/cobra"

func newTokenCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Create, list and revoke API tokens for non-browser clients",
		Long: `Create, list and revoke API tokens for non-browser WebSocket clients.

A client sends its token as "Authorization: Bearer <token>" on an upgrade
of /ws that carries no Origin header (browsers enroll instead: shardctl web
enroll). The daemon keeps only a hash of each token and compares it in
constant time; a revoked token fails at once, and connections opened with
it are closed. These commands work over the unix socket only.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		newTokenCreateCommand(g),
		newTokenLsCommand(g),
		newTokenRevokeCommand(g),
	)
	return cmd
}
