package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// statusOptions are the options of shardctl status.
type statusOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the status flags on cmd.
func (o *statusOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	o := &statusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's status",
		Long: `Show the daemon's status (daemon.status): version, protocol version, pid,
uptime, home, web URL, open connections, agents by runtime state and by
status, the size of the store, and — from jobs.list — the jobs, runs by
state, the queue depth (queued runs) and the runs that look stuck, and —
from workspace.list — the workspaces by lifecycle state (retired ones
included).

-o json|yaml prints daemon.status's fields plus jobs, runs_by_state,
queue_depth, stuck_runs and workspaces_by_state.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, cmd.OutOrStdout())
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// statusView is what status prints: daemon.status plus the job counts.
type statusView struct {
	protocol.DaemonStatusData
	// Jobs is the number of jobs live now or created within
	// statusJobsWindow: the history before that is left out, so that
	// status costs the same on day 90 as on day 1 (shardctl jobs ls
	// --all lists it).
	Jobs int `json:"jobs"`
	// RunsByState counts the runs of those jobs per state.
	RunsByState map[protocol.RunState]int `json:"runs_by_state"`
	// QueueDepth is the number of queued runs.
	QueueDepth int `json:"queue_depth"`
	// StuckRuns counts runs jobs.list flags as stuck.
	StuckRuns int `json:"stuck_runs"`
	// JobsError says why the job counts are missing (jobs.list failed,
	// e.g. while the daemon shuts down).
	JobsError string `json:"jobs_error,omitempty"`
	// WorkspacesByState counts workspaces per lifecycle state, retired
	// ones included.
	WorkspacesByState map[protocol.WorkspaceState]int `json:"workspaces_by_state"`
	// WorkspacesError says why the workspace counts are missing
	// (workspace.list failed, or an older daemon does not know it).
	WorkspacesError string `json:"workspaces_error,omitempty"`
}

func (o *statusOptions) run(ctx context.Context, conn *client.Conn, w io.Writer) error {
	var v statusView
	if err := conn.Call(ctx, &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, &v.DaemonStatusData); err != nil {
		return err
	}
	self := ownNode(ctx, conn)
	jobs, err := statusJobs(ctx, conn, o.g.clock.now())
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return err
		}
		v.JobsError = fmt.Sprintf("%s: %s", pe.Code, pe.Message)
	}
	jobs = slices.DeleteFunc(jobs, func(j protocol.OpJob) bool { return !ownedBy(self, j.Node) })
	v.Jobs = len(jobs)
	v.RunsByState = map[protocol.RunState]int{}
	for _, j := range jobs {
		for _, r := range j.Runs {
			v.RunsByState[r.State]++
			if r.Stuck {
				v.StuckRuns++
			}
		}
	}
	v.QueueDepth = v.RunsByState[protocol.RunQueued]
	v.WorkspacesByState = map[protocol.WorkspaceState]int{}
	var wss protocol.WorkspaceListData
	if err := conn.Call(ctx, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, IncludeRetired: true}, &wss); err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return err
		}
		v.WorkspacesError = fmt.Sprintf("%s: %s", pe.Code, pe.Message)
	}
	for _, ws := range wss.Workspaces {
		if ownedBy(self, ws.Node) {
			v.WorkspacesByState[ws.State]++
		}
	}
	if v.AgentsByRuntimeState == nil {
		v.AgentsByRuntimeState = map[protocol.RuntimeState]int{}
	}
	if v.AgentsByStatus == nil {
		v.AgentsByStatus = map[protocol.AgentStatus]int{}
	}
	o.output.human(&v)
	if o.output.structured() {
		return o.output.write(w, v)
	}
	p := newPalette(w, o.g.noColor)
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Version", orDash(v.Version))
	row("Protocol", orDash(v.ProtocolVersion))
	row("PID", fmt.Sprint(v.PID))
	row("Uptime", formatUptime(v.UptimeMs))
	row("Home", orDash(v.Home))
	row("Web", orDash(v.WebURL))
	row("Connections", fmt.Sprint(v.Connections))
	total := 0
	for _, n := range v.AgentsByRuntimeState {
		total += n
	}
	row("Agents", fmt.Sprintf("%d total%s", total, counts(v.AgentsByRuntimeState, func(s protocol.RuntimeState) string { return string(s) })))
	row("Agent status", orDash(strings.TrimPrefix(counts(v.AgentsByStatus, p.status), ": ")))
	runs := 0
	for _, n := range v.RunsByState {
		runs += n
	}
	if v.JobsError != "" {
		row("Jobs", "unknown ("+v.JobsError+")")
	} else {
		row("Jobs", fmt.Sprintf("%d live or from the last %s", v.Jobs, statusJobsWindowText))
	}
	row("Runs", fmt.Sprintf("%d total%s", runs, counts(v.RunsByState, p.runState)))
	row("Queue depth", fmt.Sprint(v.QueueDepth))
	if v.StuckRuns > 0 {
		row("Stuck runs", p.red(fmt.Sprint(v.StuckRuns))+" (shardctl jobs ls --stuck)")
	} else {
		row("Stuck runs", "0")
	}
	if v.WorkspacesError != "" {
		row("Workspaces", "unknown ("+v.WorkspacesError+")")
	} else {
		row("Workspaces", workspaceCounts(v.WorkspacesByState))
	}
	row("Store", humanBytes(v.StoreBytes))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// statusJobsWindow is how far back status counts finished jobs.
const (
	statusJobsWindow     = 24 * time.Hour
	statusJobsWindowText = "24h"
)

// statusJobs reads the jobs status counts: the live ones (queued or
// running, however old) and those created within statusJobsWindow, each
// once, page by page.
func statusJobs(ctx context.Context, conn *client.Conn, now time.Time) ([]protocol.OpJob, error) {
	var out []protocol.OpJob
	seen := map[string]bool{}
	for _, q := range []protocol.JobsList{
		{State: protocol.JobQueued},
		{State: protocol.JobRunning},
		{SinceMs: now.Add(-statusJobsWindow).UnixMilli()},
	} {
		q.Header = protocol.Header{Type: protocol.TypeJobsList}
		data, _, err := fetchJobs(ctx, conn, q, 0, listPageSize)
		if err != nil {
			return nil, err
		}
		for _, j := range data.Jobs {
			if !seen[j.JobID] {
				seen[j.JobID] = true
				out = append(out, j)
			}
		}
	}
	return out, nil
}

// ownNode names the cluster node conn's daemon is, "" when it runs alone
// or cannot say. In a cluster, jobs.list and workspace.list answer for
// every node; status and doctor speak of this daemon, so they keep only
// its own items.
func ownNode(ctx context.Context, conn *client.Conn) string {
	st, err := client.ClusterStatus(ctx, conn)
	if err != nil || !st.Enabled {
		return ""
	}
	return st.Node
}

// ownedBy reports whether an item listed with node belongs to self
// (ownNode's answer): everything does when self is "".
func ownedBy(self, node string) bool {
	return self == "" || node == "" || node == self
}

// counts renders a per-state count map as ": a 1, b 2" in key order, or ""
// when it is empty.
func counts[K ~string](m map[K]int, label func(K) string) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", label(k), m[k]))
	}
	return ": " + strings.Join(parts, ", ")
}

func formatUptime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// workspaceCounts renders workspaces by state: the live ones (every state
// but retired) with their states, then the retired count, e.g. "3 live:
// active 2, missing 1; 4 retired". States that need a look (missing,
// conflict, and creating or retiring outside an operation) point at doctor.
func workspaceCounts(m map[protocol.WorkspaceState]int) string {
	liveStates := map[protocol.WorkspaceState]int{}
	live := 0
	for st, n := range m {
		if st != protocol.WorkspaceStateRetired && n > 0 {
			liveStates[st] = n
			live += n
		}
	}
	out := fmt.Sprintf("%d live%s; %d retired", live, counts(liveStates, func(s protocol.WorkspaceState) string { return string(s) }), m[protocol.WorkspaceStateRetired])
	if m[protocol.WorkspaceStateMissing]+m[protocol.WorkspaceStateConflict]+m[protocol.WorkspaceStateRetiring]+m[protocol.WorkspaceStateCreating] > 0 {
		out += " (shardctl doctor)"
	}
	return out
}
