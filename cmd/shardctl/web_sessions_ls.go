package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// webSessionsLsOptions are the options of shardctl web sessions ls.
type webSessionsLsOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the web sessions ls flags on cmd.
func (o *webSessionsLsOptions) AddFlags(cmd *cobra.Command) { o.output.AddFlags(cmd.Flags()) }

func newWebSessionsLsCommand(g *globalOptions) *cobra.Command {
	o := &webSessionsLsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List live browser sessions",
		Long: `List live browser sessions (web.sessions.list): SESSION, BROWSER, NOTE,
SECURE (issued over https as a __Host- Secure cookie), CREATED, LAST_USED,
EXPIRES and CONNS (WebSocket connections open under it). Secrets are never
shown; the daemon does not have them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.WebSessionsListData
				if err := conn.Call(ctx, &protocol.WebSessionsList{Header: protocol.Header{Type: protocol.TypeWebSessionsList}}, &data); err != nil {
					return err
				}
				if data.Sessions == nil {
					data.Sessions = []protocol.WebSessionInfo{}
				}
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				if len(data.Sessions) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No browser sessions. Enroll a browser with: shardctl web enroll")
					return nil
				}
				return writeSessionsTable(cmd.OutOrStdout(), data.Sessions, o.g.clock)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func writeSessionsTable(w io.Writer, sessions []protocol.WebSessionInfo, clk clock) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SESSION\tBROWSER\tNOTE\tSECURE\tCREATED\tLAST_USED\tEXPIRES\tCONNS")
	for _, s := range sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s.SessionID, s.BrowserID, orDash(truncate(s.Note, 30)),
			strconv.FormatBool(s.Secure), clk.formatTime(s.CreatedAt), clk.formatTime(s.LastUsedAt),
			clk.formatTime(s.ExpiresAt), s.Connections)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write sessions: %w", err)
	}
	return nil
}
