package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// jobsShowOptions are the options of shardctl jobs show.
type jobsShowOptions struct {
	g      *globalOptions
	output outputOptions
	// names are the agents' names (titles included) shown beside the
	// parent's id.
	names map[string]string
}

// AddFlags registers the jobs show flags on cmd.
func (o *jobsShowOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newJobsShowCommand(g *globalOptions) *cobra.Command {
	o := &jobsShowOptions{g: g}
	cmd := &cobra.Command{
		Use:     "show JOB|RUN|AGENT|ALIAS",
		Aliases: []string{"describe"},
		Short:   "Describe one job and its runs",
		Long: `Describe one job (jobs.show): its parent, strategy, state, times, the chain
step it is at and the step that halted it, then each run with its alias,
ids, state, when it was queued, how long it waited in the queue, how long it
ran, the stop stage it reached (abort, term, kill), its exit status and its
error. Task text and final text are never shown.

The handle is a job id, a run id, a child agent id (its current or latest
run's job) or an alias. -o json|yaml prints the job's operator view.

With --offline the job comes from shard.db, read-only (the daemon must be
stopped).`,
		Annotations: map[string]string{offlineAnnotation: "yes"},
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if o.g.offline {
				return o.g.withOffline(cmd.Context(), func(st *store.Store) error {
					job, err := offlineShow(st, args[0], o.g.clock.now(), o.g.offlineSigns(st))
					if err != nil {
						return err
					}
					o.names = offlineNames(st)
					return o.print(cmd.OutOrStdout(), job)
				})
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				job, err := showJob(ctx, conn, args[0])
				if err != nil {
					return err
				}
				o.names = agentNamesOf(ctx, conn, []string{job.ParentAgentID})
				return o.print(cmd.OutOrStdout(), job)
			})
		},
	}
	cmd.ValidArgsFunction = completeJobs(g, false)
	o.AddFlags(cmd)
	return cmd
}

func (o *jobsShowOptions) print(w io.Writer, job protocol.OpJob) error {
	if job.Runs == nil {
		job.Runs = []protocol.OpRun{}
	}
	o.output.human(&job)
	if o.output.structured() {
		return o.output.write(w, job)
	}
	return writeJobDetail(w, job, o.names, o.g.clock, newPalette(w, o.g.noColor), termWidth(w))
}
