package main

import "github.com/spf13/cobra"

func newAgentsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "agents",
		Aliases: []string{"agent"},
		Short:   "List, inspect, create, stop and remove agents",
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
	cmd.AddCommand(
		newAgentsLsCommand(g),
		newAgentsShowCommand(g),
		newAgentsCreateCommand(g),
		newAgentsKillCommand(g),
		newAgentsTerminateCommand(g),
		newAgentsRenameCommand(g),
		newAgentsRmCommand(g),
		newAgentsPruneCommand(g),
	)
	return cmd
}
