package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// This file holds what the jobs commands share: asking the daemon about a
// handle, and rendering jobs and runs as tables.

// showJob resolves a handle to its job (jobs.show).
func showJob(ctx context.Context, conn *client.Conn, handle string) (protocol.OpJob, error) {
	var job protocol.OpJob
	err := conn.Call(ctx, &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: handle}, &job)
	return job, err
}

// jobRuns counts a job's terminal runs.
func jobRuns(j protocol.OpJob) (done, total int) {
	for _, r := range j.Runs {
		if r.State.Terminal() {
			done++
		}
	}
	return done, len(j.Runs)
}

// haltingRun returns the chain step that halted the job, or nil.
func haltingRun(j protocol.OpJob) *protocol.OpRun {
	if j.HaltedBy == "" {
		return nil
	}
	for i := range j.Runs {
		if j.Runs[i].RunID == j.HaltedBy {
			return &j.Runs[i]
		}
	}
	return nil
}

// jobNote is the NOTE column of jobs ls: what an operator should look at.
func jobNote(j protocol.OpJob) string {
	var notes []string
	for _, r := range j.Runs {
		if r.Stuck {
			notes = append(notes, "stuck: "+r.RunID)
			break
		}
	}
	if h := haltingRun(j); h != nil {
		notes = append(notes, fmt.Sprintf("halted by step %d (%s)", h.Index+1, h.State))
	}
	if n := stopNote(j); n != "" {
		notes = append(notes, n)
	}
	return strings.Join(notes, "; ")
}

// stopNote says what a stop covered: "stopped" when it was the whole job,
// "stopped 1 of 3 runs" when only some runs were stopped (job.stopped_at
// is set by the first stop of any run, so it alone mislabelled a parallel
// job one of whose runs was stopped). Runs cancelled while queued by a
// whole-job stop count as stopped.
func stopNote(j protocol.OpJob) string {
	if j.StoppedAt == 0 {
		return ""
	}
	stopped := 0
	for _, r := range j.Runs {
		if r.StopRequestedAt != 0 {
			stopped++
		}
	}
	if stopped == 0 || stopped == len(j.Runs) {
		return "stopped"
	}
	return fmt.Sprintf("stopped %d of %d runs", stopped, len(j.Runs))
}

// writeJobsTable renders jobs ls. names maps agent ids to the names
// shown beside them (nil: ids only).
func writeJobsTable(w io.Writer, jobs []protocol.OpJob, names map[string]string, clk clock, p palette, st tableStyle) error {
	var agents []string
	for _, j := range jobs {
		agents = append(agents, j.ParentAgentID)
	}
	st.shorten(agents)
	tw := newTableNoHeader(w, st.noHeaders)
	// NODE only in a cluster: a single shardd's jobs carry no node.
	nodes := slices.ContainsFunc(jobs, func(j protocol.OpJob) bool { return j.Node != "" })
	nodeHead := ""
	if nodes {
		nodeHead = "NODE\t"
	}
	fmt.Fprintln(tw, "JOB_ID\tPARENT\t"+nodeHead+"STRATEGY\tSTATE\tRUNS\tCREATED\tDURATION\tNOTE")
	for _, j := range jobs {
		done, total := jobRuns(j)
		note := jobNote(j)
		if strings.HasPrefix(note, "stuck") {
			note = p.red(note)
		}
		node := ""
		if nodes {
			node = orDash(safe(j.Node)) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%d/%d\t%s\t%s\t%s\n",
			j.JobID, st.agent(j.ParentAgentID)+nameSuffix(names, j.ParentAgentID), node, j.Strategy, p.jobState(j.State), done, total,
			st.when(clk, j.CreatedAt), clk.span(j.CreatedAt, j.EndedAt), orDash(note))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write jobs: %w", err)
	}
	return nil
}

// stopText renders a run's stop: the stage it reached (abort, term, kill)
// and, while the run has not ended, how long ago the stop was asked for.
func stopText(r protocol.OpRun, clk clock) string {
	if r.StopRequestedAt == 0 && r.StopStage == "" {
		return "-"
	}
	stage := cmp.Or(r.StopStage, "requested")
	if !r.State.Terminal() && r.StopRequestedAt != 0 {
		stage += " (asked " + formatMs(clk.now().UnixMilli()-r.StopRequestedAt) + " ago)"
	}
	return stage
}

