package refagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
	"github.com/shard-dev/shard/runtime/tools"
)

// MCPServer is one MCP server whose tools the runtime offers as its own
// (docs/protocol.md §10.1 MCP servers): a stdio server (Command, Args,
// Env), which the runtime starts as its child, or a streamable HTTP one
// (URL, Headers). Env and Headers may hold secrets: they are never logged.
type MCPServer struct {
	// Name prefixes the server's tools: <Name>__<tool>.
	Name    string            `json:"name"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// MCPToolSep joins a server's name and its tool's name into the tool name
// the model sees (docs/protocol.md §10.1).
const MCPToolSep = protocol.MCPToolSep

// defaultMCPStartTimeout bounds how long one server may take to start,
// initialize and list its tools; a server slower than that is left out.
const defaultMCPStartTimeout = 20 * time.Second

// mcpToolName is what a tool name must look like to reach the providers
// (their common limit).
var mcpToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// mcpClients are the sessions with the runtime's MCP servers: the tools they
// offer, and for each server that failed, why.
type mcpClients struct {
	sessions []*mcp.ClientSession
	tools    []tool
	down     map[string]string
}

// connectMCP connects to every server at once, each bounded by
// the start timeout, and lists their tools. A server that fails is logged
// and recorded in down: its tools are unavailable, the runtime runs on.
func connectMCP(ctx context.Context, servers []MCPServer, environ []string, stderr io.Writer, timeout time.Duration, log *slog.Logger) *mcpClients {
	c := &mcpClients{down: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			sess, tls, err := connectOne(ctx, s, environ, stderr, timeout)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				log.Error("MCP server unavailable", "server", s.Name, slog.Any("err", err))
				c.down[s.Name] = err.Error()
				return
			}
			log.Info("MCP server connected", "server", s.Name, "tools", len(tls))
			c.sessions = append(c.sessions, sess)
			for _, t := range tls {
				name := s.Name + MCPToolSep + t.Name
				if !mcpToolName.MatchString(name) {
					log.Warn("MCP tool left out: its name is not a valid tool name", "server", s.Name, "tool", t.Name)
					continue
				}
				c.tools = append(c.tools, mcpTool(name, sess, t))
			}
		})
	}
	wg.Wait()
	slices.SortFunc(c.tools, func(a, b tool) int { return strings.Compare(a.name, b.name) })
	return c
}

// connectOne starts or dials s and lists its tools.
func connectOne(ctx context.Context, s MCPServer, environ []string, stderr io.Writer, timeout time.Duration) (*mcp.ClientSession, []*mcp.Tool, error) {
	var t mcp.Transport
	switch {
	case s.Command != "":
		cmd := exec.Command(s.Command, s.Args...)
		if environ == nil {
			environ = os.Environ()
		}
		cmd.Env = append(slices.Clone(environ), envList(s.Env)...)
		// Its stderr is the runtime's (the agent's log); the child stays in
		// the runtime's process group, so the daemon's stop reaches it, and
		// dies with the runtime (Pdeathsig), so a runtime killed without a
		// shutdown (its daemon killed) leaves no server behind.
		cmd.Stderr = stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case s.URL != "":
		t = &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &http.Client{Transport: headerTransport(s.Headers)},
			DisableStandaloneSSE: true}
	default:
		return nil, nil, fmt.Errorf("MCP server %q has neither a command nor a url", s.Name)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "shard", Version: "1"}, nil)
	sess, err := client.Connect(sctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("MCP server %q did not start: %w", s.Name, err)
	}
	var out []*mcp.Tool
	for tl, err := range sess.Tools(sctx, nil) {
		if err != nil {
			_ = sess.Close()
			return nil, nil, fmt.Errorf("MCP server %q: list tools: %w", s.Name, err)
		}
		out = append(out, tl)
	}
	return sess, out, nil
}

// envList is env as sorted KEY=VALUE entries.
func envList(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// headerTransport adds headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// close ends every session; a stdio server's child is stopped (stdin
// closed, then SIGTERM, then killed) and waited for.
func (c *mcpClients) close() {
	var wg sync.WaitGroup
	for _, s := range c.sessions {
		wg.Go(func() { _ = s.Close() })
	}
	wg.Wait()
}

// mcpTool is the runtime tool named name that calls t on sess. A tool the
// server annotates readOnlyHint runs without asking; any other goes
// through plan mode and the permission gate like the built-in mutating
// tools.
func mcpTool(name string, sess *mcp.ClientSession, t *mcp.Tool) tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	return tool{
		name:     name,
		readOnly: readOnly,
		spec:     provider.ToolSpec{Name: name, Description: desc, Schema: schema},
		check:    func(map[string]any) error { return nil },
		ask: func(args map[string]any) (string, []protocol.PermissionDetail) {
			b, _ := json.Marshal(args)
			return fmt.Sprintf("Allow the MCP tool %s with %s?", name, truncateText(string(b), 500)), nil
		},
		preview: func(map[string]any) *protocol.RenderDescriptor { return nil },
		run: func(ctx context.Context, args map[string]any) toolOutput {
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
			if err != nil {
				return errorOutput("MCP tool %s failed: %v", name, err)
			}
			return mcpOutput(res)
		},
	}
}

// mcpOutput turns an MCP tool result into a tool result: its text content
// joined, else its structured content as JSON, an error result as an error.
func mcpOutput(res *mcp.CallToolResult) toolOutput {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentError, Message: text}, isError: true}
	}
	if text == "" && res.StructuredContent != nil {
		return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentJSON, Value: res.StructuredContent}}
	}
	return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentText, Text: text}}
}
