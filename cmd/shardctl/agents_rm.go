package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentsRmOptions are the options of shardctl agents rm.
type agentsRmOptions struct {
	g      *globalOptions
	output outputOptions
}

// errNotAllRemoved fails agents rm and prune when the daemon refused some
// agent (exit 1, after the table said which and why).
var errNotAllRemoved = errors.New("not every agent was removed")

func newAgentsRmCommand(g *globalOptions) *cobra.Command {
	o := &agentsRmOptions{g: g}
	cmd := &cobra.Command{
		Use:     "rm AGENT...",
		Aliases: []string{"remove"},
		Short:   "Delete finished agents and their sessions",
		Long: `Delete durable agents for good (agent.remove, a Shard extension): each one's
record, alias and session directory (its transcript). AGENT is an id, a name,
an alias or an id prefix, as elsewhere.

The daemon refuses, per agent, one that anything still needs: its runtime is
not stopped ("running": terminate or kill it first), a client is attached,
a child of it is not stopped, it is bound to a workspace that is not retired,
it is a run's agent or the parent of a job that has not ended, or a
completion report of it waits for delivery. The table shows AGENT_ID, RESULT
(removed, or the refusal's kind) and REASON; -o json|yaml prints the
response's {"results":[...]}. Exit 1 if any agent was not removed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var list protocol.AgentListData
				if err := readAllAgents(ctx, conn, &list); err != nil {
					return err
				}
				ids := make([]string, 0, len(args))
				for _, a := range args {
					id, err := matchAgent(list.Agents, a)
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
				return removeAndPrint(ctx, conn, cmd.OutOrStdout(), &o.output, o.g, ids)
			})
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.output.AddFlags(cmd.Flags())
	return cmd
}

// removeAndPrint sends agent.remove for ids and prints the results.
func removeAndPrint(ctx context.Context, conn *client.Conn, w io.Writer, out *outputOptions, g *globalOptions, ids []string) error {
	var data protocol.AgentRemoveData
	for len(ids) > 0 { // agent.remove takes at most MaxHandles ids
		n := min(len(ids), protocol.MaxHandles)
		var part protocol.AgentRemoveData
		msg := &protocol.AgentRemove{Header: protocol.Header{Type: protocol.TypeAgentRemove}, AgentIDs: ids[:n]}
		if err := conn.Call(ctx, msg, &part); err != nil {
			return err
		}
		data.Results = append(data.Results, part.Results...)
		ids = ids[n:]
	}
	if err := printRemoved(w, out, g, data); err != nil {
		return err
	}
	for _, r := range data.Results {
		if !r.Removed {
			return exitWith(exitFailed, errNotAllRemoved, false)
		}
	}
	return nil
}

// printRemoved writes the results of agent.remove.
func printRemoved(w io.Writer, out *outputOptions, g *globalOptions, data protocol.AgentRemoveData) error {
	if data.Results == nil {
		data.Results = []protocol.AgentRemoveResult{}
	}
	out.human(&data)
	if out.structured() {
		return out.write(w, data)
	}
	st := out.style(g)
	tw := newTableNoHeader(w, st.noHeaders)
	fmt.Fprintln(tw, "AGENT_ID\tRESULT\tREASON")
	for _, r := range data.Results {
		result := "removed"
		switch {
		case r.Removed:
		case r.Kind != "":
			result = r.Kind
		case r.Error != "":
			result = string(r.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.AgentID, result, orDash(r.Reason))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}
