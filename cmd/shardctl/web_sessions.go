package main

import "github.com/spf13/cobra"

func newWebSessionsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sessions",
		Aliases: []string{"session"},
		Short:   "List and revoke browser sessions",
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
	cmd.AddCommand(
		newWebSessionsLsCommand(g),
		newWebSessionsRevokeCommand(g),
	)
	return cmd
}
