package refagent

// MCP servers: a real stdio server from npm (the reference filesystem
// server) offers its tools through the runtime's permission gate.

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// fsServer is the reference filesystem MCP server that
// scripts/install-agents.sh installs; the test skips without it (fails in
// strict mode).
func fsServer(t *testing.T) string {
	t.Helper()
	_, file, _, _ := goruntime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	if _, err := exec.LookPath("node"); err != nil {
		testhost.Missing(t, "node", err.Error())
	}
	return bin
}

// startMCP starts a runtime whose cwd the filesystem server serves.
func startMCP(t *testing.T, servers func(cwd string) []MCPServer) *harness {
	t.Helper()
	return start(t, func(o *Options) { o.MCPServers = servers(o.Cwd) })
}

func TestMCPReadOnlyToolRunsWithoutAsking(t *testing.T) {
	bin := fsServer(t)
	h := startMCP(t, func(cwd string) []MCPServer { return []MCPServer{{Name: "fs", Command: bin, Args: []string{cwd}}} })
	h.handshake()
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "note.txt"), []byte("from the server"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(h.opts.Cwd, "note.txt")})
	h.prompt("sim: tool fs__read_text_file " + string(args))
	evs := h.untilIdle()
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("a readOnlyHint tool asked for permission")
	}
	res := one[*protocol.ToolResult](t, evs)
	if res.IsError || res.Content.Kind != "text" || !strings.Contains(res.Content.Text, "from the server") {
		t.Fatalf("tool_result %+v", res)
	}
}

func TestMCPWriteToolAsks(t *testing.T) {
	bin := fsServer(t)
	for _, decision := range []string{"allow", "deny"} {
		t.Run(decision, func(t *testing.T) {
			h := startMCP(t, func(cwd string) []MCPServer { return []MCPServer{{Name: "fs", Command: bin, Args: []string{cwd}}} })
			h.handshake()
			target := filepath.Join(h.opts.Cwd, "out.txt")
			args := protocol.MustMarshal(map[string]string{"path": target, "content": "written"})
			h.prompt("sim: tool fs__write_file " + string(args))
			evs := h.until(protocol.TypePermissionRequest)
			req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
			if req.ToolName != "fs__write_file" {
				t.Fatalf("permission_request %+v", req)
			}
			h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, ID: "r1"}, RequestID: req.RequestID, Decision: decision})
			evs = h.untilIdle()
			res := one[*protocol.ToolResult](t, evs)
			b, err := os.ReadFile(target)
			switch decision {
			case "allow":
				if res.IsError || err != nil || string(b) != "written" {
					t.Fatalf("tool_result %+v, file %q %v", res, b, err)
				}
			case "deny":
				if !res.IsError || err == nil {
					t.Fatalf("tool_result %+v, file %q %v", res, b, err)
				}
			}
		})
	}
}

func TestMCPServerThatFailsLeavesItsToolsUnavailable(t *testing.T) {
	h := startMCP(t, func(cwd string) []MCPServer {
		return []MCPServer{{Name: "gone", Command: filepath.Join(cwd, "no-such-server")}}
	})
	h.handshake()
	h.prompt(`sim: tool gone__read {}`)
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if !res.IsError || !strings.Contains(res.Content.Message, `MCP server "gone" did not start`) {
		t.Fatalf("tool_result %+v", res)
	}
}

func TestMCPToolsLimitedByTools(t *testing.T) {
	bin := fsServer(t)
	h := start(t, func(o *Options) {
		o.MCPServers = []MCPServer{{Name: "fs", Command: bin, Args: []string{o.Cwd}}}
		o.Tools = []string{"fs__read_text_file"}
	})
	h.handshake()
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(h.opts.Cwd, "x"), "content": "x"})
	h.prompt("sim: tool fs__write_file " + string(args))
	res := one[*protocol.ToolResult](t, h.untilIdle())
	if !res.IsError || !strings.Contains(res.Content.Message, "limited to fs__read_text_file") {
		t.Fatalf("tool_result %+v", res)
	}
}
