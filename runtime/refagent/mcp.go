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
// offer, and for each server that failed, why. A server that says its tools
// changed (notifications/tools/list_changed) is listed again, and its new
// tools replace its old ones (follow).
type mcpClients struct {
	log     *slog.Logger
	timeout time.Duration
	// servers are the connected servers; down the ones that failed, with
	// why. Both are set by connectMCP and not changed after.
	servers []*mcpConn
	down    map[string]string

	mu sync.Mutex
	// byServer are each connected server's tools as last listed.
	byServer map[string][]tool
	// pending counts the list changes taken from the servers and not yet
	// followed (listed again and handed to the runtime); idle is closed
	// when it drops to 0 (nil while it is 0).
	pending int
	idle    chan struct{}

	stop context.CancelFunc // ends follow's goroutines
	wg   sync.WaitGroup
}

// mcpConn is one connected server.
type mcpConn struct {
	name string
	sess *mcp.ClientSession
	// changed holds a pending notifications/tools/list_changed: one is
	// enough, however many came, since the next listing sees them all.
	changed chan struct{}
}

// connectMCP connects to every server at once, each bounded by
// the start timeout, and lists their tools. A server that fails is logged
// and recorded in down: its tools are unavailable, the runtime runs on.
func connectMCP(ctx context.Context, servers []MCPServer, environ []string, stderr io.Writer, timeout time.Duration, log *slog.Logger) *mcpClients {
	c := &mcpClients{log: log, timeout: timeout, down: map[string]string{}, byServer: map[string][]tool{}, stop: func() {}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			changed := make(chan struct{}, 1)
			// The SDK calls this from its connection's reader: it must not
			// block, so it only marks the server's list as changed.
			onChange := func(context.Context, *mcp.ToolListChangedRequest) { c.notified(changed) }
			sess, tls, err := connectOne(ctx, s, environ, stderr, timeout, onChange)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// A change it announced before failing will not be followed.
				select {
				case <-changed:
					c.followed()
				default:
				}
				log.Error("MCP server unavailable", "server", s.Name, slog.Any("err", err))
				c.down[s.Name] = err.Error()
				return
			}
			log.Info("MCP server connected", "server", s.Name, "tools", len(tls))
			c.servers = append(c.servers, &mcpConn{name: s.Name, sess: sess, changed: changed})
			c.byServer[s.Name] = serverTools(s.Name, sess, tls, log)
		})
	}
	wg.Wait()
	return c
}

// serverTools are the runtime tools of the server named server: each of
// tls whose full name is a valid tool name.
func serverTools(server string, sess *mcp.ClientSession, tls []*mcp.Tool, log *slog.Logger) []tool {
	var out []tool
	for _, t := range tls {
		name := server + MCPToolSep + t.Name
		if !mcpToolName.MatchString(name) {
			log.Warn("MCP tool left out: its name is not a valid tool name", "server", server, "tool", t.Name)
			continue
		}
		out = append(out, mcpTool(name, sess, t))
	}
	return out
}

// tools are every connected server's tools as last listed, by name.
func (c *mcpClients) tools() []tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []tool
	for _, tls := range c.byServer {
		out = append(out, tls...)
	}
	slices.SortFunc(out, func(a, b tool) int { return strings.Compare(a.name, b.name) })
	return out
}

// notified marks a server's tool list as changed: one mark pending is
// enough, however many notifications come, since the next listing sees
// them all.
func (c *mcpClients) notified(changed chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case changed <- struct{}{}:
		c.pending++
		if c.idle == nil {
			c.idle = make(chan struct{})
		}
	default:
	}
}

// followed ends one pending change (listed again, or failed to).
func (c *mcpClients) followed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending--
	if c.pending == 0 {
		close(c.idle)
		c.idle = nil
	}
}

// closedChan is a channel that is always ready.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// settled is ready once every list change the servers announced so far
// has been followed: a provider call waits for it, so a change notified
// before the call is built is in it (a tool whose result made the server
// change its tools, then the model's next request).
func (c *mcpClients) settled() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle == nil {
		return closedChan
	}
	return c.idle
}

// follow lists a server's tools again each time it says they changed, until
// ctx ends or close; after each new listing it calls changed with the
// server's name (the runtime rebuilds its toolbox). A listing that fails
// keeps the server's old tools. A notification that came before follow is
// followed at once.
func (c *mcpClients) follow(ctx context.Context, changed func(server string)) {
	ctx, c.stop = context.WithCancel(ctx)
	for _, s := range c.servers {
		c.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.changed:
				}
				tls, err := listTools(ctx, s.sess, c.timeout)
				if err != nil {
					if ctx.Err() == nil {
						c.log.Warn("MCP server's changed tools could not be listed; its tools stay as they were", "server", s.name, slog.Any("err", err))
					}
					c.followed()
					continue
				}
				c.mu.Lock()
				c.byServer[s.name] = serverTools(s.name, s.sess, tls, c.log)
				c.mu.Unlock()
				c.log.Info("MCP server's tools changed", "server", s.name, "tools", len(tls))
				changed(s.name)
				c.followed()
			}
		})
	}
}

// connectOne starts or dials s and lists its tools; onChange is called on
// each notifications/tools/list_changed the server sends.
func connectOne(ctx context.Context, s MCPServer, environ []string, stderr io.Writer, timeout time.Duration, onChange func(context.Context, *mcp.ToolListChangedRequest)) (*mcp.ClientSession, []*mcp.Tool, error) {
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
		// The standalone SSE stream (a GET the SDK keeps open, and
		// drops when the server answers 405) is how a streamable HTTP
		// server's notifications/tools/list_changed reaches the runtime
		// between its requests.
		t = &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &http.Client{Transport: headerTransport(s.Headers)}}
	default:
		return nil, nil, fmt.Errorf("MCP server %q has neither a command nor a url", s.Name)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "shard", Version: "1"}, &mcp.ClientOptions{ToolListChangedHandler: onChange})
	sess, err := client.Connect(sctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("MCP server %q did not start: %w", s.Name, err)
	}
	out, err := listTools(sctx, sess, timeout)
	if err != nil {
		_ = sess.Close()
		return nil, nil, fmt.Errorf("MCP server %q: %w", s.Name, err)
	}
	return sess, out, nil
}

// listTools lists the server's tools, every page, bounded by timeout.
func listTools(ctx context.Context, sess *mcp.ClientSession, timeout time.Duration) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []*mcp.Tool
	for tl, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		out = append(out, tl)
	}
	return out, nil
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

// close stops following the servers and ends every session; a stdio
// server's child is stopped (stdin closed, then SIGTERM, then killed) and
// waited for.
func (c *mcpClients) close() {
	c.stop()
	c.wg.Wait()
	var wg sync.WaitGroup
	for _, s := range c.servers {
		wg.Go(func() { _ = s.sess.Close() })
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
