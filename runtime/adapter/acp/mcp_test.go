package acp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestMCPServersTranslation: stdio servers become ACP's stdio shape (env
// as name/value pairs, lists never null), HTTP ones {type:"http", name,
// url, headers} only for an agent that takes them; left out, the log
// names the server but never its headers or env.
func TestMCPServersTranslation(t *testing.T) {
	const secret = "s3cret-header-value"
	servers := map[string]protocol.MCPServer{
		"fs":   {Command: "/bin/fs", Args: []string{"/w"}, Env: map[string]string{"B": "2", "A": "1"}},
		"bare": {Command: "srv"},
		"web":  {URL: "https://h/mcp", Headers: map[string]string{"Authorization": secret}},
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	got, err := json.Marshal(mcpServers(servers, true, log))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"args":[],"command":"srv","env":[],"name":"bare"},` +
		`{"args":["/w"],"command":"/bin/fs","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"name":"fs"},` +
		`{"headers":[{"name":"Authorization","value":"` + secret + `"}],"name":"web","type":"http","url":"https://h/mcp"}]`
	if string(got) != want {
		t.Fatalf("with http:\n got %s\nwant %s", got, want)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %q", logs.String())
	}

	got, _ = json.Marshal(mcpServers(servers, false, log))
	if strings.Contains(string(got), "web") {
		t.Fatalf("without http: %s", got)
	}
	if l := logs.String(); !strings.Contains(l, "server=web") || strings.Contains(l, secret) || strings.Contains(l, "https://h") {
		t.Fatalf("log %q: want the server named, not its headers or url", l)
	}

	if got, _ := json.Marshal(mcpServers(nil, true, log)); string(got) != "[]" {
		t.Fatalf("no servers: %s, want []", got)
	}
}

func TestDecodeMCPServers(t *testing.T) {
	got, err := DecodeMCPServers(`{"fs":{"command":"srv","args":["/w"],"env":{"K":"v"}},"web":{"url":"http://h/mcp"}}`)
	if err != nil || len(got) != 2 || got["fs"].Command != "srv" || got["fs"].Env["K"] != "v" || got["web"].URL != "http://h/mcp" {
		t.Fatalf("DecodeMCPServers = %+v, %v", got, err)
	}
	if got, err := DecodeMCPServers(""); got != nil || err != nil {
		t.Fatalf(`DecodeMCPServers("") = %+v, %v`, got, err)
	}
	if _, err := DecodeMCPServers(`{"fs":{"env":{"K":"s3cret"}}`); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a broken value: err %v (it must fail without quoting the value)", err)
	}
	env := WithoutEnv([]string{"A=1", EnvMCPServers + "={}", "SHARD_MCP_SERVERS_X=2"}, EnvMCPServers)
	if strings.Join(env, " ") != "A=1 SHARD_MCP_SERVERS_X=2" {
		t.Fatalf("WithoutEnv = %v", env)
	}
}

// FuzzDecodeMCPServers: any SHARD_MCP_SERVERS value decodes or fails,
// never panics, and what decodes translates to servers that marshal.
func FuzzDecodeMCPServers(f *testing.F) {
	f.Add(`{"fs":{"command":"srv","args":["/w"],"env":{"K":"v"}},"web":{"url":"http://h","headers":{"A":"b"}}}`)
	f.Add(`{}`)
	f.Add(`null`)
	f.Add(`{"x":{}}`)
	f.Fuzz(func(t *testing.T, v string) {
		servers, err := DecodeMCPServers(v)
		if err != nil {
			return
		}
		out := mcpServers(servers, true, slog.New(slog.DiscardHandler))
		if len(out) > len(servers) {
			t.Fatalf("%d servers from %d", len(out), len(servers))
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
	})
}
