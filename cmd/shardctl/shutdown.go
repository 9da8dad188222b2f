package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// shutdownOptions are the options of shardctl shutdown.
type shutdownOptions struct {
	g     *globalOptions
	force bool
}

// AddFlags registers the shutdown flags on cmd.
func (o *shutdownOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.force, "force", false, "kill agents at once instead of letting their turns finish")
}

func newShutdownCommand(g *globalOptions) *cobra.Command {
	o := &shutdownOptions{g: g}
	cmd := &cobra.Command{
		Use:   "shutdown [--force]",
		Short: "Stop the daemon",
		Long: `Stop the daemon (daemon.shutdown). By default agents finish their current
turns first; --force kills them immediately.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				msg := &protocol.DaemonShutdown{Header: protocol.Header{Type: protocol.TypeDaemonShutdown}, Force: o.force}
				if err := conn.Call(ctx, msg, nil); err != nil {
					return err
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "shardd is shutting down")
				return err
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}
