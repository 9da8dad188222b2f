package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentsTerminateOptions are the options of shardctl agents terminate.
type agentsTerminateOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the agents terminate flags on cmd.
func (o *agentsTerminateOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newAgentsTerminateCommand(g *globalOptions) *cobra.Command {
	o := &agentsTerminateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "terminate ID",
		Short: "Shut an agent's runtime down once it is idle",
		Long: `Shut an agent's runtime down gracefully (agent.terminate): at once when it
is idle, otherwise after the turn in flight ends ("deferred"). The agent
stays durable. -o json|yaml prints {"deferred":bool}.`,
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
				var data protocol.AgentTerminateData
				msg := &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(w, data)
				}
				if data.Deferred {
					_, err = fmt.Fprintf(w, "%s will shut down when its current turn ends\n", safe(id))
				} else {
					_, err = fmt.Fprintf(w, "%s is shutting down\n", safe(id))
				}
				return err
			})
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}
