package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// webSessionsRevokeOptions are the options of shardctl web sessions revoke.
type webSessionsRevokeOptions struct {
	g   *globalOptions
	all bool
}

// AddFlags registers the web sessions revoke flags on cmd.
func (o *webSessionsRevokeOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.all, "all", false, "revoke every browser session")
}

func newWebSessionsRevokeCommand(g *globalOptions) *cobra.Command {
	o := &webSessionsRevokeOptions{g: g}
	cmd := &cobra.Command{
		Use:   "revoke SESSION_ID... | --all",
		Short: "Revoke browser sessions at once",
		Long: `Revoke browser sessions (web.sessions.revoke): the cookie stops working at
once, and WebSocket connections opened under the session are closed. The
browser must be enrolled again to reconnect.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.all && len(args) > 0:
				return usageErrorf("give session ids or --all, not both")
			case !o.all && len(args) == 0:
				return usageErrorf("give at least one session id, or --all")
			}
			reqs := []*protocol.WebSessionsRevoke{}
			if o.all {
				reqs = append(reqs, &protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke}, All: true})
			}
			for _, id := range args {
				reqs = append(reqs, &protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke}, SessionID: id})
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				for _, req := range reqs {
					var data protocol.WebSessionsRevokeData
					if err := conn.Call(ctx, req, &data); err != nil {
						return err
					}
					if o.all && len(data.Revoked) == 0 {
						fmt.Fprintln(cmd.OutOrStdout(), "No browser sessions to revoke.")
					}
					for _, id := range data.Revoked {
						fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", id)
					}
					if data.ClosedConnections > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "closed %d connection(s)\n", data.ClosedConnections)
					}
				}
				return nil
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}
