package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentShowJobs is how many of the jobs an agent launched agents show lists.
const agentShowJobs = 10

// agentsShowOptions are the options of shardctl agents show.
type agentsShowOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the agents show flags on cmd.
func (o *agentsShowOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newAgentsShowCommand(g *globalOptions) *cobra.Command {
	o := &agentsShowOptions{g: g}
	cmd := &cobra.Command{
		Use:     "show ID",
		Aliases: []string{"describe"},
		Short:   "Describe one agent",
		Long: `Describe one agent (agent.status): its identity, status, runtime state,
model, mode, working directory and token usage; for a subagent, its parent,
alias and the job of its current or latest run; its children; and the
newest jobs it launched (up to 10).

-o json|yaml prints {"agent":AgentInfo, "children":[ids], "job":OpJob
(subagents only), "jobs":[OpJob]}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				id, err := resolveAgent(ctx, conn, args[0])
				if err != nil {
					return err
				}
				return o.run(ctx, conn, id, cmd.OutOrStdout())
			})
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}

// agentView is what agents show prints.
type agentView struct {
	Agent protocol.AgentInfo `json:"agent"`
	// Children are the ids of the agents whose parent this agent is.
	Children []string `json:"children"`
	// Job is the job of a subagent's current or latest run.
	Job *protocol.OpJob `json:"job,omitempty"`
	// Jobs are the newest jobs this agent launched.
	Jobs []protocol.OpJob `json:"jobs"`
}

func (o *agentsShowOptions) run(ctx context.Context, conn *client.Conn, id string, w io.Writer) error {
	var st protocol.AgentListData
	cmd := &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}
	if err := conn.Call(ctx, cmd, &st); err != nil {
		return err
	}
	if len(st.Agents) != 1 {
		return protocol.Errorf(protocol.CodeNotFound, "no agent %s", id)
	}
	v := agentView{Agent: st.Agents[0], Children: []string{}, Jobs: []protocol.OpJob{}}
	var all protocol.AgentListData
	if err := readAllAgents(ctx, conn, &all); err != nil {
		return err
	}
	for _, a := range all.Agents {
		if a.ParentAgentID == id {
			v.Children = append(v.Children, a.AgentID)
		}
	}
	if v.Agent.ParentAgentID != "" {
		job, err := showJob(ctx, conn, id)
		var pe *protocol.Error
		switch {
		case err == nil:
			v.Job = &job
		case errors.As(err, &pe) && pe.Code == protocol.CodeNotFound:
		default:
			return err
		}
	}
	var launched protocol.JobsListData
	q := &protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}, ParentAgentID: id, Limit: agentShowJobs}
	if err := conn.Call(ctx, q, &launched); err != nil {
		return err
	}
	if launched.Jobs != nil {
		v.Jobs = launched.Jobs
	}
	o.output.human(&v)
	if o.output.structured() {
		return o.output.write(w, v)
	}
	return o.table(w, v)
}

func (o *agentsShowOptions) table(w io.Writer, v agentView) error {
	p := newPalette(w, o.g.noColor)
	a := v.Agent
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Agent", a.AgentID)
	row("Name", agentName(a))
	if a.Title != "" && agentName(a) != a.Title {
		row("Title", a.Title)
	}
	row("Status", p.status(a.Status))
	row("Runtime", orDash(string(a.RuntimeState)))
	row("Model", orDash(strings.Trim(a.Provider+"/"+a.Model, "/")))
	row("Mode", orDash(a.Mode))
	if a.Node != "" {
		row("Node", a.Node) // a cluster's: the node hosting the agent; Cwd is a path there
	}
	row("Cwd", orDash(a.Cwd))
	if len(a.Tools) > 0 {
		row("Tools", strings.Join(a.Tools, ", "))
	}
	if len(a.Skills) > 0 {
		row("Skills", strings.Join(a.Skills, ", "))
	}
	if len(a.MCPServers) > 0 {
		row("MCP servers", strings.Join(a.MCPServers, ", "))
	}
	row("Created", o.g.clock.formatTime(a.CreatedAt))
	if a.Usage != nil {
		row("Usage", fmt.Sprintf("in %d, out %d tokens", a.Usage.Input, a.Usage.Output))
	}
	if a.ParentAgentID != "" {
		row("Parent", a.ParentAgentID)
		row("Alias", orDash(a.Alias))
	}
	if v.Job != nil {
		state := "-"
		for _, r := range v.Job.Runs {
			if r.AgentID == a.AgentID {
				state = fmt.Sprintf("%s (run %s)", p.runState(r.State), r.RunID)
			}
		}
		row("Job", fmt.Sprintf("%s: %s", v.Job.JobID, state))
	}
	row("Children", orDash(strings.Join(v.Children, ", ")))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write agent: %w", err)
	}
	if len(v.Jobs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Jobs launched (newest first):")
		return writeJobsTable(w, v.Jobs, nil, o.g.clock, p, tableStyle{wide: true})
	}
	return nil
}
