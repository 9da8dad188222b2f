package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentsLsOptions are the options of shardctl agents ls.
type agentsLsOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the agents ls flags on cmd.
func (o *agentsLsOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newAgentsLsCommand(g *globalOptions) *cobra.Command {
	o := &agentsLsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List agents",
		Long: `List every durable agent (agent.list). The table shows AGENT_ID, NAME,
STATUS, RUNTIME (runtime state), MODEL, CWD and CREATED (local time);
-o json prints {"agents":[...]} with the wire's AgentInfo fields.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *agentsLsOptions) run(ctx context.Context, conn *client.Conn, stdout, stderr io.Writer) error {
	var data protocol.AgentListData
	if err := conn.Call(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &data); err != nil {
		return err
	}
	if data.Agents == nil {
		data.Agents = []protocol.AgentInfo{}
	}
	if o.output.json() {
		return writeJSON(stdout, data)
	}
	if len(data.Agents) == 0 {
		fmt.Fprintln(stderr, "No agents.")
		return nil
	}
	p := newPalette(stdout, o.g.noColor)
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT_ID\tNAME\tSTATUS\tRUNTIME\tMODEL\tCWD\tCREATED")
	for _, a := range data.Agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.AgentID, agentName(a), p.status(a.Status), orDash(string(a.RuntimeState)),
			orDash(a.Model), orDash(a.Cwd), formatCreated(a.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write agents: %w", err)
	}
	return nil
}

// agentName is the best human name of an agent.
func agentName(a protocol.AgentInfo) string {
	switch {
	case a.Name != "":
		return a.Name
	case a.DisplayName != "":
		return a.DisplayName
	case a.Alias != "":
		return a.Alias
	}
	return "-"
}

// createdLayout formats CREATED in local time.
const createdLayout = "2006-01-02 15:04:05"

func formatCreated(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format(createdLayout)
}
