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

// jobsSteerOptions are the options of shardctl jobs steer.
type jobsSteerOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the jobs steer flags on cmd.
func (o *jobsSteerOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newJobsSteerCommand(g *globalOptions) *cobra.Command {
	o := &jobsSteerOptions{g: g}
	cmd := &cobra.Command{
		Use:   "steer HANDLE MESSAGE...",
		Short: "Send a message into a running child's turn",
		Long: `Steer an active run (subagent.steer, on behalf of its parent): the message
joins the run's turn in flight before the child's next model call. It is
strict: the answer comes once the message reached the model ("injected"),
and when the turn ends first the steer is dropped and shardctl exits 1 with
CONFLICT. It is never kept as a later prompt.

HANDLE is the child's run id, agent id or alias; a job id works when the job
has a single run. -o json|yaml prints subagent.steer's data.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			msg := strings.Join(args[1:], " ")
			if strings.TrimSpace(msg) == "" {
				return usageErrorf("the message is empty")
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, args[0], msg, cmd.OutOrStdout())
			})
		},
	}
	cmd.ValidArgsFunction = completeJobs(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *jobsSteerOptions) run(ctx context.Context, conn *client.Conn, handle, message string, w io.Writer) error {
	job, err := showJob(ctx, conn, handle)
	if err != nil {
		return err
	}
	target := handle
	if ids.HasPrefix(handle, ids.Job) {
		if len(job.Runs) != 1 {
			return usageErrorf("job %s has %d runs; name one by its run id, agent id or alias", handle, len(job.Runs))
		}
		target = job.Runs[0].RunID
	}
	var data protocol.SubagentSteerData
	if err := conn.Call(ctx, &protocol.SubagentSteer{
		Header:        protocol.Header{Type: protocol.TypeSubagentSteer},
		ParentAgentID: job.ParentAgentID, Target: target, Message: message,
	}, &data); err != nil {
		return err
	}
	o.output.human(&data)
	if o.output.structured() {
		if err := o.output.write(w, data); err != nil {
			return err
		}
	} else if data.Status == protocol.SteerInjected {
		if _, err := fmt.Fprintf(w, "Injected into turn %s of run %s (%s)\n", data.TurnID, data.RunID, data.CorrelationID); err != nil {
			return err
		}
	}
	if data.Status != protocol.SteerInjected {
		// The turn ended before the message reached the model: it was
		// dropped, as the daemon's CONFLICT says.
		return failed(protocol.Errorf(protocol.CodeConflict, "run %s had no turn in flight to take the steer; it was dropped (%s)",
			data.RunID, data.CorrelationID))
	}
	return nil
}
