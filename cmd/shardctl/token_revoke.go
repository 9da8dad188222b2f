package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func newTokenRevokeCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke an API token at once",
		Long: `Revoke an API token (token.revoke): later upgrades with it get 401, and
WebSocket connections opened with it are closed now. Revoking twice is
harmless; the token stays listed as revoked.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.TokenRevokeData
				msg := &protocol.TokenRevoke{Header: protocol.Header{Type: protocol.TypeTokenRevoke}, TokenID: args[0]}
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (closed %d connection(s))\n", data.TokenID, data.ClosedConnections)
				return err
			})
		},
	}
}
