package acp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
)

// EnvMCPServers is the environment variable the daemon hands an agent's
// MCP servers in (docs/protocol.md §10.1): a JSON object of
// protocol.MCPServer by name, the agent's own over its profile's. The
// reference runtime reads the same one.
const EnvMCPServers = "SHARD_MCP_SERVERS"

// DecodeMCPServers decodes v, the value of EnvMCPServers ("" is none).
// The error never quotes v: env and headers may hold secrets.
func DecodeMCPServers(v string) (map[string]protocol.MCPServer, error) {
	if v == "" {
		return nil, nil
	}
	var byName map[string]protocol.MCPServer
	if err := json.Unmarshal([]byte(v), &byName); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object of servers", EnvMCPServers)
	}
	return byName, nil
}

// WithoutEnv is environ without the entries named name: the agent gets its
// MCP servers in session/new, not the daemon's variable that carries them.
func WithoutEnv(environ []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// mcpServers is servers as ACP's mcpServers of session/new, load and
// resume, sorted by name (docs/protocol.md Appendix A): a stdio server
// always ({name, command, args, env as [{name, value}]}, every agent
// must take it), an HTTP one only when the agent advertised
// mcpCapabilities.http (else it is left out, and log says which, never
// its headers). A server that is neither (the daemon validated them) is
// left out too. The lists are never null: ACP's schema wants arrays.
func mcpServers(servers map[string]protocol.MCPServer, http bool, log *slog.Logger) []sdk.McpServer {
	out := []sdk.McpServer{}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		switch {
		case s.Command != "":
			env := []sdk.EnvVariable{}
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				env = append(env, sdk.EnvVariable{Name: k, Value: s.Env[k]})
			}
			out = append(out, sdk.McpServer{Stdio: &sdk.McpServerStdio{Name: name, Command: s.Command,
				Args: append([]string{}, s.Args...), Env: env}})
		case s.URL != "" && http:
			headers := []sdk.HttpHeader{}
			for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
				headers = append(headers, sdk.HttpHeader{Name: k, Value: s.Headers[k]})
			}
			out = append(out, sdk.McpServer{Http: &sdk.McpServerHttpInline{Type: "http", Name: name, Url: s.URL, Headers: headers}})
		case s.URL != "":
			log.Warn("MCP server left out: the agent does not take HTTP MCP servers (mcpCapabilities.http)", "server", name)
		default:
			log.Warn("MCP server left out: neither command nor url", "server", name)
		}
	}
	return out
}
