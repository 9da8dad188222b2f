package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/protocol"
)

// workspaceRetireOptions are the options of shardctl workspace retire.
type workspaceRetireOptions struct {
	g              *globalOptions
	output         wsOutput
	keep           bool
	deleteIfMerged bool
	forceDelete    bool
}

// AddFlags registers the workspace retire flags on cmd.
func (o *workspaceRetireOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.BoolVar(&o.keep, "keep", false, "keep the branch")
	fs.BoolVar(&o.deleteIfMerged, "delete-if-merged", false, "delete the branch only if it is proven merged into the target (the default)")
	fs.BoolVar(&o.forceDelete, "force-delete", false, "delete the branch even when it is not proven merged (delete_confirmed)")
	cmd.MarkFlagsMutuallyExclusive("keep", "delete-if-merged", "force-delete")
}

// disposition maps the flags to the wire's branch_disposition.
func (o *workspaceRetireOptions) disposition() protocol.BranchDisposition {
	switch {
	case o.keep:
		return protocol.DispositionKeep
	case o.forceDelete:
		return protocol.DispositionDeleteConfirmed
	}
	return protocol.DispositionDeleteIfMerged
}

func newWorkspaceRetireCommand(g *globalOptions) *cobra.Command {
	o := &workspaceRetireOptions{g: g}
	cmd := &cobra.Command{
		Use:   "retire ID [--keep | --delete-if-merged | --force-delete]",
		Short: "Remove a workspace's worktree, keeping or deleting its branch",
		Long: `Retire a workspace (workspace.retire): its worktree is removed, and its
branch kept (--keep), deleted only when the daemon proves it adds nothing to
the integration target (--delete-if-merged, the default), or deleted anyway
(--force-delete, the wire's delete_confirmed).

When the branch is not proven merged, retire is refused with
confirmation_required and nothing changes; the message says how to confirm
(shardctl ws retire ID --force-delete). Refused too while an agent of the
workspace runs or is attached (live), a turn or run is in flight (busy),
the worktree has uncommitted or untracked files (dirty, listed), is locked,
has submodules, or was moved or replaced.

Even a deleted branch can be restored: retire prints, and "workspace show"
keeps, the tombstone's "git branch <name> <sha>". -o json|yaml prints the
WorkspaceRetireData.
` + workspaceExitHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			disp := o.disposition()
			var data protocol.WorkspaceRetireData
			mk := func(id string) protocol.Typed {
				return &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: id, BranchDisposition: disp}
			}
			if err := o.g.workspaceCall(cmd.Context(), cmd.ErrOrStderr(), args[0], mk, &data, confirmHint(args[0])); err != nil {
				return err
			}
			o.output.human(&data)
			if o.output.structured() {
				return o.output.write(cmd.OutOrStdout(), data)
			}
			return writeRetired(cmd.OutOrStdout(), data)
		},
	}
	cmd.ValidArgsFunction = completeWorkspaces(g)
	o.AddFlags(cmd)
	return cmd
}

// confirmHint tells, after a confirmation_required refusal, how to confirm.
func confirmHint(id string) func(protocol.WorkspaceRefusal) string {
	return func(r protocol.WorkspaceRefusal) string {
		if r.Kind != protocol.RefusalConfirmationRequired {
			return ""
		}
		if r.WorkspaceID != "" {
			id = r.WorkspaceID
		}
		return fmt.Sprintf("To delete the branch anyway (it stays restorable from the tombstone): shardctl ws retire %s --force-delete\nTo keep it: shardctl ws retire %s --keep", id, id)
	}
}

// writeRetired prints what retire did, and how to undo a deletion.
func writeRetired(w io.Writer, data protocol.WorkspaceRetireData) error {
	ws := data.Workspace
	branch, head := ws.Branch, ws.HeadSHA
	if t := ws.Tombstone; t != nil {
		branch, head = t.Branch, t.HeadSHA
	}
	if !data.BranchDeleted {
		_, err := fmt.Fprintf(w, "retired %s; branch %s kept at %s\n", ws.WorkspaceID, branch, orDash(shortSHA(head)))
		return err
	}
	fmt.Fprintf(w, "retired %s; branch %s deleted (%s)\n", ws.WorkspaceID, branch, orDash(string(data.Proof)))
	_, err := fmt.Fprintf(w, "undo: %s\n", restoreCommand(protocol.WorkspaceTombstone{Branch: branch, HeadSHA: head}))
	return err
}
