package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// tokenLsOptions are the options of shardctl token ls.
type tokenLsOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the token ls flags on cmd.
func (o *tokenLsOptions) AddFlags(cmd *cobra.Command) { o.output.AddFlags(cmd.Flags()) }

func newTokenLsCommand(g *globalOptions) *cobra.Command {
	o := &tokenLsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List API tokens",
		Long: `List API tokens (token.list), revoked ones included: TOKEN, NOTE, CREATED,
LAST_USED, STATE (live, or when it was revoked) and CONNS (WebSocket
connections open with it). Tokens themselves are never shown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.TokenListData
				if err := conn.Call(ctx, &protocol.TokenList{Header: protocol.Header{Type: protocol.TypeTokenList}}, &data); err != nil {
					return err
				}
				if data.Tokens == nil {
					data.Tokens = []protocol.TokenInfo{}
				}
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				if len(data.Tokens) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No API tokens. Create one with: shardctl token create --note N")
					return nil
				}
				return writeTokensTable(cmd.OutOrStdout(), data.Tokens, o.g.clock)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func writeTokensTable(w io.Writer, tokens []protocol.TokenInfo, clk clock) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TOKEN\tNOTE\tCREATED\tLAST_USED\tSTATE\tCONNS")
	for _, t := range tokens {
		state := "live"
		if t.RevokedAt != 0 {
			state = "revoked " + clk.formatTime(t.RevokedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", t.TokenID, orDash(truncate(t.Note, 40)),
			clk.formatTime(t.CreatedAt), clk.formatTime(t.LastUsedAt), state, t.Connections)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	return nil
}
