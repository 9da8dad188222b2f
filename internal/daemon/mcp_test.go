package daemon_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// TestMCPServerToolsOverTheWire: the daemon's MCP server (the npm
// reference filesystem server) reaches the real runtime binary, an
// agent.create whose tools name one of its tools is accepted, and the
// agent reads a file through it.
func TestMCPServerToolsOverTheWire(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	served := shortTemp(t)
	if err := os.WriteFile(filepath.Join(served, "note.txt"), []byte("served by MCP"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		p := cfg.Runtimes[config.DefaultRuntime]
		p.MCPServers = map[string]config.MCPServer{"fs": {Command: bin, Args: []string{served}}}
		cfg.Runtimes[config.DefaultRuntime] = p
	})
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Tools = []string{"read", "fs__read_text_file"} })
	attach(t, c, id, "")
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(served, "note.txt")})
	prompt(t, c, id, "sim: tool fs__read_text_file "+string(args))
	tr := waitFor(t, c, isType(protocol.TypeToolResult, id)).Msg.(*protocol.ToolResult)
	if tr.IsError || !strings.Contains(tr.Content.Text, "served by MCP") {
		t.Fatalf("tool_result %+v", tr)
	}
}
