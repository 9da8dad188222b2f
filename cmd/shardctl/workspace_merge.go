package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/protocol"
)

// defaultMergeStrategy is squash: one reviewed workspace becomes one commit
// on the target, which keeps the target's history readable, and retire's
// delete_if_merged proves a squash merge (patch-id) so the branch is then
// deleted without asking. --strategy merge keeps the branch's commits.
const defaultMergeStrategy = protocol.MergeSquash

// workspaceMergeOptions are the options of shardctl workspace merge.
type workspaceMergeOptions struct {
	g        *globalOptions
	output   wsOutput
	strategy string
	message  string
}

// AddFlags registers the workspace merge flags on cmd.
func (o *workspaceMergeOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.strategy, "strategy", string(defaultMergeStrategy), "merge (a merge commit), squash (one commit) or rebase (rebase, then fast-forward)")
	fs.StringVarP(&o.message, "message", "m", "", "commit message of the merge or squash commit (default one the daemon writes; not with rebase)")
}

func newWorkspaceMergeCommand(g *globalOptions) *cobra.Command {
	o := &workspaceMergeOptions{g: g}
	cmd := &cobra.Command{
		Use:   "merge ID [--strategy merge|squash|rebase] [-m MESSAGE]",
		Short: "Merge a workspace's branch into its integration target",
		Long: `Integrate a workspace's branch into its integration target in the main
checkout (workspace.merge) and print the target's new commit sha; a summary
goes to stderr. The default strategy is squash: one workspace, one commit on
the target, and a later "workspace retire" proves it merged (patch-id) and
deletes the branch without asking. merge makes a merge commit; rebase
rebases the branch onto the target and fast-forwards the target.

Refused, with nothing changed, when the main checkout is dirty
(main_dirty), on another branch (wrong_branch), or the merge would conflict
(merge_conflict, with the conflicting paths). -o json|yaml prints the
WorkspaceMergeData.
` + workspaceExitHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			probe := protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: args[0],
				Strategy: protocol.MergeStrategy(o.strategy), Message: o.message}
			if err := probe.Validate(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			var data protocol.WorkspaceMergeData
			mk := func(id string) protocol.Typed {
				m := probe
				m.WorkspaceID = id
				return &m
			}
			if err := o.g.workspaceCall(cmd.Context(), cmd.ErrOrStderr(), args[0], mk, &data, nil); err != nil {
				return err
			}
			o.output.human(&data)
			if o.output.structured() {
				return o.output.write(cmd.OutOrStdout(), data)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s into %s: %s..%s (%s)\n", data.Workspace.WorkspaceID, data.Strategy,
				data.IntegrationTarget, shortSHA(data.PreviousSHA), shortSHA(data.MergedSHA), statTotal(data.Stats))
			_, err := fmt.Fprintln(cmd.OutOrStdout(), data.MergedSHA)
			return err
		},
	}
	cmd.ValidArgsFunction = completeWorkspaces(g)
	o.AddFlags(cmd)
	return cmd
}
