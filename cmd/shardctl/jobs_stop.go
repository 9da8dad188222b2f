package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// jobsStopOptions are the options of shardctl jobs stop.
type jobsStopOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the jobs stop flags on cmd.
func (o *jobsStopOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newJobsStopCommand(g *globalOptions) *cobra.Command {
	o := &jobsStopOptions{g: g}
	cmd := &cobra.Command{
		Use:     "stop HANDLE",
		Aliases: []string{"cancel"},
		Short:   "Stop a job or one of its runs",
		Long: `Stop a job or a run (subagent.stop, on behalf of the job's parent). A job id
cancels every queued and active run of the job; a run id, agent id or alias
cancels only that run (stopping the active step of a chain cancels the rest
of the chain). Queued runs end at once; active ones go through the abort →
graceful → kill escalation, which continues after this command returns
(follow it with "shardctl jobs wait HANDLE" or "jobs show").

Prints the runs the stop cancelled; stopping a job that already ended is
not an error and cancels nothing. -o json|yaml prints subagent.stop's data
plus the parent_agent_id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	cmd.ValidArgsFunction = completeJobs(g, false)
	o.AddFlags(cmd)
	return cmd
}

// stopView is what jobs stop prints.
type stopView struct {
	ParentAgentID string `json:"parent_agent_id"`
	protocol.SubagentStopData
}

func (o *jobsStopOptions) run(ctx context.Context, conn *client.Conn, handle string, stdout, stderr io.Writer) error {
	job, err := showJob(ctx, conn, handle)
	if err != nil {
		return err
	}
	msg := &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: job.ParentAgentID, Handle: handle}
	v := stopView{ParentAgentID: job.ParentAgentID}
	if err := conn.Call(ctx, msg, &v.SubagentStopData); err != nil {
		return err
	}
	if v.Cancelled == nil {
		v.Cancelled = []protocol.CancelledRun{}
	}
	o.output.human(&v)
	if o.output.structured() {
		return o.output.write(stdout, v)
	}
	if len(v.Cancelled) == 0 {
		fmt.Fprintf(stderr, "Nothing to stop: %s has already ended.\n", handle)
		return nil
	}
	p := newPalette(stdout, o.g.noColor)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "RUN_ID\tAGENT_ID\tSTATE")
	for _, r := range v.Cancelled {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.RunID, orDash(r.AgentID), p.runState(r.State))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write runs: %w", err)
	}
	for _, r := range v.Cancelled {
		if !r.State.Terminal() {
			fmt.Fprintf(stderr, "Stopping: active runs end through abort → graceful → kill; follow with \"shardctl jobs wait %s\".\n", handle)
			break
		}
	}
	return nil
}
