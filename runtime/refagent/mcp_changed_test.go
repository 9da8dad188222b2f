package refagent

// An MCP server whose tools change: the runtime follows its
// notifications/tools/list_changed, and the model's next request offers
// the new tools under the same permission rules and tools limit.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// growServerEnv, set in the test binary's environment, makes it run
// runGrowServer on its stdio instead of the tests (TestMain).
const growServerEnv = "SHARD_REFAGENT_TEST_MCP_GROW"

// runGrowServer serves newGrowServer on stdio.
func runGrowServer() { _ = newGrowServer().Run(context.Background(), &mcp.StdioTransport{}) }

// newGrowServer is a real MCP server (the official Go SDK's server side).
// It starts with the tools old, grow and grow_sync; calling grow adds peek
// (readOnlyHint) and poke (no hints) and removes old, and the SDK sends
// notifications/tools/list_changed for it. grow_sync does the same and
// answers only once the client has asked for the new list: the change is
// announced before the call's result.
func newGrowServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "grow", Version: "1"}, nil)
	listed := make(chan struct{}, 16)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				select {
				case listed <- struct{}{}:
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	object := map[string]any{"type": "object"}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	answer := func(text string) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		}
	}
	s.AddTool(&mcp.Tool{Name: "old", Description: "Removed by grow.", InputSchema: object, Annotations: readOnly}, answer("OLD-OK"))
	grow := func() {
		s.AddTool(&mcp.Tool{Name: "peek", Description: "Reads.", InputSchema: object, Annotations: readOnly}, answer("PEEK-OK"))
		s.AddTool(&mcp.Tool{Name: "poke", Description: "Changes.", InputSchema: object}, answer("POKE-OK"))
		s.RemoveTools("old")
	}
	s.AddTool(&mcp.Tool{Name: "grow", Description: "Adds peek and poke, removes old.", InputSchema: object, Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			grow()
			return answer("grown")(ctx, req)
		})
	s.AddTool(&mcp.Tool{Name: "grow_sync", Description: "grow, answered once the new list was asked for.", InputSchema: object, Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for len(listed) > 0 {
				<-listed
			}
			grow()
			select {
			case <-listed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return answer("grown")(ctx, req)
		})
	return s
}

// growModel is a scripted model over fakellm: "grow" calls grow__grow,
// "use" calls grow__peek then grow__poke; each ends with text once the
// tool results are in. It keeps the tool names each request offered.
type growModel struct {
	mu     sync.Mutex
	offers [][]string
}

func (g *growModel) answer(p fakellm.Prompt) fakellm.Turn {
	g.mu.Lock()
	g.offers = append(g.offers, slices.Clone(p.Tools))
	g.mu.Unlock()
	usage := fakellm.Usage{Input: 10, Output: 2}
	switch {
	case p.ToolOutput:
		return fakellm.Turn{Text: "done", Usage: usage}
	case p.LastUser == "grow" || p.LastUser == "grow_sync":
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "grow__" + p.LastUser}}, Usage: usage}
	default:
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "grow__peek"}, {Name: "grow__poke"}}, Usage: usage}
	}
}

// offer is the tool names request n (1-based) offered.
func (g *growModel) offer(t *testing.T, n int) []string {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > len(g.offers) {
		t.Fatalf("the model got %d requests, want at least %d", len(g.offers), n)
	}
	return g.offers[n-1]
}

// startGrow starts a runtime on an OpenAI model of fakellm with the grow
// server; the channel receives the server's name each time the runtime
// rebuilt its tools for a new list.
func startGrow(t *testing.T, tools []string) (*harness, *growModel, <-chan string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startGrowWith(t, tools, MCPServer{Name: "grow", Command: exe, Env: map[string]string{growServerEnv: "1"}})
}

// startGrowWith is startGrow with the grow server reached as server says.
func startGrowWith(t *testing.T, tools []string, server MCPServer) (*harness, *growModel, <-chan string) {
	t.Helper()
	g := &growModel{}
	f := fakellm.Start(t, fakellm.Script(g.answer))
	changed := make(chan string, 4)
	h := startWithProvider(t, f, "openai", "gpt-test", func(o *Options) {
		o.MCPServers = []MCPServer{server}
		o.Tools = tools
		o.mcpToolsChanged = func(server string) { changed <- server }
	})
	return h, g, changed
}

