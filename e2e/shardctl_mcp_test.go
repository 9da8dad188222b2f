package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// TestShardctlMCPServerFromConfig: an MCP server declared in the config
// file (the npm reference filesystem server) reaches the real daemon's
// reference runtime; `shardctl agents show` names it, and a prompt reads a
// file through its tool.
func TestShardctlMCPServerFromConfig(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	cwd := shortTemp(t)
	if err := os.WriteFile(filepath.Join(cwd, "note.txt"), []byte("MCP-E2E-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := newHome(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "mcp_servers:\n  fs:\n    command: " + bin + "\n    args: [" + cwd + "]\n    env: {FS_SECRET: e2e-secret-value}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonAt(t, home)
	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd, "--tools", "read,fs__read_text_file,fs__write_file").stdout)
	if show := d.mustCtl("", "agents", "show", id).stdout; !strings.Contains(show, "fs__read_text_file") {
		t.Errorf("agents show lacks the tools:\n%s", show)
	}
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(cwd, "note.txt")})
	if r := d.mustCtl("", "prompt", id, "sim: tool fs__read_text_file "+string(args)); !strings.Contains(r.stderr, "↳ ok") {
		t.Fatalf("read through the server:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	// The write asks; "y" at the prompt allows it and the server writes.
	target := filepath.Join(cwd, "out.txt")
	args = protocol.MustMarshal(map[string]string{"path": target, "content": "written by the server"})
	r := d.ctl("y\n", "prompt", id, "sim: tool fs__write_file "+string(args))
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by the server" {
		t.Fatalf("file %q, %v\nstdout:\n%s\nstderr:\n%s", b, err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout+r.stderr, "fs__write_file") {
		t.Errorf("the permission prompt did not name the tool:\n%s\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(d.stderr.String(), "e2e-secret-value") {
		t.Fatal("the daemon logged the server's env")
	}
}

// TestShardctlAgentsCreateMCP: `shardctl agents create --mcp` declares the
// npm reference filesystem server on the agent alone (agent.create
// mcp_servers): the real runtime starts it with the --mcp-env variable,
// `agents show` names it, a prompt reads a file through its tool, and an
// --mcp-file in the .mcp.json shape does the same for a second agent.
func TestShardctlAgentsCreateMCP(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	cwd := shortTemp(t)
	if err := os.WriteFile(filepath.Join(cwd, "note.txt"), []byte("MCP-FLAG-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd,
		"--mcp", "files="+bin+" '"+cwd+"'", "--mcp-env", "files:FS_FLAG_SECRET=flag-secret-value").stdout)
	show := d.mustCtl("", "agents", "show", id).stdout
	if !regexp.MustCompile(`(?m)^MCP servers:\s+files$`).MatchString(show) {
		t.Errorf("agents show lacks the server:\n%s", show)
	}
	args := protocol.MustMarshal(map[string]string{"path": filepath.Join(cwd, "note.txt")})
	if r := d.mustCtl("", "prompt", id, "sim: tool files__read_text_file "+string(args)); !strings.Contains(r.stderr, "↳ ok") {
		t.Fatalf("read through the server:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if len(procsWithEnv(t, "FS_FLAG_SECRET=flag-secret-value")) == 0 {
		t.Error("no process runs with the --mcp-env variable")
	}
	if strings.Contains(d.stderr.String(), "flag-secret-value") || strings.Contains(show, "flag-secret-value") {
		t.Fatal("the server's env was shown or logged")
	}

	mcpFile := filepath.Join(cwd, ".mcp.json")
	doc := protocol.MustMarshal(map[string]any{"mcpServers": map[string]any{
		"disk": map[string]any{"type": "stdio", "command": bin, "args": []string{cwd}},
	}})
	if err := os.WriteFile(mcpFile, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	id2 := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", cwd, "--mcp-file", mcpFile).stdout)
	var view struct {
		Agent protocol.AgentInfo `json:"agent"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("", "agents", "show", id2, "-o", "json").stdout), &view); err != nil || !slices.Equal(view.Agent.MCPServers, []string{"disk"}) {
		t.Fatalf("agents show -o json: %+v, %v", view.Agent.MCPServers, err)
	}
	if r := d.mustCtl("", "prompt", id2, "sim: tool disk__read_text_file "+string(args)); !strings.Contains(r.stderr, "↳ ok") {
		t.Fatalf("read through the file's server:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	// A bad flag is a usage error, before the daemon.
	if r := d.ctl("", "agents", "create", "--cwd", cwd, "--mcp-env", "nope:K=V"); r.code != 2 || !strings.Contains(r.stderr, `no MCP server named "nope"`) {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}
