package main

import "github.com/spf13/cobra"

func newJobsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "jobs",
		Aliases: []string{"job"},
		Short:   "Inspect, stop, steer, relaunch, wait for and prune subagent jobs",
		Long: `Inspect, stop, steer, relaunch and wait for subagent jobs across every parent.

A HANDLE is a job id (job-…), a run id (run-…), a child agent id (agent-…,
meaning its current or latest run) or a friendly alias ("ada"). An alias
that two parents use is ambiguous: use an id. Task text is private and never
shown; neither is a run's final text.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		newJobsLsCommand(g),
		newJobsShowCommand(g),
		newJobsStopCommand(g),
		newJobsRelaunchCommand(g),
		newJobsSteerCommand(g),
		newJobsWaitCommand(g),
		newJobsPruneCommand(g),
	)
	return cmd
}