// writeJobDetail renders jobs show: the job, then its runs. names maps
// agent ids to the names shown beside them (nil: ids only).
func writeJobDetail(w io.Writer, j protocol.OpJob, names map[string]string, clk clock, p palette, width int) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Job", j.JobID)
	row("Parent", j.ParentAgentID+nameSuffix(names, j.ParentAgentID))
	if j.Node != "" { // a cluster's: the node holding the job
		row("Node", safe(j.Node))
	}
	row("Strategy", string(j.Strategy))
	row("State", p.jobState(j.State))
	row("Created", clk.formatTime(j.CreatedAt))
	if j.EndedAt != 0 {
		row("Ended", fmt.Sprintf("%s (after %s)", clk.formatTime(j.EndedAt), formatMs(j.EndedAt-j.CreatedAt)))
	} else {
		row("Ended", "- (running for "+clk.span(j.CreatedAt, 0)+")")
	}
	if j.StoppedAt != 0 {
		stopped := clk.formatTime(j.StoppedAt)
		if n := stopNote(j); n != "stopped" {
			stopped += " (" + strings.TrimPrefix(n, "stopped ") + ")"
		}
		row("Stopped", stopped)
	}
	if j.Strategy == protocol.StrategyChain && j.ChainStep != nil {
		row("Chain step", fmt.Sprintf("%d of %d", *j.ChainStep+1, len(j.Runs)))
	}
	if h := haltingRun(j); h != nil {
		why := string(h.State)
		if h.Error != "" {
			why += ": " + fit(h.Error, 60, width)
		}
		row("Halted by", p.red(fmt.Sprintf("step %d %q (%s) %s", h.Index+1, h.Name, h.RunID, why)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write job: %w", err)
	}
	fmt.Fprintln(w)
	if err := writeRunsTable(w, j.Runs, clk, p, width); err != nil {
		return err
	}
	return writeRunWorkspaces(w, j.Runs)
}

// writeRunWorkspaces lists the workspaces of isolated runs (subagent.create
// isolation "workspace"), if the job has any.
func writeRunWorkspaces(w io.Writer, runs []protocol.OpRun) error {
	has := false
	for _, r := range runs {
		has = has || r.Workspace != nil
	}
	if !has {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "#\tWORKSPACE\tBRANCH\tCWD\tDIFF")
	for _, r := range runs {
		ws := r.Workspace
		if ws == nil {
			continue
		}
		diff := "-"
		if d := ws.DiffStat; d != nil {
			diff = fmt.Sprintf("%d file(s) +%d -%d", d.Files, d.Additions, d.Deletions)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Index+1, ws.WorkspaceID, safe(orDash(ws.Branch)), safe(orDash(ws.Cwd)), diff)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write run workspaces: %w", err)
	}
	return nil
}

// writeRunsTable renders the runs of a job.
func writeRunsTable(w io.Writer, runs []protocol.OpRun, clk clock, p palette, width int) error {
	tw := newTable(w)
	// A NODE column only when a run ran on a cluster's node other than its
	// parent's ("node" is set only then): a single shardd's table is
	// unchanged.
	nodes := slices.ContainsFunc(runs, func(r protocol.OpRun) bool { return r.Node != "" })
	head := "#\tNAME\tALIAS\tRUN_ID\tAGENT_ID\tSTATE\tQUEUED\tWAIT\tRAN\tSTOP\tEXIT\tERROR"
	if nodes {
		head = "#\tNAME\tALIAS\tRUN_ID\tAGENT_ID\tNODE\tSTATE\tQUEUED\tWAIT\tRAN\tSTOP\tEXIT\tERROR"
	}
	fmt.Fprintln(tw, head)
	for _, r := range runs {
		state := p.runState(r.State)
		if r.Stuck {
			state += p.red(" (stuck)")
		}
		wait := "-"
		switch {
		case r.QueueWaitMs > 0 || r.StartedAt != 0:
			wait = formatMs(r.QueueWaitMs)
		case r.State == protocol.RunQueued && r.QueuedAt != 0:
			wait = clk.span(r.QueuedAt, 0)
		}
		agent := orDash(r.AgentID)
		if nodes {
			agent += "\t" + orDash(r.Node)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Index+1, orDash(r.Name), orDash(r.Alias), r.RunID, agent, state,
			clk.formatTime(r.QueuedAt), wait, clk.span(r.StartedAt, r.EndedAt),
			stopText(r, clk), orDash(r.ExitStatus), orDash(fit(r.Error, 48, width)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write runs: %w", err)
	}
	return nil
}

// nameSuffix is " (NAME)" when names knows a name (or title) for id.
func nameSuffix(names map[string]string, id string) string {
	if n := names[id]; n != "" {
		return " (" + n + ")"
	}
	return ""
}

// offlineNames maps every agent of the store to its name, best effort.
func offlineNames(st *store.Store) map[string]string {
	names := map[string]string{}
	all, err := st.ListAgents()
	if err != nil {
		return names
	}
	for _, m := range all {
		a := offlineAgent(m)
		safeAll(&a)
		if n := agentName(a); n != "-" {
			names[a.AgentID] = n
		}
	}
	return names
}
