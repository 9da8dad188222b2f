package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentsKillOptions are the options of shardctl agents kill.
type agentsKillOptions struct {
	g     *globalOptions
	force bool
}

// AddFlags registers the agents kill flags on cmd.
func (o *agentsKillOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.force, "force", false, "kill the runtime at once (SIGKILL) instead of escalating")
}

func newAgentsKillCommand(g *globalOptions) *cobra.Command {
	o := &agentsKillOptions{g: g}
	cmd := &cobra.Command{
		Use:   "kill ID [--force]",
		Short: "Stop an agent's runtime now",
		Long: `Stop an agent's runtime process (agent.kill): abort the turn in flight, then
SIGTERM, then SIGKILL, each after a grace period; --force kills at once. The
agent stays durable: its next prompt starts a new runtime. A subagent run in
flight ends too (use "jobs stop" to cancel a job cleanly).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				id, err := resolveAgent(ctx, conn, args[0])
				if err != nil {
					return err
				}
				msg := &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: id}, Force: o.force}
				if err := conn.Call(ctx, msg, nil); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Killed the runtime of %s\n", safe(id))
				return err
			})
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, false)
	o.AddFlags(cmd)
	return cmd
}
