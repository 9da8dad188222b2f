package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// tokenCreateOptions are the options of shardctl token create.
type tokenCreateOptions struct {
	g      *globalOptions
	output outputOptions
	note   string
}

// AddFlags registers the token create flags on cmd.
func (o *tokenCreateOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.note, "note", "", "what the token is for (required)")
}

func newTokenCreateCommand(g *globalOptions) *cobra.Command {
	o := &tokenCreateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "create --note N",
		Short: "Create an API token; it is shown once",
		Long: `Create an API token (token.create). The token is printed alone on stdout,
this once: the daemon keeps only its hash, so store it now. -o json|yaml
prints the whole answer, token included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			msg := &protocol.TokenCreate{Header: protocol.Header{Type: protocol.TypeTokenCreate}, Note: o.note}
			if err := msg.Validate(); err != nil {
				return usageErrorf("--note: %v", err)
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.TokenCreateData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), data.Token); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Created %s (%s). The token is shown only now; use it as \"Authorization: Bearer <token>\".\n",
					data.TokenID, data.Note)
				return nil
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}
