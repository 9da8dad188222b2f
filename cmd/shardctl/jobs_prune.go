package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// jobsPruneOptions are the options of shardctl jobs prune.
type jobsPruneOptions struct {
	g         *globalOptions
	output    outputOptions
	olderThan time.Duration
	dryRun    bool
}

// AddFlags registers the jobs prune flags on cmd.
func (o *jobsPruneOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.DurationVar(&o.olderThan, "older-than", -1, "remove finished jobs that ended at least this long ago (required; 0: every finished job)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be removed, remove nothing")
}

func newJobsPruneCommand(g *globalOptions) *cobra.Command {
	o := &jobsPruneOptions{g: g}
	cmd := &cobra.Command{
		Use:   "prune --older-than DUR [--dry-run]",
		Short: "Remove finished jobs and their stopped subagents",
		Long: `Remove the finished jobs that ended at least --older-than ago (jobs.prune):
jobs whose runs are all terminal, whose completion reports were delivered
and that no subagent.wait waits on, with their subagents that nothing else
references (their sessions too). A job whose subagent is still live (its
runtime not stopped, or a client attached) is kept, and so is everything
unfinished. The daemon does this by itself with jobs.retention set.

Run it with --dry-run first: it lists what would go (KIND, ID) and changes
nothing. -o json|yaml prints {"job_ids":[...],"agent_ids":[...]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if o.olderThan < 0 {
				return usageErrorf("prune needs --older-than DUR (0 removes every finished job)")
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.JobsPruneData
				req := &protocol.JobsPrune{Header: protocol.Header{Type: protocol.TypeJobsPrune}, OlderThanMs: o.olderThan.Milliseconds(), DryRun: o.dryRun}
				if err := conn.Call(ctx, req, &data); err != nil {
					return err
				}
				return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *jobsPruneOptions) print(stdout, stderr io.Writer, data protocol.JobsPruneData) error {
	if data.JobIDs == nil {
		data.JobIDs = []string{}
	}
	if data.AgentIDs == nil {
		data.AgentIDs = []string{}
	}
	o.output.human(&data)
	if o.output.structured() {
		return o.output.write(stdout, data)
	}
	if len(data.JobIDs) == 0 && len(data.AgentIDs) == 0 {
		fmt.Fprintln(stderr, "Nothing to prune.")
		return nil
	}
	verb := "Removed"
	if data.DryRun {
		verb = "Would remove"
	}
	fmt.Fprintf(stderr, "%s %d job(s) and %d subagent(s).\n", verb, len(data.JobIDs), len(data.AgentIDs))
	st := o.output.style(o.g)
	tw := newTableNoHeader(stdout, st.noHeaders)
	fmt.Fprintln(tw, "KIND\tID")
	for _, id := range data.JobIDs {
		fmt.Fprintf(tw, "job\t%s\n", id)
	}
	for _, id := range data.AgentIDs {
		fmt.Fprintf(tw, "agent\t%s\n", id)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write prune: %w", err)
	}
	return nil
}
