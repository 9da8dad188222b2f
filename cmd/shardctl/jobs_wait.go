package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// waitTimeout is the --timeout of jobs wait: seconds ("30", "0.5") or a Go
// duration ("2m"); unset waits forever.
type waitTimeout struct {
	set bool
	d   time.Duration
}

func (t *waitTimeout) String() string {
	if !t.set {
		return ""
	}
	return t.d.String()
}

func (t *waitTimeout) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return errors.New("want seconds (30, 0.5) or a duration (2m)")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	t.set, t.d = true, d
	return nil
}

func (t *waitTimeout) Type() string { return "seconds" }

// seconds is the wire form of the timeout (nil waits forever).
func (t *waitTimeout) seconds() *float64 {
	if !t.set {
		return nil
	}
	s := t.d.Seconds()
	return &s
}

// jobsWaitOptions are the options of shardctl jobs wait.
type jobsWaitOptions struct {
	g       *globalOptions
	output  outputOptions
	any     bool
	timeout waitTimeout
}

// AddFlags registers the jobs wait flags on cmd. Its --timeout shadows the
// global connect --timeout, which keeps its default here.
func (o *jobsWaitOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.BoolVar(&o.any, "any", false, "return as soon as any of the handles ended (default: all)")
	fs.Var(&o.timeout, "timeout", "stop waiting after this long: seconds (30, 0.5) or a duration (2m); 0 polls (default: forever)")
}

