package main

import "github.com/spf13/cobra"

func newAgentsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "agents",
		Aliases: []string{"agent"},
		Short:   "List and create agents",
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
	cmd.AddCommand(
		newAgentsLsCommand(g),
		newAgentsCreateCommand(g),
	)
	return cmd
}
