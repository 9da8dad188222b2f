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

// fsServerBin is the npm reference filesystem MCP server that
// scripts/install-agents.sh installs; without it the test skips (fails in
// strict mode).
func fsServerBin(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	return bin
}

// TestMCPServerToolsOverTheWire: the daemon's MCP server (the npm
// reference filesystem server) reaches the real runtime binary, an
// agent.create whose tools name one of its tools is accepted, and the
// agent reads a file through it.
func TestMCPServerToolsOverTheWire(t *testing.T) {
	bin := fsServerBin(t)
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

// TestAgentMCPServers: agent.create's mcp_servers win over the profile's of
// the same name, AgentInfo shows their names but never their env, the
// agent's tools may name their tools, a subagent inherits them and its
// write through one goes through the permission gate, an agent left with
// the profile's broken server gets a tool error naming it, and invalid
// servers are refused.
func TestAgentMCPServers(t *testing.T) {
	bin := fsServerBin(t)
	served := shortTemp(t)
	if err := os.WriteFile(filepath.Join(served, "note.txt"), []byte("agent-level"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		p := cfg.Runtimes[config.DefaultRuntime]
		p.MCPServers = map[string]config.MCPServer{"fs": {Command: filepath.Join(served, "no-such-server")}}
		cfg.Runtimes[config.DefaultRuntime] = p
	})
	c := h.dial()
	const secret = "s3cret-token-value"
	id := h.create(c, func(m *protocol.AgentCreate) {
		m.Tools = []string{"read", "subagent", "fs__read_text_file", "fs__write_file"}
		m.MCPServers = map[string]protocol.MCPServer{"fs": {Command: bin, Args: []string{served}, Env: map[string]string{"FS_TOKEN": secret}}}
	})
	info := agentInfo(t, c, id)
	if raw := string(protocol.MustMarshal(info)); len(info.MCPServers) != 1 || info.MCPServers[0] != "fs" || strings.Contains(raw, secret) {
		t.Fatalf("AgentInfo = %s", raw)
	}
	attach(t, c, id, "")
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(served, "note.txt")})
	prompt(t, c, id, "sim: tool fs__read_text_file "+string(args))
	if tr := waitFor(t, c, isType(protocol.TypeToolResult, id)).Msg.(*protocol.ToolResult); tr.IsError || !strings.Contains(tr.Content.Text, "agent-level") {
		t.Fatalf("tool_result %+v", tr)
	}

	// The child inherits the server; its write asks, and allow writes.
	target := filepath.Join(served, "child.txt")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: id, Name: "writer",
		Task: "sim: tool fs__write_file " + string(protocol.MustMarshal(map[string]string{"path": target, "content": "from child"}))})
	child := job.Runs[0].AgentID
	if ci := agentInfo(t, c, child); len(ci.MCPServers) != 1 || ci.MCPServers[0] != "fs" {
		t.Fatalf("child AgentInfo = %+v", ci)
	}
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, child)).Msg.(*protocol.PermissionRequest)
	if req.ToolName != "fs__write_file" {
		t.Fatalf("permission_request %+v", req)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("written before permission")
	}
	if _, err := c.Request(ctx(t), permResponse(child, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatal(err)
	}
	if wr := waitRuns(t, c, id, []string{job.JobID}, "", nil); wr.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run = %+v", wr.Runs[0])
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "from child" {
		t.Fatalf("file = %q, %v", b, err)
	}

	// Without its own server the agent has the profile's, which fails.
	other := h.create(c, nil)
	attach(t, c, other, "")
	prompt(t, c, other, "sim: tool fs__read_text_file "+string(args))
	if tr := waitFor(t, c, isType(protocol.TypeToolResult, other)).Msg.(*protocol.ToolResult); !tr.IsError || !strings.Contains(tr.Content.Message, `MCP server "fs" did not start`) {
		t.Fatalf("tool_result %+v", tr)
	}

	for _, m := range []*protocol.AgentCreate{
		{MCPServers: map[string]protocol.MCPServer{"a__b": {Command: bin}}},
		{MCPServers: map[string]protocol.MCPServer{"x": {}}},
		{MCPServers: map[string]protocol.MCPServer{"x": {URL: "ftp://h"}}},
		{Tools: []string{"nope__x"}},
	} {
		m.Header, m.Cwd = hdr(protocol.TypeAgentCreate), served
		if err := c.Call(ctx(t), m, nil); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Errorf("agent.create %+v: %v, want INVALID_REQUEST", m, err)
		}
	}
}

// TestPiProfileRefusesMCPServers: pi has no MCP client, so agent.create's
// mcp_servers on a pi profile are INVALID_REQUEST naming the profile,
// while the same servers on an acp profile are taken (the adapter passes
// them to the agent: TestClaudeMCPServer).
func TestPiProfileRefusesMCPServers(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		cfg.Runtimes["pi"] = config.RuntimeProfile{Kind: config.KindPi, Command: []string{"pi"}}
		cfg.Runtimes["acp"] = config.RuntimeProfile{Kind: config.KindACP, Command: []string{self}, Env: map[string]string{fakeACPEnv: "1"}}
	})
	c := h.dial()
	servers := map[string]protocol.MCPServer{"fs": {Command: "mcp-server-filesystem"}}
	m := &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate), Cwd: shortTemp(t), Runtime: "pi", MCPServers: servers}
	if err := c.Call(ctx(t), m, nil); protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), `"pi"`) {
		t.Fatalf("agent.create on pi with mcp_servers: %v, want INVALID_REQUEST naming the profile", err)
	}
	m.Runtime = "acp"
	if err := c.Call(ctx(t), m, nil); err != nil {
		t.Fatalf("agent.create on acp with mcp_servers: %v", err)
	}
}
