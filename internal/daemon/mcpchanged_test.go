package daemon_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// growMCPEnv, set in this test binary's environment, makes it a real MCP
// server on its stdio (runGrowMCP) instead of the tests (TestMain).
const growMCPEnv = "SHARD_DAEMON_TEST_MCP_GROW"

// runGrowMCP serves a real MCP server (the official Go SDK's server side)
// on stdio: it starts with the tools old and grow; calling grow adds peek
// (readOnlyHint) and poke (no hints), removes old, and answers once the
// client has asked for the new list, so the change is announced
// (notifications/tools/list_changed) before the call's result.
func runGrowMCP() {
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
	s.AddTool(&mcp.Tool{Name: "old", InputSchema: object, Annotations: readOnly}, answer("OLD-OK"))
	s.AddTool(&mcp.Tool{Name: "grow", InputSchema: object, Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for len(listed) > 0 {
				<-listed
			}
			s.AddTool(&mcp.Tool{Name: "peek", InputSchema: object, Annotations: readOnly}, answer("PEEK-OK"))
			s.AddTool(&mcp.Tool{Name: "poke", InputSchema: object}, answer("POKE-OK"))
			s.RemoveTools("old")
			select {
			case <-listed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return answer("grown")(ctx, req)
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// TestMCPToolListChangedOverTheWire: an agent's MCP server (a real one,
// this test binary) changes its tools when one is called; the real
// runtime binary follows its notifications/tools/list_changed, so the
// next provider call of the same turn runs the new tools (the read-only
// one without asking, the other through the permission gate), and the
// removed one is gone.
func TestMCPToolListChangedOverTheWire(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) {
		m.MCPServers = map[string]protocol.MCPServer{"grow": {Command: exe, Env: map[string]string{growMCPEnv: "1"}}}
	})
	attach(t, c, id, "")
	prompt(t, c, id, "sim: tool grow__grow {}\nsim: tool grow__peek {}\nsim: tool grow__poke {}")
	evs := collectUntil(t, c, isType(protocol.TypePermissionRequest, id))
	req := evs[len(evs)-1].Msg.(*protocol.PermissionRequest)
	if req.ToolName != "grow__poke" {
		t.Fatalf("permission_request %+v", req)
	}
	if _, err := c.Request(ctx(t), permResponse(id, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, collectUntil(t, c, isType(protocol.TypeTurnEnd, id))...)
	var got []string
	asked := 0
	for _, e := range evs {
		switch m := e.Msg.(type) {
		case *protocol.ToolResult:
			got = append(got, m.Content.Text+m.Content.Message)
		case *protocol.PermissionRequest:
			asked++
		}
	}
	if strings.Join(got, ",") != "grown,PEEK-OK,POKE-OK" || asked != 1 {
		t.Fatalf("tool results %q, %d permission requests", got, asked)
	}

	evs = runTurn(t, c, id, "sim: tool grow__old {}")
	if tr := lastResult(evs); tr == nil || !tr.IsError || !strings.Contains(tr.Content.Message, `unknown tool "grow__old"`) {
		t.Fatalf("the removed tool: %+v", tr)
	}
}

// lastResult is the last tool_result of evs, nil when there is none.
func lastResult(evs []client.Event) *protocol.ToolResult {
	var out *protocol.ToolResult
	for _, e := range evs {
		if r, ok := e.Msg.(*protocol.ToolResult); ok {
			out = r
		}
	}
	return out
}
