package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// workspaceAgentFlags configure the fresh agent that create and attach
// launch, as agents create does.
type workspaceAgentFlags struct {
	title, name, model, provider, mode string
}

// AddFlags registers the agent flags on fs.
func (a *workspaceAgentFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.name, "name", "", "a name for the new agent")
	fs.StringVar(&a.title, "title", "", "a title for the new agent's session")
	fs.StringVar(&a.model, "model", "", "model of the new agent (default the daemon's)")
	fs.StringVar(&a.provider, "provider", "", "provider of the new agent (default the daemon's)")
	fs.StringVar(&a.mode, "mode", "", "initial mode of the new agent (default the daemon's)")
}

// workspaceCreateOptions are the options of shardctl workspace create.
type workspaceCreateOptions struct {
	g      *globalOptions
	output wsOutput
	agent  workspaceAgentFlags
	cwd    string
	label  string
	branch string
	base   string
	target string
}

// AddFlags registers the workspace create flags on cmd.
func (o *workspaceCreateOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	o.agent.AddFlags(fs)
	fs.StringVar(&o.cwd, "cwd", "", "a directory inside the repository (default the current directory)")
	fs.StringVar(&o.label, "label", "", "a label for the workspace")
	fs.StringVar(&o.branch, "branch", "", "the new branch (default one the daemon generates)")
	fs.StringVar(&o.base, "base", "", "the ref to branch from (default the repository's HEAD)")
	fs.StringVar(&o.target, "target", "", "the integration target branch (default the branch checked out in the main checkout)")
}

func newWorkspaceCreateCommand(g *globalOptions) *cobra.Command {
	o := &workspaceCreateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "create [--cwd DIR] [--label L] [--branch B] [--base REF] [--target BRANCH]",
		Short: "Create a workspace and start an agent in it",
		Long: `Create a workspace (workspace.create): a new branch in a new git worktree of
the repository containing --cwd (resolved to an absolute path), and a fresh
agent working in it. Prints the workspace id, the agent id and the
worktree path, one "key: value" per line; -o json|yaml prints
{"agent_id", "session_id", "workspace":WorkspaceInfo}.
` + workspaceExitHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			msg, err := o.message()
			if err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var data protocol.WorkspaceCreateData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return refusalError(cmd.ErrOrStderr(), err, nil)
				}
				return writeWorkspaceAgent(cmd.OutOrStdout(), o.output, data, true)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// message builds and checks the workspace.create command; problems with
// the flags are usage errors.
func (o *workspaceCreateOptions) message() (*protocol.WorkspaceCreate, error) {
	if err := o.output.validate(); err != nil {
		return nil, err
	}
	abs, err := absCwd(o.cwd)
	if err != nil {
		return nil, err
	}
	msg := &protocol.WorkspaceCreate{
		Header:            protocol.Header{Type: protocol.TypeWorkspaceCreate},
		Cwd:               abs,
		Label:             o.label,
		Branch:            o.branch,
		BaseRef:           o.base,
		IntegrationTarget: o.target,
		Title:             o.agent.title,
		Name:              o.agent.name,
		Model:             o.agent.model,
		Provider:          o.agent.provider,
		Mode:              o.agent.mode,
	}
	if err := msg.Validate(); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return msg, nil
}

// writeWorkspaceAgent prints a create or attach response: structured, or
// the ids (and, for create, the worktree) as "key: value" rows; attach
// prints the agent id alone, for scripts.
func writeWorkspaceAgent(w io.Writer, out wsOutput, data protocol.WorkspaceCreateData, create bool) error {
	out.human(&data)
	if out.structured() {
		return out.write(w, data)
	}
	if !create {
		_, err := fmt.Fprintln(w, data.AgentID)
		return err
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "workspace:\t%s\n", data.Workspace.WorkspaceID)
	fmt.Fprintf(tw, "agent:\t%s\n", data.AgentID)
	fmt.Fprintf(tw, "worktree:\t%s\n", data.Workspace.Cwd)
	fmt.Fprintf(tw, "branch:\t%s\n", data.Workspace.Branch)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write workspace: %w", err)
	}
	return nil
}

// workspaceAttachOptions are the options of shardctl workspace attach.
type workspaceAttachOptions struct {
	g      *globalOptions
	output wsOutput
	agent  workspaceAgentFlags
}

// AddFlags registers the workspace attach flags on cmd.
func (o *workspaceAttachOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	o.agent.AddFlags(cmd.Flags())
}

func newWorkspaceAttachCommand(g *globalOptions) *cobra.Command {
	o := &workspaceAttachOptions{g: g}
	cmd := &cobra.Command{
		Use:   "attach ID [--name N]",
		Short: "Start another agent in a workspace",
		Long: `Start another fresh agent in an existing workspace (workspace.attach) and
print its id; -o json|yaml prints {"agent_id", "session_id",
"workspace":WorkspaceInfo}. (To talk to an agent, use shardctl attach
AGENT_ID.)
` + workspaceExitHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			var data protocol.WorkspaceAttachData
			mk := func(id string) protocol.Typed {
				return &protocol.WorkspaceAttach{
					Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: id,
					Title: o.agent.title, Name: o.agent.name, Model: o.agent.model, Provider: o.agent.provider, Mode: o.agent.mode,
				}
			}
			if err := o.g.workspaceCall(cmd.Context(), cmd.ErrOrStderr(), args[0], mk, &data, nil); err != nil {
				return err
			}
			return writeWorkspaceAgent(cmd.OutOrStdout(), o.output, data, false)
		},
	}
	cmd.ValidArgsFunction = completeWorkspaces(g)
	o.AddFlags(cmd)
	return cmd
}
