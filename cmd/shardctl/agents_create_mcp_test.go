package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestAgentsCreateMCPFlags sends the servers the flags declare as
// agent.create mcp_servers: stdio with quoted args and env (one value from
// shardctl's own environment), HTTP with headers, and a file's servers.
func TestAgentsCreateMCPFlags(t *testing.T) {
	d := agentsDaemon(t)
	file := filepath.Join(t.TempDir(), ".mcp.json")
	if err := os.WriteFile(file, []byte(`{"mcpServers": {"git": {"type": "stdio", "command": "mcp-git", "args": ["--repo", "."]},
		"web": {"type": "http", "url": "https://example.test/mcp", "headers": {"X-Team": "a"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARD_TEST_MCP_TOKEN", "from-env")
	r := runCtl(t, nil, d.path, "", "agents", "create", "--cwd", "/x",
		"--mcp", `fs=npx -y @modelcontextprotocol/server-filesystem "/my dir" 'a b' c\ d`,
		"--mcp", "docs=https://mcp.example.test/mcp",
		"--mcp-env", "fs:LEVEL=debug=2", "--mcp-env", "fs:SHARD_TEST_MCP_TOKEN",
		"--mcp-header", "docs:Authorization=Bearer xyz",
		"--mcp-env", "git:GIT_DIR=.git",
		"--mcp-file", file)
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	recs := d.records(protocol.TypeAgentCreate)
	if len(recs) != 1 {
		t.Fatalf("agent.create records = %d", len(recs))
	}
	var m protocol.AgentCreate
	if err := json.Unmarshal(recs[0], &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]protocol.MCPServer{
		"fs": {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/my dir", "a b", "c d"},
			Env: map[string]string{"LEVEL": "debug=2", "SHARD_TEST_MCP_TOKEN": "from-env"}},
		"docs": {URL: "https://mcp.example.test/mcp", Headers: map[string]string{"Authorization": "Bearer xyz"}},
		"git":  {Command: "mcp-git", Args: []string{"--repo", "."}, Env: map[string]string{"GIT_DIR": ".git"}},
		"web":  {URL: "https://example.test/mcp", Headers: map[string]string{"X-Team": "a"}},
	}
	if !reflect.DeepEqual(m.MCPServers, want) {
		t.Fatalf("mcp_servers = %+v", m.MCPServers)
	}
	// No MCP flag: no mcp_servers on the wire.
	if r := runCtl(t, nil, d.path, "", "agents", "create", "--cwd", "/x"); r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if rec := d.records(protocol.TypeAgentCreate)[1]; strings.Contains(string(rec), "mcp_servers") {
		t.Fatalf("sent %s", rec)
	}
}

// TestAgentsCreateMCPFileShapes reads YAML as the config's mcp_servers:
// has it, bare or under the key, and a server that happens to be named
// mcp_servers.
func TestAgentsCreateMCPFileShapes(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want map[string]protocol.MCPServer
	}{
		{"mcp_servers:\n  fs:\n    command: srv\n    args: [a]\n", map[string]protocol.MCPServer{"fs": {Command: "srv", Args: []string{"a"}}}},
		{"fs: {command: srv}\nweb: {url: 'http://127.0.0.1:1/mcp'}\n", map[string]protocol.MCPServer{"fs": {Command: "srv"}, "web": {URL: "http://127.0.0.1:1/mcp"}}},
		{"mcp_servers: {command: srv}\n", map[string]protocol.MCPServer{"mcp_servers": {Command: "srv"}}},
	} {
		got, err := decodeMCPFile([]byte(tc.doc))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, %v", tc.doc, got, err)
		}
	}
}

// TestAgentsCreateMCPErrors refuses what cannot be a server before it
// reaches the daemon, with an error naming the flag and the problem.
func TestAgentsCreateMCPErrors(t *testing.T) {
	d := agentsDaemon(t)
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mcp", "fs"}, "want NAME=COMMAND"},
		{[]string{"--mcp", "fs=srv", "/src"}, `unexpected argument "/src": quote the whole --mcp value`},
		{[]string{"--mcp", "fs=npx", "-y", "server"}, `unknown shorthand flag: 'y' in -y (if it belongs to an --mcp server's command, quote the whole --mcp value)`},
		{[]string{"--mcp", "fs="}, "no command after fs="},
		{[]string{"--mcp", `fs=srv "open`}, `an unclosed "`},
		{[]string{"--mcp", "bad__name=srv"}, `the name "bad__name" must be`},
		{[]string{"--mcp", "fs=srv", "--mcp", "fs=other"}, `"fs" is declared twice`},
		{[]string{"--mcp", "web=https://x.test/mcp extra"}, "a URL takes no arguments"},
		{[]string{"--mcp-env", "fs:K=V"}, `no MCP server named "fs"`},
		{[]string{"--mcp", "fs=srv", "--mcp-env", "fs"}, "want NAME:KEY=VALUE"},
		{[]string{"--mcp", "fs=srv", "--mcp-env", "fs:SHARD_TEST_SURELY_UNSET"}, "$SHARD_TEST_SURELY_UNSET is not set"},
		{[]string{"--mcp", "fs=srv", "--mcp-header", "fs:K=V"}, "fs is a stdio server"},
		{[]string{"--mcp", "web=https://x.test/mcp", "--mcp-env", "web:K=V"}, "web is an HTTP server"},
		{[]string{"--mcp", "web=https://x.test/mcp", "--mcp-header", "web:K"}, "want NAME:KEY=VALUE"},
		{[]string{"--mcp-file", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--mcp-file", write("typo.yaml", "fs: {comand: srv}\n")}, "comand"},
		{[]string{"--mcp-file", write("sse.json", `{"s": {"type": "sse", "url": "https://x.test/sse"}}`)}, "SSE transport is not supported"},
		{[]string{"--mcp-file", write("both.json", `{"s": {"command": "a", "url": "https://x.test"}}`)}, "set either command"},
		{[]string{"--mcp-file", write("empty.json", `{}`)}, "no MCP servers"},
		{[]string{"--mcp-file", write("kind.json", `{"s": {"type": "http", "command": "a"}}`)}, "s: type http wants a url"},
		{[]string{"--mcp-file", write("list.json", `[1, 2]`)}, "not a JSON or YAML map"},
		{[]string{"--mcp", "s=a", "--mcp-file", write("dup.json", `{"s": {"command": "b"}}`)}, `"s" is declared twice`},
	} {
		r := runCtl(t, nil, d.path, "", append([]string{"agents", "create", "--cwd", "/x"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := len(d.records(protocol.TypeAgentCreate)); n != 0 {
		t.Fatalf("an invalid create reached the daemon: %d records", n)
	}
}

// TestAgentsCreateMCPCompletion completes --mcp-env and --mcp-header with
// the servers declared so far, and --mcp-file with JSON and YAML files.
func TestAgentsCreateMCPCompletion(t *testing.T) {
	r := runCtl(t, nil, "", "", "__complete", "agents", "create", "--mcp", "fs=srv", "--mcp", "web=https://x.test", "--mcp-env", "")
	if r.code != 0 || !strings.Contains(r.stdout, "fs:\n") || !strings.Contains(r.stdout, "web:\n") {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
	r = runCtl(t, nil, "", "", "__complete", "agents", "create", "--mcp-file", "")
	if r.code != 0 || !strings.Contains(r.stdout, "json\n") || !strings.Contains(r.stdout, "yaml\n") {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
}

func FuzzDecodeMCPFile(f *testing.F) {
	f.Add([]byte(`{"mcpServers": {"fs": {"command": "x", "args": ["a"]}}}`))
	f.Add([]byte("mcp_servers:\n  w: {url: 'https://x', headers: {A: b}}\n"))
	f.Add([]byte("a: {type: sse, url: x}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		servers, err := decodeMCPFile(b)
		if err != nil {
			return
		}
		for name, s := range servers {
			if err := protocol.ValidateMCPServer(name, s); err != nil {
				t.Fatalf("decoded an invalid server %q: %v", name, err)
			}
		}
	})
}

func FuzzSplitWords(f *testing.F) {
	f.Add(`npx -y "a b" 'c d' e\ f`)
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		for _, w := range words {
			if strings.ContainsAny(w, " \t\n") && !strings.ContainsAny(s, `"'\`) {
				t.Fatalf("%q: word %q holds a blank with no quoting", s, w)
			}
		}
	})
}
