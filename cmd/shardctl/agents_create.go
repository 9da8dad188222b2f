package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// agentsCreateOptions are the options of shardctl agents create.
type agentsCreateOptions struct {
	g              *globalOptions
	output         outputOptions
	cwd            string
	node           string
	name           string
	model          string
	provider       string
	mode           string
	headlessPolicy string
	tools          []string
	skills         []string
	mcp            mcpFlags
}

// AddFlags registers the agents create flags on cmd.
func (o *agentsCreateOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.cwd, "cwd", "", "the agent's working directory (default the current directory)")
	fs.StringVar(&o.node, "node", "", "in a cluster, the node the agent lives on (default the node shardctl talks to); --cwd is a path on that node")
	fs.StringVar(&o.name, "name", "", "a name for the agent")
	fs.StringVar(&o.model, "model", "", "model to use: a name or a provider/model id from shardctl models (default the daemon's)")
	fs.StringVar(&o.provider, "provider", "", "provider to run on, one of shardctl models (default the daemon's)")
	fs.StringVar(&o.mode, "mode", "", "initial mode (default the daemon's)")
	fs.StringVar(&o.headlessPolicy, "headless-policy", "", "what to do with permission requests nobody answers: deny, allow_if_rule_matches or queue")
	fs.StringSliceVar(&o.tools, "tools", nil, "limit the agent to these tools, comma-separated (e.g. read,ls,grep; default every tool)")
	fs.StringSliceVar(&o.skills, "skills", nil, "skills the agent loads, comma-separated: folders with a SKILL.md under the cwd's .shard/skills, .agents/skills or .claude/skills, or $SHARD_HOME/skills")
	o.mcp.AddFlags(cmd)
}

func newAgentsCreateCommand(g *globalOptions) *cobra.Command {
	o := &agentsCreateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "create [--cwd DIR]",
		Short: "Create an agent",
		Long: `Create a durable agent (agent.create) and print its id; -o json prints
{"agent_id":"..."} (-o yaml likewise). --cwd is resolved to an absolute path.
--tools limits what the agent's model is offered and may run (the daemon
refuses a name it does not know and lists the known ones); --skills names
skills the agent loads (a skill that does not exist is NOT_FOUND). In a
cluster, --node puts the agent on another node (shardctl cluster status
lists them): the node it talks to forwards the command there, and --cwd
is a path on that node.

--mcp declares an MCP server whose tools the agent's model is offered as
NAME__TOOL (read-only tools run without asking; the others ask):

  shardctl agents create --mcp 'fs=npx -y @modelcontextprotocol/server-filesystem /src'
  shardctl agents create --mcp docs=https://mcp.example.com/mcp \
      --mcp-header 'docs:Authorization=Bearer xyz'
  shardctl agents create --mcp gh=github-mcp-server --mcp-env gh:GITHUB_TOKEN
  shardctl agents create --mcp-file .mcp.json

A server named here wins over one of the same name in the daemon's config
or the runtime profile. agents show lists the agent's servers by name.`,
		Args: func(cmd *cobra.Command, args []string) error {
			// The usual slip: an unquoted --mcp value, whose arguments the
			// shell made into arguments of shardctl.
			if len(args) > 0 && len(o.mcp.servers) > 0 {
				return usageErrorf("unexpected argument %q: quote the whole --mcp value, e.g. --mcp 'fs=npx -y @modelcontextprotocol/server-filesystem /src'", args[0])
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			msg, err := o.message()
			if err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, msg, cmd.OutOrStdout())
			})
		},
	}
	o.AddFlags(cmd)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if len(o.mcp.servers) > 0 {
			return usageErrorf("%w (if it belongs to an --mcp server's command, quote the whole --mcp value)", err)
		}
		return usageErrorf("%w", err)
	})
	return cmd
}

// message builds and checks the agent.create command; problems with the
// flags are usage errors.
func (o *agentsCreateOptions) message() (*protocol.AgentCreate, error) {
	if err := o.output.validate(); err != nil {
		return nil, err
	}
	abs, err := absCwd(o.cwd)
	if err != nil {
		return nil, err
	}
	servers, err := o.mcp.build()
	if err != nil {
		return nil, err
	}
	msg := &protocol.AgentCreate{
		Header:         protocol.Header{Type: protocol.TypeAgentCreate},
		Cwd:            abs,
		Node:           o.node,
		Name:           o.name,
		Model:          o.model,
		Provider:       o.provider,
		Mode:           o.mode,
		HeadlessPolicy: o.headlessPolicy,
		Tools:          o.tools,
		Skills:         o.skills,
		MCPServers:     servers,
	}
	if err := msg.Validate(); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return msg, nil
}

func (o *agentsCreateOptions) run(ctx context.Context, conn *client.Conn, msg *protocol.AgentCreate, w io.Writer) error {
	var data protocol.AgentCreateData
	if err := conn.Call(ctx, msg, &data); err != nil {
		return err
	}
	if o.output.structured() {
		return o.output.write(w, data)
	}
	_, err := fmt.Fprintln(w, data.AgentID)
	return err
}

// absCwd is a --cwd flag made absolute: the current directory when it is
// empty; a path that cannot be made absolute is a usage error.
func absCwd(cwd string) (string, error) {
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("current directory: %w", err)
		}
		cwd = wd
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", usageErrorf("--cwd %q: %w", cwd, err)
	}
	return abs, nil
}
