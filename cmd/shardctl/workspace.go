package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Exit codes of the workspace commands, on top of the root's (errors.go):
// a refusal and an unknown workspace are told apart from other failures, so
// a script can retry, confirm or give up without parsing messages. They are
// new numbers (8, 9): no existing code changes meaning, and every other
// failure of a workspace command keeps exit 1.
const (
	// exitRefused: the daemon refused with typed workspace data (error.data
	// {kind, …}): confirmation_required, dirty, live, busy, merge_conflict,
	// main_dirty, wrong_branch, not_a_repository, unsafe, …
	exitRefused = 8
	// exitNotFound: no such workspace (NOT_FOUND).
	exitNotFound = 9
)

// workspaceExitHelp documents the workspace exit codes in every workspace
// command's help.
const workspaceExitHelp = `
Exit codes (besides shardctl's usual 0, 1, 2, 3):
  8    refused: the daemon refused with a typed reason, printed as
       "refused: <kind>: <reason>" followed by the paths involved
       (confirmation_required, dirty, live, busy, locked, merge_conflict,
       main_dirty, wrong_branch, not_a_repository, branch_exists, …)
  9    not found: no such workspace`

func newWorkspaceCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workspace",
		Aliases: []string{"ws", "workspaces"},
		Short:   "Create, review, merge and retire git-worktree workspaces",
		Long: `A workspace is a git worktree of a repository on a branch of its own,
created and recorded by the daemon, in which agents work without sharing a
checkout (workspace.* commands over the daemon socket).

Workspace ids may be given in full or as any unique prefix (tables show
them shortened; -o wide shows them whole).
` + workspaceExitHelp,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		newWorkspaceLsCommand(g),
		newWorkspaceShowCommand(g),
		newWorkspaceCreateCommand(g),
		newWorkspaceAttachCommand(g),
		newWorkspaceDiffCommand(g),
		newWorkspaceMergeCommand(g),
		newWorkspaceRetireCommand(g),
	)
	return cmd
}

// wsOutput is -o of the workspace commands: table (and, where wide is
// allowed, wide), json or yaml.
type wsOutput struct {
	format    string
	allowWide bool
}

// AddFlags registers -o/--output on fs.
func (o *wsOutput) AddFlags(fs *pflag.FlagSet) {
	help := "output format: table, json or yaml"
	if o.allowWide {
		help = "output format: table, wide, json or yaml"
	}
	fs.StringVarP(&o.format, "output", "o", formatTable, help)
}

func (o *wsOutput) validate() error {
	if o.format == formatWide {
		if o.allowWide {
			return nil
		}
		return usageErrorf("invalid --output %q: want table, json or yaml", o.format)
	}
	base := outputOptions{format: o.format}
	if err := base.validate(); err != nil {
		if o.allowWide {
			return usageErrorf("invalid --output %q: want table, wide, json or yaml", o.format)
		}
		return err
	}
	return nil
}

func (o *wsOutput) structured() bool { return o.format == formatJSON || o.format == formatYAML }

func (o *wsOutput) write(w io.Writer, v any) error {
	base := outputOptions{format: o.format}
	return base.write(w, v)
}

// wsIDPrefix is the prefix every workspace id has.
const wsIDPrefix = "workspace-"

// shortWorkspaceID shortens an id for tables: the prefix and 8 characters.
func shortWorkspaceID(id string) string {
	rest, ok := strings.CutPrefix(id, wsIDPrefix)
	if !ok || len(rest) <= 8 {
		return id
	}
	return wsIDPrefix + rest[:8]
}

