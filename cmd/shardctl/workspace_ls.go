package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// workspaceLsOptions are the options of shardctl workspace ls.
type workspaceLsOptions struct {
	g      *globalOptions
	output wsOutput
	cwd    string
	all    bool
}

// AddFlags registers the workspace ls flags on cmd.
func (o *workspaceLsOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.allowWide = true
	o.output.AddFlags(fs)
	fs.StringVar(&o.cwd, "cwd", "", "only the workspaces of the repository containing DIR")
	fs.BoolVarP(&o.all, "all", "a", false, "include retired workspaces")
}

func newWorkspaceLsCommand(g *globalOptions) *cobra.Command {
	o := &workspaceLsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls [--cwd DIR] [--all]",
		Aliases: []string{"list"},
		Short:   "List workspaces",
		Long: `List workspaces (workspace.list), oldest first: ID (shortened; whole with
-o wide), LABEL, STATE, BRANCH, TARGET (the integration target), AGENTS
(bound agents) and REPO (the main checkout). Retired workspaces only with
--all. -o json|yaml prints {"workspaces":[WorkspaceInfo]}.
` + workspaceExitHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			q := &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, IncludeRetired: o.all}
			if o.cwd != "" {
				abs, err := filepath.Abs(o.cwd)
				if err != nil {
					return usageErrorf("--cwd %q: %w", o.cwd, err)
				}
				q.Cwd = abs
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.WorkspaceListData
				if err := conn.Call(ctx, q, &data); err != nil {
					return refusalError(cmd.ErrOrStderr(), err, nil)
				}
				return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *workspaceLsOptions) print(stdout, stderr io.Writer, data protocol.WorkspaceListData) error {
	if data.Workspaces == nil {
		data.Workspaces = []protocol.WorkspaceInfo{}
	}
	o.output.human(&data)
	if o.output.structured() {
		return o.output.write(stdout, data)
	}
	if len(data.Workspaces) == 0 {
		fmt.Fprintln(stderr, "No workspaces.")
		unavailableNote(stderr, "workspaces", data.UnavailableNodes)
		return nil
	}
	wide := o.output.format == formatWide
	width := termWidth(stdout)
	if wide {
		width = 0
	}
	p := newPalette(stdout, o.g.noColor)
	tw := newTable(stdout)
	// NODE only in a cluster: a single shardd's workspaces carry no node.
	nodes := slices.ContainsFunc(data.Workspaces, func(w protocol.WorkspaceInfo) bool { return w.Node != "" })
	nodeHead := ""
	if nodes {
		nodeHead = "NODE\t"
	}
	fmt.Fprintln(tw, "ID\tLABEL\t"+nodeHead+"STATE\tBRANCH\tTARGET\tAGENTS\tREPO")
	for _, w := range data.Workspaces {
		id := w.WorkspaceID
		if !wide {
			id = shortWorkspaceID(id)
		}
		node := ""
		if nodes {
			node = orDash(safe(w.Node)) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%s\t%s\t%s\n",
			id, orDash(fit(w.Label, 24, width)), node, p.workspaceState(w.State), orDash(w.Branch),
			orDash(w.IntegrationTarget), strconv.Itoa(w.AgentCount), orDash(fitPath(w.RepositoryCwd, 40, width)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write workspaces: %w", err)
	}
	unavailableNote(stderr, "workspaces", data.UnavailableNodes)
	return nil
}

// workspaceState colors a workspace state: green active, cyan moving,
// red missing or conflict, dim retired.
func (p palette) workspaceState(s protocol.WorkspaceState) string {
	switch s {
	case protocol.WorkspaceStateActive:
		return p.paint(sgrGreen, string(s))
	case protocol.WorkspaceStateCreating, protocol.WorkspaceStateRetiring:
		return p.paint(sgrCyan, string(s))
	case protocol.WorkspaceStateMissing, protocol.WorkspaceStateConflict:
		return p.paint(sgrRed, string(s))
	}
	return p.paint(sgrDim, orDash(string(s)))
}

// unavailableNote tells, on stderr, which cluster nodes' items a list
// lacks (unavailable_nodes: declared dead or silent past the bound).
func unavailableNote(stderr io.Writer, what string, nodes []string) {
	if len(nodes) > 0 {
		fmt.Fprintf(stderr, "(nodes unavailable, their %s not listed: %s)\n", what, strings.Join(nodes, ", "))
	}
}
