package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// jobsRelaunchOptions are the options of shardctl jobs relaunch.
type jobsRelaunchOptions struct {
	g      *globalOptions
	output outputOptions
	task   string
}

// AddFlags registers the jobs relaunch flags on cmd.
func (o *jobsRelaunchOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.task, "task", "", "the new task (required; private: never shown again)")
}

func newJobsRelaunchCommand(g *globalOptions) *cobra.Command {
	o := &jobsRelaunchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "relaunch HANDLE --task TEXT",
		Short: "Run a new task on a child agent that has stopped",
		Long: `Relaunch a child agent with a new task (subagent.relaunch, on behalf of its
parent): a new job and run on the same agent, session and alias, with its
conversation history. The child must have no queued or active run.

HANDLE is the child's agent id, alias or one of its run ids; a job id works
when the job has a single run. Prints the new job and run ids; -o json|yaml
prints subagent.relaunch's data.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if strings.TrimSpace(o.task) == "" {
				return usageErrorf("--task is required")
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, args[0], cmd.OutOrStdout())
			})
		},
	}
	cmd.ValidArgsFunction = completeJobs(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *jobsRelaunchOptions) run(ctx context.Context, conn *client.Conn, handle string, w io.Writer) error {
	job, err := showJob(ctx, conn, handle)
	if err != nil {
		return err
	}
	target := handle
	if ids.HasPrefix(handle, ids.Job) {
		if len(job.Runs) != 1 {
			return usageErrorf("job %s has %d runs; name one by its run id, agent id or alias", handle, len(job.Runs))
		}
		target = job.Runs[0].AgentID
	}
	msg := &protocol.SubagentRelaunch{
		Header:        protocol.Header{Type: protocol.TypeSubagentRelaunch},
		ParentAgentID: job.ParentAgentID, Target: target, Task: o.task,
	}
	var data protocol.SubagentRelaunchData
	if err := conn.Call(ctx, msg, &data); err != nil {
		return err
	}
	o.output.human(&data)
	if o.output.structured() {
		return o.output.write(w, data)
	}
	_, err = fmt.Fprintf(w, "Relaunched %s (%s): job %s, run %s, %s\n",
		orDash(data.Alias), data.AgentID, data.JobID, data.RunID, data.State)
	return err
}
