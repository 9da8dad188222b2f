package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/shard-dev/shard/protocol"
)

// mcpFlags are agents create's MCP server flags: the servers an agent's
// reference runtime connects to, sent as agent.create mcp_servers
// (docs/protocol.md §10.1).
type mcpFlags struct {
	servers []string // --mcp NAME=COMMAND [ARG...] or NAME=URL
	env     []string // --mcp-env NAME:KEY=VALUE or NAME:KEY
	headers []string // --mcp-header NAME:KEY=VALUE
	files   []string // --mcp-file FILE
}

// maxMCPFileSize bounds an --mcp-file: a list of servers is small, and a
// path given by mistake (a binary, a log) should fail fast.
const maxMCPFileSize = 1 << 20

// AddFlags registers the MCP flags on cmd with their completions.
func (f *mcpFlags) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.servers, "mcp", nil, "an MCP server, repeatable: NAME=COMMAND [ARG...] for stdio (quote the value; args split at spaces, \"...\" and '...' group), NAME=https://URL for streamable HTTP")
	fs.StringArrayVar(&f.env, "mcp-env", nil, "an environment variable for a stdio MCP server, repeatable: NAME:KEY=VALUE, or NAME:KEY to pass shardctl's own $KEY")
	fs.StringArrayVar(&f.headers, "mcp-header", nil, "an HTTP header for a streamable HTTP MCP server, repeatable: NAME:KEY=VALUE")
	fs.StringArrayVar(&f.files, "mcp-file", nil, "MCP servers from a JSON or YAML file, repeatable: a map of NAME to {command, args, env} or {url, headers}, as under the config's mcp_servers: (an mcpServers: or mcp_servers: key around it is accepted)")
	_ = cmd.RegisterFlagCompletionFunc("mcp-file", cobra.FixedCompletions([]string{"json", "yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt))
	_ = cmd.RegisterFlagCompletionFunc("mcp", cobra.NoFileCompletions)
	names := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.names(), cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	_ = cmd.RegisterFlagCompletionFunc("mcp-env", names)
	_ = cmd.RegisterFlagCompletionFunc("mcp-header", names)
}

// names are "NAME:" for each server named so far by --mcp, for completing
// --mcp-env and --mcp-header.
func (f *mcpFlags) names() []string {
	var out []string
	for _, v := range f.servers {
		if name, _, ok := strings.Cut(v, "="); ok && name != "" {
			out = append(out, name+":")
		}
	}
	return out
}

// build turns the flags into agent.create's mcp_servers: nil when none
// were given. Every problem is a usage error naming the flag.
func (f *mcpFlags) build() (map[string]protocol.MCPServer, error) {
	servers := map[string]protocol.MCPServer{}
	for _, path := range f.files {
		b, err := readMCPFile(path)
		if err != nil {
			return nil, usageErrorf("--mcp-file %s: %w", path, err)
		}
		got, err := decodeMCPFile(b)
		if err != nil {
			return nil, usageErrorf("--mcp-file %s: %w", path, err)
		}
		for _, name := range slices.Sorted(maps.Keys(got)) {
			if _, dup := servers[name]; dup {
				return nil, usageErrorf("--mcp-file %s: the MCP server %q is declared twice", path, name)
			}
			servers[name] = got[name]
		}
	}
	for _, v := range f.servers {
		name, s, err := parseMCPServer(v)
		if err != nil {
			return nil, usageErrorf("--mcp %q: %w", v, err)
		}
		if _, dup := servers[name]; dup {
			return nil, usageErrorf("--mcp %q: the MCP server %q is declared twice", v, name)
		}
		servers[name] = s
	}
	for _, v := range f.env {
		name, key, val, err := parseMCPPair(v, servers, true)
		if err != nil {
			return nil, usageErrorf("--mcp-env %q: %w", v, err)
		}
		s := servers[name]
		if s.Command == "" {
			return nil, usageErrorf("--mcp-env %q: %s is an HTTP server; env is for stdio servers (use --mcp-header)", v, name)
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[key] = val
		servers[name] = s
	}
	for _, v := range f.headers {
		name, key, val, err := parseMCPPair(v, servers, false)
		if err != nil {
			return nil, usageErrorf("--mcp-header %q: %w", v, err)
		}
		s := servers[name]
		if s.URL == "" {
			return nil, usageErrorf("--mcp-header %q: %s is a stdio server; headers are for HTTP servers (use --mcp-env)", v, name)
		}
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		s.Headers[key] = val
		servers[name] = s
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if err := protocol.ValidateMCPServer(name, servers[name]); err != nil {
			return nil, usageErrorf("MCP server: %w", err)
		}
	}
	if len(servers) == 0 {
		return nil, nil
	}
	return servers, nil
}

// parseMCPServer reads one --mcp: NAME=URL when the rest is an http(s)
// URL, else NAME=COMMAND [ARG...] split like a shell would split words
// (no expansion).
func parseMCPServer(v string) (string, protocol.MCPServer, error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return "", protocol.MCPServer{}, fmt.Errorf("want NAME=COMMAND [ARG...] or NAME=https://URL")
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		if strings.ContainsAny(rest, " \t") {
			return "", protocol.MCPServer{}, fmt.Errorf("a URL takes no arguments")
		}
		return name, protocol.MCPServer{URL: rest}, nil
	}
	words, err := splitWords(rest)
	if err != nil {
		return "", protocol.MCPServer{}, err
	}
	if len(words) == 0 {
		return "", protocol.MCPServer{}, fmt.Errorf("no command after %s=", name)
	}
	return name, protocol.MCPServer{Command: words[0], Args: words[1:]}, nil
}

// parseMCPPair reads NAME:KEY=VALUE for a server already declared. With
// fromEnv, NAME:KEY alone takes shardctl's own $KEY, so a secret need not
// be on the command line.
func parseMCPPair(v string, servers map[string]protocol.MCPServer, fromEnv bool) (name, key, val string, err error) {
	name, kv, ok := strings.Cut(v, ":")
	if !ok || name == "" || kv == "" {
		return "", "", "", fmt.Errorf("want NAME:KEY=VALUE")
	}
	if _, known := servers[name]; !known {
		return "", "", "", fmt.Errorf("no MCP server named %q (declare it with --mcp or --mcp-file)", name)
	}
	key, val, ok = strings.Cut(kv, "=")
	if key == "" {
		return "", "", "", fmt.Errorf("want NAME:KEY=VALUE")
	}
	if !ok {
		if !fromEnv {
			return "", "", "", fmt.Errorf("want NAME:KEY=VALUE")
		}
		val, ok = os.LookupEnv(key)
		if !ok {
			return "", "", "", fmt.Errorf("$%s is not set", key)
		}
	}
	return name, key, val, nil
}

// splitWords splits s at unquoted blanks; "..." and '...' group, and a
// backslash outside single quotes takes the next character as it is.
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote rune
		esc   bool
	)
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, in = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	switch {
	case esc:
		return nil, fmt.Errorf("a trailing backslash")
	case quote != 0:
		return nil, fmt.Errorf("an unclosed %c", quote)
	case in:
		words = append(words, cur.String())
	}
	return words, nil
}

func readMCPFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(fh, maxMCPFileSize+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxMCPFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxMCPFileSize)
	}
	return buf.Bytes(), nil
}

// mcpFileServer is one server of an --mcp-file. Type is accepted so a
// file written for other MCP clients (an .mcp.json) reads as it is.
type mcpFileServer struct {
	Type    string            `yaml:"type"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

// decodeMCPFile reads an --mcp-file (JSON is YAML): a map of server name to
// server, bare or under a single mcp_servers: or mcpServers: key. Unknown
// fields are refused, so a misspelt one is not silently dropped.
func decodeMCPFile(b []byte) (map[string]protocol.MCPServer, error) {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a JSON or YAML map: %w", err)
	}
	if len(top) == 0 {
		return nil, fmt.Errorf("no MCP servers in it")
	}
	if len(top) == 1 {
		for k, n := range top {
			if (k == "mcp_servers" || k == "mcpServers") && !looksLikeServer(&n) {
				top = nil
				if err := n.Decode(&top); err != nil {
					return nil, fmt.Errorf("%s: not a map of servers: %w", k, err)
				}
			}
		}
	}
	out := make(map[string]protocol.MCPServer, len(top))
	for _, name := range slices.Sorted(maps.Keys(top)) {
		n := top[name]
		var raw bytes.Buffer
		enc := yaml.NewEncoder(&raw)
		if err := enc.Encode(&n); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		dec := yaml.NewDecoder(&raw)
		dec.KnownFields(true)
		var s mcpFileServer
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch s.Type {
		case "":
		case "stdio":
			if s.Command == "" {
				return nil, fmt.Errorf("%s: type stdio wants a command", name)
			}
		case "http", "streamable-http", "streamable_http", "streamableHttp":
			if s.URL == "" {
				return nil, fmt.Errorf("%s: type %s wants a url", name, s.Type)
			}
		case "sse":
			return nil, fmt.Errorf("%s: the SSE transport is not supported; use the server's streamable HTTP endpoint", name)
		default:
			return nil, fmt.Errorf("%s.type: %q: want stdio or http", name, s.Type)
		}
		srv := protocol.MCPServer{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
		if err := protocol.ValidateMCPServer(name, srv); err != nil {
			return nil, err
		}
		out[name] = srv
	}
	return out, nil
}

// looksLikeServer tells a server named mcp_servers from a key around the
// servers: a server's map has a command or url.
func looksLikeServer(n *yaml.Node) bool {
	var probe map[string]yaml.Node
	if n.Decode(&probe) != nil {
		return false
	}
	_, cmd := probe["command"]
	_, url := probe["url"]
	return cmd || url
}
