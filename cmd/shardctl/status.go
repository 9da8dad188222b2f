package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// statusOptions are the options of shardctl status.
type statusOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the status flags on cmd.
func (o *statusOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	o := &statusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's status",
		Long: `Show the daemon's status (daemon.status): version, protocol version, pid,
uptime, home, web URL, open connections, agents by runtime state and by
status, and the size of the store.`,
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

func (o *statusOptions) run(ctx context.Context, conn *client.Conn, w io.Writer) error {
	var st protocol.DaemonStatusData
	if err := conn.Call(ctx, &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, &st); err != nil {
		return err
	}
	if o.output.json() {
		return writeJSON(w, st)
	}
	p := newPalette(w, o.g.noColor)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Version", orDash(st.Version))
	row("Protocol", orDash(st.ProtocolVersion))
	row("PID", fmt.Sprint(st.PID))
	row("Uptime", formatUptime(st.UptimeMs))
	row("Home", orDash(st.Home))
	row("Web", orDash(st.WebURL))
	row("Connections", fmt.Sprint(st.Connections))
	total := 0
	for _, n := range st.AgentsByRuntimeState {
		total += n
	}
	row("Agents", fmt.Sprintf("%d total%s", total, counts(st.AgentsByRuntimeState, func(s protocol.RuntimeState) string { return string(s) })))
	row("Agent status", orDash(strings.TrimPrefix(counts(st.AgentsByStatus, p.status), ": ")))
	row("Store", humanBytes(st.StoreBytes))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// counts renders a per-state count map as ": a 1, b 2" in key order, or ""
// when it is empty.
func counts[K ~string](m map[K]int, label func(K) string) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", label(k), m[k]))
	}
	return ": " + strings.Join(parts, ", ")
}

func formatUptime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}