func newJobsWaitCommand(g *globalOptions) *cobra.Command {
	o := &jobsWaitOptions{g: g}
	cmd := &cobra.Command{
		Use:   "wait HANDLE... [--any] [--timeout S]",
		Short: "Wait for jobs or runs to end",
		Long: `Wait until every HANDLE (or, with --any, one of them) has ended
(subagent.wait, on behalf of each handle's parent; handles of several
parents are waited for together). A job id waits for all of its runs; an
agent id or alias for its current run at the time of the call.

A timeout only stops the waiting: it never cancels anything. (Here
--timeout is the wait's; the connect timeout keeps its default.) Prints each
awaited run's state; -o json|yaml prints subagent.wait's data (timed_out,
aggregate_state, runs) without final text.

Exit status: 0 the awaited runs completed (with --any: one that ended
completed); 4 they ended but not all completed (failed, timed out,
cancelled or interrupted); 5 the wait timed out.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, args, cmd.OutOrStdout())
			})
		},
	}
	cmd.ValidArgsFunction = completeJobs(g, true)
	o.AddFlags(cmd)
	return cmd
}

// waitGroup is the handles of one parent.
type waitGroup struct {
	parent  string
	handles []string
}

func (o *jobsWaitOptions) run(ctx context.Context, conn *client.Conn, handles []string, w io.Writer) error {
	var groups []*waitGroup
	byParent := map[string]*waitGroup{}
	for _, h := range handles {
		job, err := showJob(ctx, conn, h)
		if err != nil {
			return fmt.Errorf("%s: %w", h, err)
		}
		g := byParent[job.ParentAgentID]
		if g == nil {
			g = &waitGroup{parent: job.ParentAgentID}
			byParent[job.ParentAgentID] = g
			groups = append(groups, g)
		}
		g.handles = append(g.handles, h)
	}
	mode := "all"
	if o.any {
		mode = "any"
	}
	data, err := o.waitGroups(ctx, conn, groups, mode)
	if err != nil {
		return err
	}
	for i := range data.Runs {
		data.Runs[i].FinalText = "" // the parent's business, never the operator's
	}
	if data.Runs == nil {
		data.Runs = []protocol.RunSnapshot{}
	}
	o.output.human(&data)
	if o.output.structured() {
		if err := o.output.write(w, data); err != nil {
			return err
		}
	} else if err := o.table(w, data); err != nil {
		return err
	}
	return o.outcome(data)
}

// waitGroups waits for every group at once and merges the answers, in
// group order. With mode any, the first group to answer without timing out
// ends the wait; the others are then polled for their current state.
func (o *jobsWaitOptions) waitGroups(ctx context.Context, conn *client.Conn, groups []*waitGroup, mode string) (protocol.SubagentWaitData, error) {
	if len(groups) == 1 {
		return waitOnce(ctx, conn, groups[0], mode, o.timeout.seconds())
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i    int
		data protocol.SubagentWaitData
		err  error
	}
	answers := make(chan answer, len(groups))
	for i, g := range groups {
		go func() {
			data, err := waitOnce(wctx, conn, g, mode, o.timeout.seconds())
			answers <- answer{i, data, err}
		}()
	}
	results := make([]*protocol.SubagentWaitData, len(groups))
	var firstErr error
	for range groups {
		a := <-answers
		if a.err != nil {
			if firstErr == nil && wctx.Err() == nil {
				firstErr = a.err
			}
			cancel()
			continue
		}
		results[a.i] = &a.data
		if mode == "any" && !a.data.TimedOut {
			cancel() // one ended: stop waiting for the rest
		}
	}
	if firstErr != nil {
		return protocol.SubagentWaitData{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return protocol.SubagentWaitData{}, err
	}
	var merged protocol.SubagentWaitData
	timedOut := true
	for i, g := range groups {
		if results[i] == nil { // cancelled after another group answered
			zero := 0.0
			data, err := waitOnce(ctx, conn, g, "all", &zero)
			if err != nil {
				return protocol.SubagentWaitData{}, err
			}
			results[i] = &data
			results[i].TimedOut = true
		}
		if mode == "all" && results[i].TimedOut {
			merged.TimedOut = true
		}
		if !results[i].TimedOut {
			timedOut = false
		}
		merged.Runs = append(merged.Runs, results[i].Runs...)
	}
	if mode == "any" {
		merged.TimedOut = timedOut
	}
	merged.AggregateState = aggregateState(merged.Runs)
	return merged, nil
}

// waitOnce is one subagent.wait.
func waitOnce(ctx context.Context, conn *client.Conn, g *waitGroup, mode string, timeout *float64) (protocol.SubagentWaitData, error) {
	msg := &protocol.SubagentWait{
		Header:        protocol.Header{Type: protocol.TypeSubagentWait},
		ParentAgentID: g.parent, Handles: g.handles, Mode: mode, Timeout: timeout,
	}
	var data protocol.SubagentWaitData
	err := conn.Call(ctx, msg, &data)
	return data, err
}

// aggregateState mirrors the daemon's aggregate_state (jobs coordinator):
// "mixed" while some but not all runs ended, else the job-state derivation
// of jobs/view over the runs, the one definition daemon and shardctl share.
func aggregateState(runs []protocol.RunSnapshot) string {
	states := make([]store.Run, len(runs))
	terminal := 0
	for i, r := range runs {
		states[i].State = r.State // DeriveState reads nothing else
		if r.State.Terminal() {
			terminal++
		}
	}
	if terminal > 0 && terminal < len(runs) {
		return "mixed"
	}
	return string(view.DeriveState(states))
}

func (o *jobsWaitOptions) table(w io.Writer, data protocol.SubagentWaitData) error {
	p := newPalette(w, o.g.noColor)
	width := termWidth(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "JOB_ID\tRUN_ID\tNAME\tALIAS\tAGENT_ID\tSTATE\tRAN\tERROR")
	for _, r := range data.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.JobID, r.RunID, orDash(r.Name), orDash(r.Alias),
			orDash(r.AgentID), p.runState(r.State), o.g.clock.span(r.StartedAt, r.EndedAt), orDash(fit(r.Error, 48, width)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write runs: %w", err)
	}
	return nil
}

// outcome turns the wait's answer into the exit status: 0 completed, 4 not
// all completed, 5 timed out.
func (o *jobsWaitOptions) outcome(data protocol.SubagentWaitData) error {
	ended, completed := 0, 0
	var notDone []string
	for _, r := range data.Runs {
		if !r.State.Terminal() {
			continue
		}
		ended++
		if r.State == protocol.RunCompleted {
			completed++
		} else {
			notDone = append(notDone, fmt.Sprintf("%s %s", r.RunID, r.State))
		}
	}
	if data.TimedOut {
		return exitWith(exitWaitTimeout, fmt.Errorf("timed out after %s: %d of %d runs ended (nothing was cancelled)",
			o.timeout.d, ended, len(data.Runs)), false)
	}
	if (o.any && completed > 0) || (!o.any && completed == len(data.Runs)) {
		return nil
	}
	return exitWith(exitNotComplete, fmt.Errorf("not completed: %s", strings.Join(notDone, ", ")), false)
}
