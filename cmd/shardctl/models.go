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

// modelsOptions are the options of shardctl models.
type modelsOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the models flags on cmd.
func (o *modelsOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newModelsCommand(g *globalOptions) *cobra.Command {
	o := &modelsOptions{g: g}
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models of every configured provider",
		Long: `List the daemon's model catalog (models.list): every model of every
configured provider, with its id (PROVIDER/MODEL), provider, model name and
context window; * marks the default, which an agent created without
--provider or --model runs on. Pass an id or a name to agents create
--model (and a provider to --provider), or to /model in attach.

-o json|yaml prints {"models":[…],"default":{…}}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, cmd.OutOrStdout())
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *modelsOptions) run(ctx context.Context, conn *client.Conn, w io.Writer) error {
	var data protocol.ModelsListData
	if err := conn.Call(ctx, &protocol.ModelsList{Header: protocol.Header{Type: protocol.TypeModelsList}}, &data); err != nil {
		return err
	}
	o.output.human(&data)
	if o.output.structured() {
		return o.output.write(w, data)
	}
	tw := newTableNoHeader(w, o.output.style(o.g).noHeaders)
	fmt.Fprintln(tw, "\tID\tPROVIDER\tMODEL\tCONTEXT")
	for _, m := range data.Models {
		mark, window := "", "-"
		if m.ID == data.Default.ID {
			mark = "*"
		}
		if m.ContextWindow > 0 {
			window = strconv.Itoa(m.ContextWindow)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, m.ID, m.Provider, m.Model, window)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write models: %w", err)
	}
	return nil
}
