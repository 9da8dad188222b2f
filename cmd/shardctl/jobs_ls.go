package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// defaultJobsLimit is how many jobs jobs ls shows unless --limit says.
const defaultJobsLimit = 50

// jobsLsOptions are the options of shardctl jobs ls.
type jobsLsOptions struct {
	g      *globalOptions
	output outputOptions
	// names are the agents' names (titles included) shown beside the
	// parents' ids, as read for the last list.
	names  map[string]string
	parent string
	state  string
	since  string
	stuck  bool
	limit  int
	all    bool
	// pageSize is how many jobs one jobs.list asks for.
	pageSize int
	// more: the daemon holds matching jobs beyond the ones shown.
	more  bool
	watch bool
}

// AddFlags registers the jobs ls flags on cmd.
func (o *jobsLsOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.parent, "parent", "", "only jobs of this parent agent id")
	fs.StringVar(&o.state, "state", "", "only jobs in this state: queued, running, completed, failed or cancelled")
	fs.StringVar(&o.since, "since", "", "only jobs created within this long, e.g. 90s, 15m, 2h, 3d")
	fs.BoolVar(&o.stuck, "stuck", false, "only jobs with a stuck run (a stop or a start that is taking too long)")
	fs.IntVar(&o.limit, "limit", defaultJobsLimit, "show at most this many jobs, newest first (0: all)")
	fs.BoolVar(&o.all, "all", false, "show every job (same as --limit 0)")
	fs.IntVar(&o.pageSize, "page-size", listPageSize, "ask the daemon for this many jobs at a time")
	_ = fs.MarkHidden("page-size")
	fs.BoolVarP(&o.watch, "watch", "w", false, "print the list again after every change, until Ctrl-C")
}

func newJobsLsCommand(g *globalOptions) *cobra.Command {
	o := &jobsLsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls [--parent ID] [--state S] [--since DUR] [--stuck]",
		Aliases: []string{"list"},
		Short:   "List jobs, newest first",
		Long: `List jobs of every parent, newest first (jobs.list). The table shows
JOB_ID, PARENT, STRATEGY, STATE, RUNS (terminal/total), CREATED, DURATION
(to the end, or "+" while running) and NOTE (a stuck run, the step that
halted a chain, a stop). --limit (50 unless said) bounds the list; --all
shows every job. shardctl reads the list from the daemon in pages of 200,
following each page's next_cursor. -o json|yaml prints {"jobs":[...]} with each job's
operator view: its runs with timings, queue wait, stop stage, exit status
and error — never task text.

With --offline the jobs come from shard.db, read-only (the daemon must be
stopped).`,
		Annotations: map[string]string{offlineAnnotation: "yes"},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := o.query()
			if err != nil {
				return err
			}
			if o.g.offline {
				if o.watch {
					return usageErrorf("--watch needs the daemon; drop --offline")
				}
				return o.g.withOffline(cmd.Context(), func(st *store.Store) error {
					data, err := offlineJobs(st, q, o.g.clock.now(), o.g.offlineSigns(st))
					if err != nil {
						return err
					}
					o.names = offlineNames(st)
					o.more = o.limit > 0 && len(data.Jobs) == o.limit
					return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
				})
			}
			list := func(ctx context.Context, conn *client.Conn) (*protocol.JobsListData, error) {
				if q.ParentAgentID != "" {
					id, err := resolveKnownAgent(ctx, conn, q.ParentAgentID)
					if err != nil {
						return nil, err
					}
					q.ParentAgentID = id
				}
				data, more, err := fetchJobs(ctx, conn, *q, o.limit, o.pageSize)
				if err != nil {
					return nil, err
				}
				o.more = more
				return &data, nil
			}
			if o.watch {
				if o.output.structured() {
					return usageErrorf("--watch prints tables only")
				}
				return o.g.listWatch(cmd.Context(), cmd.OutOrStdout(), func(ctx context.Context, conn *client.Conn) ([]string, error) {
					data, err := list(ctx, conn)
					if err != nil {
						return nil, err
					}
					o.names = agentNamesOf(ctx, conn, parentsOf(data.Jobs))
					var parents []string
					for _, j := range data.Jobs {
						parents = append(parents, j.ParentAgentID)
					}
					return parents, o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), *data)
				})
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				if q.ParentAgentID != "" {
					// An unknown parent is an error, not "No jobs.".
					id, err := resolveKnownAgent(ctx, conn, q.ParentAgentID)
					if err != nil {
						return err
					}
					q.ParentAgentID = id
				}
				data, more, err := fetchJobs(ctx, conn, *q, o.limit, o.pageSize)
				if err != nil {
					return err
				}
				o.more = more
				o.names = agentNamesOf(ctx, conn, parentsOf(data.Jobs))
				return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// query builds the jobs.list command; bad flags are usage errors.
func (o *jobsLsOptions) query() (*protocol.JobsList, error) {
	if err := o.output.validate(); err != nil {
		return nil, err
	}
	if o.all {
		o.limit = 0
	}
	q := &protocol.JobsList{
		Header:        protocol.Header{Type: protocol.TypeJobsList},
		ParentAgentID: o.parent,
		State:         protocol.JobState(o.state),
		Stuck:         o.stuck,
		Limit:         o.limit,
	}
	if o.since != "" {
		d, err := parseSince(o.since)
		if err != nil {
			return nil, usageErrorf("--since %q: %v", o.since, err)
		}
		q.SinceMs = o.g.clock.now().Add(-d).UnixMilli()
	}
	if err := q.Validate(); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return q, nil
}

// parseSince parses a Go duration, or a whole number of days ("3d").
func parseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("want a duration like 90s, 15m, 2h or 3d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration like 90s, 15m, 2h or 3d")
	}
	return d, nil
}

func (o *jobsLsOptions) print(stdout, stderr io.Writer, data protocol.JobsListData) error {
	if data.Jobs == nil {
		data.Jobs = []protocol.OpJob{}
	}
	o.output.human(&data)
	if o.output.structured() {
		return o.output.write(stdout, data)
	}
	if len(data.Jobs) == 0 {
		fmt.Fprintln(stderr, "No jobs.")
		unavailableNote(stderr, "jobs", data.UnavailableNodes)
		return nil
	}
	if err := writeJobsTable(stdout, data.Jobs, o.names, o.g.clock, newPalette(stdout, o.g.noColor), o.output.style(o.g)); err != nil {
		return err
	}
	if o.more {
		fmt.Fprintf(stderr, "(the %d newest; --all shows every job)\n", len(data.Jobs))
	}
	unavailableNote(stderr, "jobs", data.UnavailableNodes)
	return nil
}
