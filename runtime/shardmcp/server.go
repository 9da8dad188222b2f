package shardmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/daemontool"
)

// ServerName is the name the server gives itself in MCP's initialize, and
// the name the ACP adapter gives it in an agent's mcpServers (so Claude
// Code calls its tools mcp__shard__<tool>).
const ServerName = "shard"

// Options configure a server.
type Options struct {
	// Socket is the daemon's unix socket (SHARD_SOCKET). Required.
	Socket string
	// AgentID is the agent the server acts as (SHARD_AGENT_ID): the parent
	// of the jobs it creates, the author of what it writes. Required.
	AgentID string
	// Version is given in MCP's initialize; "" is "dev".
	Version string
	// Log receives the calls that failed for a reason other than the
	// daemon's refusal; never arguments or task text. Nil discards.
	Log *slog.Logger
}

// ErrNoDaemon is returned by New without a socket or agent id: the server
// only ever acts as one agent of a running daemon.
var ErrNoDaemon = errors.New("Shard's MCP server needs the daemon socket (SHARD_SOCKET) and the agent it acts as (SHARD_AGENT_ID); " +
	"the ACP adapter sets both for the agents it hosts")

// New returns the MCP server of the agent o.AgentID on o.Socket, every tool
// added. Run it on a transport with its Run method (stdio for `shardd mcp`).
func New(o Options) (*mcp.Server, error) {
	if o.Socket == "" || o.AgentID == "" {
		return nil, ErrNoDaemon
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "Shard", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: o.Log})
	for _, t := range tools {
		s.AddTool(t.mcpTool(), handler{o: o, t: t}.call)
	}
	return s, nil
}

const instructions = "Shard runs you as one of its agents. These tools delegate work to child agents that run in " +
	"the background as Shard jobs (subagent_*), and take part in a Shard team (team_*). Create children with " +
	"subagent_create, then subagent_wait for their final text; a child's report also reaches you when it ends."

// handler runs one tool's calls.
type handler struct {
	o Options
	t toolDef
}

// call builds the tool's command from the arguments, sends it as the agent
// and makes the result: the response data as JSON text and structured
// content, or a tool error carrying the protocol code.
func (h handler) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &args); err != nil {
			return toolError(protocol.CodeInvalidRequest, "invalid arguments: INVALID_REQUEST: "+err.Error()), nil
		}
	}
	var cmd protocol.Command
	var err error
	if h.t.team {
		cmd, err = daemontool.TeamCommand(h.t.action, h.o.AgentID, args)
	} else {
		cmd, err = daemontool.SubagentCommand(h.t.action, h.o.AgentID, args)
	}
	if err != nil {
		return toolError(protocol.CodeInvalidRequest, "invalid arguments: INVALID_REQUEST: "+err.Error()), nil
	}
	o := daemontool.Do(ctx, h.o.Socket, cmd)
	if o.Err != nil {
		h.o.Log.Warn("shard MCP call failed", "tool", h.t.name, "command", cmd.Head().Type, slog.Any("err", o.Err))
	}
	if o.Failure != "" {
		return toolError(o.Code, o.Failure), nil
	}
	return result(o.Value)
}

// result is a successful call's result: the data as JSON text (what a
// model reads) and as structured content.
func result(value any) (*mcp.CallToolResult, error) {
	if value == nil {
		value = map[string]any{}
	}
	text, err := json.Marshal(value)
	if err != nil {
		return toolError(protocol.CodeInternal, "encode the answer: "+err.Error()), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: value}, nil
}

// toolError is a tool error: text for the model, and the protocol code in
// the structured content {code, error} for a program ("" when the call
// failed before the daemon answered).
func toolError(code protocol.ErrorCode, text string) *mcp.CallToolResult {
	sc := map[string]any{"error": text}
	if code != "" {
		sc["code"] = string(code)
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}
}

// ServeStdio serves the server of o on the process's stdin and stdout
// until the host closes stdin (a normal end: nil) or ctx ends.
func ServeStdio(ctx context.Context, o Options) error {
	s, err := New(o)
	if err != nil {
		return err
	}
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return fmt.Errorf("shard MCP server: %w", err)
	}
	return nil
}
