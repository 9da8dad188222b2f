package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// webEnrollOptions are the options of shardctl web enroll.
type webEnrollOptions struct {
	g      *globalOptions
	output outputOptions
	note   string
}

// AddFlags registers the web enroll flags on cmd.
func (o *webEnrollOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.note, "note", "", "label for the browser, shown by web sessions ls")
}

func newWebEnrollCommand(g *globalOptions) *cobra.Command {
	o := &webEnrollOptions{g: g}
	cmd := &cobra.Command{
		Use:   "enroll [--note N]",
		Short: "Print a one-time link that enrolls a browser",
		Long: `Print a one-time link that enrolls a browser (web.enroll), such as
http://127.0.0.1:7420/enroll#code=…

Open it in the browser to enroll, before it expires (web.enroll_ttl, 5m by
default). It works once. The code rides in the fragment, which the browser
never sends to a server; the daemon keeps only its hash. The link is printed
alone on stdout, the expiry on stderr; -o json|yaml prints the whole answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			msg := &protocol.WebEnroll{Header: protocol.Header{Type: protocol.TypeWebEnroll}, Note: o.note}
			if err := msg.Validate(); err != nil {
				return usageErrorf("%v", err)
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.WebEnrollData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), data.URL); err != nil {
					return err
				}
				left := time.UnixMilli(data.ExpiresAt).Sub(o.g.clock.now()).Round(time.Second)
				fmt.Fprintf(cmd.ErrOrStderr(), "Open this link in the browser to enroll. It works once, within %s (until %s).\n",
					left, o.g.clock.formatTime(data.ExpiresAt))
				return nil
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}
