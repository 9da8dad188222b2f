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

// agentsPruneOptions are the options of shardctl agents prune.
type agentsPruneOptions struct {
	g         *globalOptions
	output    outputOptions
	finished  bool
	olderThan time.Duration
	dryRun    bool
}

// AddFlags registers the agents prune flags on cmd.
func (o *agentsPruneOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.BoolVar(&o.finished, "finished", false, "prune finished subagents (required: the only kind prune knows)")
	fs.DurationVar(&o.olderThan, "older-than", 24*time.Hour, "only those whose last run ended at least this long ago")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be removed, remove nothing")
}

func newAgentsPruneCommand(g *globalOptions) *cobra.Command {
	o := &agentsPruneOptions{g: g}
	cmd := &cobra.Command{
		Use:   "prune --finished [--older-than DUR] [--dry-run]",
		Short: "Delete finished subagents older than a duration",
		Long: `Delete the finished subagents (agent.remove, as "agents rm"): subagents whose
runtime is stopped and whose last run is terminal and ended at least
--older-than ago (default 24h), by jobs.list. A subagent that never ran is
not finished. The daemon still checks each one and refuses what is needed
(a job that has not ended, a live workspace, an undelivered report, ...).

--dry-run prints the candidates (AGENT_ID, NAME, ENDED) and removes
nothing. Otherwise the table is that of "agents rm"; -o json|yaml prints
{"results":[...]} (with --dry-run {"agents":[...]}). Exit 1 if any
candidate was refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if !o.finished {
				return usageErrorf("prune needs --finished (finished subagents are all it prunes)")
			}
			if o.olderThan < 0 {
				return usageErrorf("invalid --older-than %s: must not be negative", o.olderThan)
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				cands, ended, err := o.candidates(ctx, conn)
				if err != nil {
					return err
				}
				if o.dryRun {
					return o.printCandidates(cmd.OutOrStdout(), cmd.ErrOrStderr(), cands, ended)
				}
				if len(cands) == 0 {
					if o.output.structured() {
						return o.output.write(cmd.OutOrStdout(), protocol.AgentRemoveData{Results: []protocol.AgentRemoveResult{}})
					}
					fmt.Fprintln(cmd.ErrOrStderr(), "Nothing to prune.")
					return nil
				}
				ids := make([]string, 0, len(cands))
				for _, a := range cands {
					ids = append(ids, a.AgentID)
				}
				return removeAndPrint(ctx, conn, cmd.OutOrStdout(), &o.output, o.g, ids)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// candidates lists the finished subagents old enough, oldest first, and
// when each one's last run ended.
func (o *agentsPruneOptions) candidates(ctx context.Context, conn *client.Conn) ([]protocol.AgentInfo, map[string]int64, error) {
	var list protocol.AgentListData
	if err := readAllAgents(ctx, conn, &list); err != nil {
		return nil, nil, err
	}
	// Every job, page by page: one unpaged answer stops fitting in a
	// record long before a daemon's history ends (docs/protocol.md §2).
	jobs, _, err := fetchJobs(ctx, conn, protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}}, 0, allAgentsPage)
	if err != nil {
		return nil, nil, err
	}
	// The last run of each agent: the one queued last. A live run anywhere
	// keeps the agent (ended 0 and not terminal).
	type last struct {
		queued, ended int64
		terminal      bool
	}
	runs := map[string]last{}
	for _, j := range jobs.Jobs {
		for _, r := range j.Runs {
			if l, ok := runs[r.AgentID]; ok && l.queued > r.QueuedAt {
				continue
			}
			runs[r.AgentID] = last{queued: r.QueuedAt, ended: r.EndedAt, terminal: r.State.Terminal()}
		}
	}
	cutoff := o.g.clock.now().Add(-o.olderThan).UnixMilli()
	var out []protocol.AgentInfo
	ended := map[string]int64{}
	for _, a := range list.Agents {
		l, ok := runs[a.AgentID]
		if a.ParentAgentID == "" || a.RuntimeState != protocol.RuntimeStopped || !ok || !l.terminal || l.ended == 0 || l.ended > cutoff {
			continue
		}
		out = append(out, a)
		ended[a.AgentID] = l.ended
	}
	return out, ended, nil
}

// candidate is a row of prune --dry-run -o json.
type candidate struct {
	protocol.AgentInfo
	LastRunEndedAt int64 `json:"last_run_ended_at"`
}

func (o *agentsPruneOptions) printCandidates(stdout, stderr io.Writer, cands []protocol.AgentInfo, ended map[string]int64) error {
	rows := struct {
		Agents []candidate `json:"agents"`
	}{Agents: []candidate{}}
	for _, a := range cands {
		rows.Agents = append(rows.Agents, candidate{AgentInfo: a, LastRunEndedAt: ended[a.AgentID]})
	}
	o.output.human(&rows)
	if o.output.structured() {
		return o.output.write(stdout, rows)
	}
	if len(rows.Agents) == 0 {
		fmt.Fprintln(stderr, "Nothing to prune.")
		return nil
	}
	st := o.output.style(o.g)
	tw := newTableNoHeader(stdout, st.noHeaders)
	fmt.Fprintln(tw, "AGENT_ID\tNAME\tENDED")
	for _, c := range rows.Agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.AgentID, agentName(c.AgentInfo), st.when(o.g.clock, c.LastRunEndedAt))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write candidates: %w", err)
	}
	return nil
}