// waitChanged waits until the runtime has taken the server's new tools.
func waitChanged(t *testing.T, changed <-chan string) {
	t.Helper()
	select {
	case s := <-changed:
		if s != "grow" {
			t.Fatalf("tools changed for %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runtime never took the server's new tools")
	}
}

func TestMCPToolListChanged(t *testing.T) {
	h, g, changed := startGrow(t, nil)
	h.prompt("grow")
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if res.IsError || res.Content.Text != "grown" {
		t.Fatalf("grow: %+v", res)
	}
	first := g.offer(t, 1)
	if !slices.Contains(first, "grow__old") || !slices.Contains(first, "grow__grow") || slices.Contains(first, "grow__peek") {
		t.Fatalf("the first request offered %v", first)
	}
	waitChanged(t, changed)

	h.prompt("use")
	evs := h.until(protocol.TypePermissionRequest)
	offered := g.offer(t, 3)
	if !slices.Contains(offered, "grow__peek") || !slices.Contains(offered, "grow__poke") || slices.Contains(offered, "grow__old") || !slices.Contains(offered, "grow__grow") {
		t.Fatalf("the request after the change offered %v", offered)
	}
	// peek is read-only and ran without asking; poke asks.
	req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
	if req.ToolName != "grow__poke" {
		t.Fatalf("permission_request %+v", req)
	}
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "r1"}, RequestID: req.RequestID, Decision: "allow"})
	evs = append(evs, h.untilIdle()...)
	if n := len(of[*protocol.PermissionRequest](evs)); n != 1 {
		t.Fatalf("%d permission requests, want 1 (poke)", n)
	}
	var got []string
	for _, r := range of[*protocol.ToolResult](evs) {
		if r.IsError {
			t.Fatalf("tool_result %+v", r)
		}
		got = append(got, r.Content.Text)
	}
	if strings.Join(got, ",") != "PEEK-OK,POKE-OK" {
		t.Fatalf("tool results %q", got)
	}
}

// TestMCPToolListChangedKeepsTheToolsLimit: a new tool the agent's tools
// name is offered; one they do not name is neither offered nor run.
func TestMCPToolListChangedKeepsTheToolsLimit(t *testing.T) {
	h, g, changed := startGrow(t, []string{"grow__grow", "grow__peek"})
	h.prompt("grow")
	h.untilIdle()
	waitChanged(t, changed)
	h.prompt("use")
	evs := h.untilIdle()
	offered := g.offer(t, 3)
	if !slices.Contains(offered, "grow__peek") || slices.Contains(offered, "grow__poke") {
		t.Fatalf("offered %v", offered)
	}
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("a tool outside the limit asked")
	}
	res := of[*protocol.ToolResult](evs)
	if len(res) != 2 || res[0].IsError || res[0].Content.Text != "PEEK-OK" || !res[1].IsError || !strings.Contains(res[1].Content.Message, "not available to this agent") {
		t.Fatalf("tool results %+v", res)
	}
}

// TestMCPToolListChangedOverHTTP: a streamable HTTP server's
// notifications/tools/list_changed is followed too.
func TestMCPToolListChangedOverHTTP(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newGrowServer() }, nil))
	t.Cleanup(srv.Close)
	h, g, changed := startGrowWith(t, nil, MCPServer{Name: "grow", URL: srv.URL})
	h.prompt("grow")
	h.untilIdle()
	waitChanged(t, changed)
	h.prompt("use")
	evs := h.until(protocol.TypePermissionRequest)
	if offered := g.offer(t, 3); !slices.Contains(offered, "grow__peek") || slices.Contains(offered, "grow__old") {
		t.Fatalf("offered %v", offered)
	}
	req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "r1"}, RequestID: req.RequestID, Decision: "allow"})
	var got []string
	for _, r := range of[*protocol.ToolResult](append(evs, h.untilIdle()...)) {
		got = append(got, r.Content.Text)
	}
	if strings.Join(got, ",") != "PEEK-OK,POKE-OK" {
		t.Fatalf("tool results %q", got)
	}
}

// TestMCPToolListChangedWithinTheTurn: a change the server announces
// before a tool call's result is in the model's very next request, the
// one that carries that result.
func TestMCPToolListChangedWithinTheTurn(t *testing.T) {
	h, g, _ := startGrow(t, nil)
	h.prompt("grow_sync")
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if res.IsError || res.Content.Text != "grown" {
		t.Fatalf("grow_sync: %+v", res)
	}
	if first := g.offer(t, 1); slices.Contains(first, "grow__peek") {
		t.Fatalf("the first request offered %v", first)
	}
	if next := g.offer(t, 2); !slices.Contains(next, "grow__peek") || slices.Contains(next, "grow__old") {
		t.Fatalf("the request with the result offered %v", next)
	}
}
