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

// newClusterCommand groups the cluster commands.
func newClusterCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster this daemon is a node of",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newClusterStatusCommand(g))
	return cmd
}

// clusterStatusOptions are the options of shardctl cluster status.
type clusterStatusOptions struct {
	g      *globalOptions
	output outputOptions
}

func newClusterStatusCommand(g *globalOptions) *cobra.Command {
	o := &clusterStatusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's nodes, their health and load",
		Long: `Show the nodes of the cluster as the daemon this shardctl talks to sees
them (cluster.status): each node's health (alive, suspect, dead), its
incarnation (one more at each restart), what it hosts (agents, live
runtimes, active subagent runs), its capacity (jobs.max_active) and its
version. The node answering is marked with *.

A single shardd (no cluster.* settings) prints "not clustered" and exits 0.
-o json|yaml prints cluster.status's data.`,
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
	o.output.AddFlags(cmd.Flags())
	return cmd
}

func (o *clusterStatusOptions) run(ctx context.Context, conn *client.Conn, w io.Writer) error {
	st, err := client.ClusterStatus(ctx, conn)
	if err != nil {
		return err
	}
	if o.output.structured() {
		return o.output.write(w, st)
	}
	if !st.Enabled {
		_, err := fmt.Fprintln(w, "not clustered: this shardd runs alone (no cluster.* settings)")
		return err
	}
	p := newPalette(w, o.g.noColor)
	tw := newTableNoHeader(w, o.output.style(o.g).noHeaders)
	fmt.Fprintln(tw, "NODE\tHEALTH\tINCARNATION\tAGENTS\tRUNTIMES\tRUNS\tCAPACITY\tVERSION")
	for _, n := range st.Nodes {
		name := safe(n.Node)
		if n.Self {
			name += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", name, p.nodeHealth(n.Health), n.Incarnation,
			n.Load.Agents, n.Load.Runtimes, n.Load.Runs, capacity(n.Capacity), orDash(safe(n.Version)))
	}
	return tw.Flush()
}

// nodeHealth colors a node's health: dead red, suspect bold.
func (p palette) nodeHealth(h protocol.NodeHealth) string {
	switch h {
	case protocol.NodeDead:
		return p.red(string(h))
	case protocol.NodeSuspect:
		return p.bold(string(h))
	}
	return safe(string(h))
}

// capacity is a node's capacity, "-" when it published none.
func capacity(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}
