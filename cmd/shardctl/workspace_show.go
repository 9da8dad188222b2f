package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/protocol"
)

// workspaceShowOptions are the options of shardctl workspace show.
type workspaceShowOptions struct {
	g      *globalOptions
	output wsOutput
}

// AddFlags registers the workspace show flags on cmd.
func (o *workspaceShowOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newWorkspaceShowCommand(g *globalOptions) *cobra.Command {
	o := &workspaceShowOptions{g: g}
	cmd := &cobra.Command{
		Use:     "show ID",
		Aliases: []string{"status", "describe"},
		Short:   "Describe one workspace",
		Long: `Describe one workspace (workspace.status): state, label, worktree and
repository, branch, base and integration target, head, live git facts
(commits ahead of and behind the target, uncommitted or untracked files),
agents, times; for a retired workspace its tombstone — the branch, its last
head, whether retire deleted it, and the command that restores a deleted
branch (git branch <name> <sha>). -o json|yaml prints {"workspace":WorkspaceInfo}.
` + workspaceExitHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			var data protocol.WorkspaceStatusData
			mk := func(id string) protocol.Typed {
				return &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: id}
			}
			if err := o.g.workspaceCall(cmd.Context(), cmd.ErrOrStderr(), args[0], mk, &data, nil); err != nil {
				return err
			}
			o.output.human(&data)
			if o.output.structured() {
				return o.output.write(cmd.OutOrStdout(), data)
			}
			return writeWorkspaceDetail(cmd.OutOrStdout(), data.Workspace, o.g.clock, newPalette(cmd.OutOrStdout(), o.g.noColor))
		},
	}
	cmd.ValidArgsFunction = completeWorkspaces(g)
	o.AddFlags(cmd)
	return cmd
}

// restoreCommand is the command that recreates a retired workspace's
// branch from its tombstone.
func restoreCommand(t protocol.WorkspaceTombstone) string {
	return fmt.Sprintf("git branch %s %s", t.Branch, t.HeadSHA)
}

// writeWorkspaceDetail prints one workspace as "Key: value" rows.
func writeWorkspaceDetail(w io.Writer, ws protocol.WorkspaceInfo, clk clock, p palette) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Workspace", ws.WorkspaceID)
	row("Label", orDash(ws.Label))
	state := p.workspaceState(ws.State)
	if ws.ConflictReason != "" {
		state += " (" + ws.ConflictReason + ")"
	}
	row("State", state)
	worktree := orDash(ws.Cwd)
	if ws.State == protocol.WorkspaceStateRetired && ws.Cwd != "" {
		worktree += " (removed)"
	}
	row("Worktree", worktree)
	row("Repository", orDash(ws.RepositoryCwd))
	row("Branch", orDash(ws.Branch))
	base := ws.BaseRef
	if ws.BaseSHA != "" {
		base = strings.TrimSpace(base + " " + shortSHA(ws.BaseSHA))
	}
	row("Base", orDash(base))
	row("Target", orDash(ws.IntegrationTarget))
	row("Head", orDash(ws.HeadSHA))
	if ws.Ahead != nil || ws.Behind != nil {
		row("Ahead/behind", fmt.Sprintf("%s ahead, %s behind", intOrDash(ws.Ahead), intOrDash(ws.Behind)))
	}
	if ws.Dirty != nil {
		dirty := "no"
		if *ws.Dirty {
			dirty = p.paint(sgrYellow, "yes (uncommitted or untracked files)")
		}
		row("Dirty", dirty)
	}
	agents := strconv.Itoa(ws.AgentCount)
	if len(ws.AgentIDs) > 0 {
		agents += ": " + strings.Join(ws.AgentIDs, ", ")
	}
	row("Agents", agents)
	row("Ownership", orDash(string(ws.Ownership)))
	row("Created", clk.formatTime(ws.CreatedAt))
	row("Updated", clk.formatTime(ws.UpdatedAt))
	if ws.RetiredAt > 0 {
		row("Retired", clk.formatTime(ws.RetiredAt))
	}
	if t := ws.Tombstone; t != nil {
		deleted := "kept"
		if t.Deleted {
			deleted = "deleted"
		}
		row("Tombstone", fmt.Sprintf("branch %s at %s (%s)", t.Branch, orDash(t.HeadSHA), deleted))
		if t.Deleted && t.HeadSHA != "" {
			row("Restore", restoreCommand(*t))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write workspace: %w", err)
	}
	return nil
}

// shortSHA is a commit's first 12 hex digits.
func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func intOrDash(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}
