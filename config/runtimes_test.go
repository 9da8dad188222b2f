package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestRuntimesFromFile reads runtime profiles next to ordinary
// settings, keeps names and env keys as written, and always has the
// default shard profile.
func TestRuntimesFromFile(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, `
log:
  level: debug
runtimes:
  codex:
    kind: acp
    command: [codex-acp, --flag]
    env: {CODEX_HOME: /tmp/codex, OPENAI_API_KEY: x}
    models: [gpt-5]
`)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]RuntimeProfile{
		"shard": {Kind: KindShard},
		"codex": {Kind: KindACP, Command: []string{"codex-acp", "--flag"},
			Env: map[string]string{"CODEX_HOME": "/tmp/codex", "OPENAI_API_KEY": "x"}, Models: []string{"gpt-5"}},
	}
	if !reflect.DeepEqual(c.Runtimes, want) {
		t.Fatalf("runtimes = %+v, want %+v", c.Runtimes, want)
	}
	if got := c.Runtimes["codex"].EnvList(); !reflect.DeepEqual(got, []string{"CODEX_HOME=/tmp/codex", "OPENAI_API_KEY=x"}) {
		t.Fatalf("EnvList = %q", got)
	}
	if c.Log.Level != "debug" {
		t.Fatalf("log.level = %q", c.Log.Level)
	}
}

// TestRuntimesInvalid refuses profiles that could not start.
func TestRuntimesInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"runtimes:\n  x:\n    kind: acp\n":                                 "needs a command",
		"runtimes:\n  x:\n    kind: weird\n    command: [a]\n":             "want shard, acp or pi",
		"runtimes:\n  shard:\n    kind: acp\n    command: [a]\n":           "must be of kind shard",
		"runtimes:\n  Bad Name:\n    kind: acp\n    command: [a]\n":        "the name must match",
		"runtimes:\n  x:\n    kind: acp\n    command: [a]\n    bogus: 1\n": "bogus",
	} {
		f := newFixture(t)
		f.writeFile(t, body)
		_, err := f.load(t, nil, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", body, err, want)
		}
	}
}

// TestMCPServersFromFile merges the daemon's MCP servers into each
// reference-runtime and ACP profile, a profile's own server winning by
// name; a pi profile gets none.
func TestMCPServersFromFile(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, `
mcp_servers:
  fs: {command: mcp-server-filesystem, args: [/tmp]}
  web: {url: "http://127.0.0.1:9/mcp", headers: {Authorization: secret}}
runtimes:
  lean:
    kind: shard
    mcp_servers:
      fs: {command: other-fs, env: {TOKEN: t}}
  codex:
    kind: acp
    command: [codex-acp]
    mcp_servers:
      web: {url: "http://127.0.0.1:8/mcp"}
  pi:
    kind: pi
    command: [pi]
`)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	web := MCPServer{URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "secret"}}
	if got, want := c.Runtimes["shard"].MCPServers, map[string]MCPServer{"fs": {Command: "mcp-server-filesystem", Args: []string{"/tmp"}}, "web": web}; !reflect.DeepEqual(got, want) {
		t.Fatalf("shard mcp_servers = %+v, want %+v", got, want)
	}
	if got, want := c.Runtimes["lean"].MCPServers, map[string]MCPServer{"fs": {Command: "other-fs", Env: map[string]string{"TOKEN": "t"}}, "web": web}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lean mcp_servers = %+v, want %+v", got, want)
	}
	if got, want := c.Runtimes["codex"].MCPServers, map[string]MCPServer{"fs": {Command: "mcp-server-filesystem", Args: []string{"/tmp"}}, "web": {URL: "http://127.0.0.1:8/mcp"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acp mcp_servers = %+v, want %+v", got, want)
	}
	if c.Runtimes["pi"].MCPServers != nil {
		t.Fatalf("a pi profile got MCP servers: %+v", c.Runtimes["pi"].MCPServers)
	}
}

// TestMCPServersInvalid refuses servers the runtime could not reach.
func TestMCPServersInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"mcp_servers:\n  a__b: {command: x}\n":                                                  `the name "a__b" must be`,
		"mcp_servers:\n  a: {}\n":                                                               "either command",
		"mcp_servers:\n  a: {command: x, url: 'http://h'}\n":                                    "either command",
		"mcp_servers:\n  a: {url: 'ftp://h'}\n":                                                 "want an http",
		"runtimes:\n  x:\n    kind: pi\n    command: [a]\n    mcp_servers: {a: {command: x}}\n": "kind pi has no MCP client",
	} {
		f := newFixture(t)
		f.writeFile(t, body)
		_, err := f.load(t, nil, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", body, err, want)
		}
	}
}
