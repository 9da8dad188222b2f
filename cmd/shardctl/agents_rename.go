package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentsRenameOptions are the options of shardctl agents rename.
type agentsRenameOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the agents rename flags on cmd.
func (o *agentsRenameOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newAgentsRenameCommand(g *globalOptions) *cobra.Command {
	o := &agentsRenameOptions{g: g}
	cmd := &cobra.Command{
		Use:     "rename AGENT TITLE",
		Aliases: []string{"title"},
		Short:   "Set or clear an agent's title",
		Long: `Set the title of AGENT (agent.update): the name lists show for an agent
nobody named. An agent without a name or title gets one from its first
prompt; a title set here is never replaced by that. An empty TITLE ("")
clears it, and the agent shows as its id again. -o json|yaml prints the
agent as it is now.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				id, err := resolveAgent(ctx, conn, args[0])
				if err != nil {
					return err
				}
				title := args[1]
				var data protocol.AgentUpdateData
				msg := &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: id}, Title: &title}
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(w, data.Info)
				}
				if data.Info.Title == "" {
					_, err = fmt.Fprintf(w, "%s has no title\n", safe(id))
				} else {
					_, err = fmt.Fprintf(w, "%s is now titled %q\n", safe(id), safe(data.Info.Title))
				}
				return err
			})
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}
