package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

// MCPServer is one MCP server of agent.create's mcp_servers (additive,
// docs/protocol.md §10.1): a stdio server the reference runtime starts
// (command, args, env) or a streamable HTTP one it dials (url, headers).
// Env and headers may hold secrets: AgentInfo shows only the servers'
// names, and nothing logs them.
type MCPServer struct {
	Command string            `json:"command,omitempty" yaml:"command"`
	Args    []string          `json:"args,omitempty" yaml:"args"`
	Env     map[string]string `json:"env,omitempty" yaml:"env"`
	URL     string            `json:"url,omitempty" yaml:"url"`
	Headers map[string]string `json:"headers,omitempty" yaml:"headers"`
}

// MCPToolSep joins an MCP server's name and its tool's name into the tool
// name the model sees and an agent's tools may hold: <server>__<tool>
// (docs/protocol.md §10.1).
const MCPToolSep = "__"

// maxMCPServers bounds mcp_servers; maxMCPNameLen a server's name.
const (
	maxMCPServers = 32
	maxMCPNameLen = 32
)

// mcpNamePattern keeps a server name usable as a tool-name prefix: no
// "__", which separates it from the tool's name.
var mcpNamePattern = regexp.MustCompile(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)

// ValidateMCPServer reports what is wrong with the server named name: the
// config file's servers and agent.create's are held to the same rules.
func ValidateMCPServer(name string, s MCPServer) error {
	switch {
	case len(name) > maxMCPNameLen || !mcpNamePattern.MatchString(name):
		return fmt.Errorf("the name %q must be letters, digits, - and single _, at most %d", name, maxMCPNameLen)
	case (s.Command == "") == (s.URL == ""):
		return fmt.Errorf("%s: set either command (stdio) or url (streamable HTTP)", name)
	case s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://"):
		return fmt.Errorf("%s.url: want an http or https URL", name)
	case len(s.Command) > MaxPathLen || len(s.URL) > MaxPathLen || len(s.Args) > MaxListLen || len(s.Env) > MaxListLen || len(s.Headers) > MaxListLen:
		return fmt.Errorf("%s: too long", name)
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%s.env: %q is not a variable name", name, k)
		}
	}
	return nil
}

// validateMCPServers checks agent.create's mcp_servers.
func validateMCPServers(servers map[string]MCPServer) error {
	if len(servers) > maxMCPServers {
		return invalid("mcp_servers", "at most %d servers", maxMCPServers)
	}
	for name, s := range servers {
		if err := ValidateMCPServer(name, s); err != nil {
			return invalid("mcp_servers", "%v", err)
		}
	}
	return nil
}

// WithoutMCPTools is tools without the names of tools of servers
// (<server>__<tool>): what is left must be tools the runtime itself has.
func WithoutMCPTools(tools []string, servers map[string]MCPServer) []string {
	var out []string
	for _, t := range tools {
		if server, name, ok := strings.Cut(t, MCPToolSep); ok && name != "" {
			if _, known := servers[server]; known {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}