// resolveWorkspaceID turns a unique prefix (as tables show) into a full id
// through workspace.list with retired ones. An id that matches nothing is
// returned as given, for the daemon to answer NOT_FOUND; one that matches
// several is a usage error.
func resolveWorkspaceID(ctx context.Context, conn *client.Conn, id string) (string, error) {
	var data protocol.WorkspaceListData
	q := &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, IncludeRetired: true}
	if err := conn.Call(ctx, q, &data); err != nil {
		return "", workspaceError(err)
	}
	var matches []string
	for _, w := range data.Workspaces {
		if w.WorkspaceID == id {
			return id, nil
		}
		if strings.HasPrefix(w.WorkspaceID, id) {
			matches = append(matches, w.WorkspaceID)
		}
	}
	switch len(matches) {
	case 0:
		return id, nil
	case 1:
		return matches[0], nil
	}
	return "", usageErrorf("workspace id %q is ambiguous: %s", id, strings.Join(matches, ", "))
}

// workspaceError classifies a workspace command's failure: a typed refusal
// exits 8 (printed by printRefusal), NOT_FOUND exits 9, anything else is
// left to the root's classification.
func workspaceError(err error) error {
	if _, ok := protocol.WorkspaceRefusalOf(err); ok {
		return exitWith(exitRefused, err, false)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeNotFound {
		return exitWith(exitNotFound, err, false)
	}
	return err
}

// refusalError prints a typed refusal to w — "shardctl: refused: <kind>:
// <reason>", the paths involved, and hint when set — and returns the exit-8
// error, already printed. Other errors go through workspaceError.
func refusalError(w io.Writer, err error, hint func(protocol.WorkspaceRefusal) string) error {
	r, ok := protocol.WorkspaceRefusalOf(err)
	if !ok {
		return workspaceError(err)
	}
	printRefusal(w, r)
	if hint != nil {
		if h := hint(r); h != "" {
			fmt.Fprintln(w, h)
		}
	}
	return exitWith(exitRefused, err, true)
}

// printRefusal writes a refusal: one line, then the paths indented, then
// the agents that make the workspace live or busy.
func printRefusal(w io.Writer, r protocol.WorkspaceRefusal) {
	reason := r.Reason
	if reason == "" {
		reason = string(r.Kind)
	}
	fmt.Fprintf(w, "shardctl: refused: %s: %s\n", r.Kind, reason)
	if r.Kind == protocol.RefusalWrongBranch && r.Branch != "" {
		fmt.Fprintf(w, "  main checkout is on %s, not %s\n", r.Branch, orDash(r.IntegrationTarget))
	}
	for _, p := range r.Paths {
		fmt.Fprintf(w, "  %s\n", p)
	}
	if r.PathsTruncated {
		fmt.Fprintln(w, "  … (more paths not listed)")
	}
	if len(r.AgentIDs) > 0 {
		fmt.Fprintf(w, "  agents: %s\n", strings.Join(r.AgentIDs, ", "))
	}
}

// workspaceCall resolves id, then sends the command mk builds for it,
// decoding into data; failures are classified (refusals printed to stderr
// with hint).
func (g *globalOptions) workspaceCall(ctx context.Context, stderr io.Writer, id string, mk func(id string) protocol.Typed, data any, hint func(protocol.WorkspaceRefusal) string) error {
	return g.oneShot(ctx, func(ctx context.Context, conn *client.Conn) error {
		full, err := resolveWorkspaceID(ctx, conn, id)
		if err != nil {
			return err
		}
		if err := conn.Call(ctx, mk(full), data); err != nil {
			return refusalError(stderr, err, hint)
		}
		return nil
	})
}

// completeWorkspaces completes workspace ids.
func completeWorkspaces(g *globalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var ids []string
		_ = g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
			var data protocol.WorkspaceListData
			if err := conn.Call(ctx, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}}, &data); err != nil {
				return err
			}
			for _, w := range data.Workspaces {
				ids = append(ids, w.WorkspaceID+"\t"+orDash(w.Label))
			}
			return nil
		})
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

// human escapes the control characters of v's strings for a person's
// output: see sanitize.go.
func (o *wsOutput) human(v any) {
	if !o.structured() {
		safeAll(v)
	}
}
