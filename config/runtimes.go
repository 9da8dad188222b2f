package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/shard-dev/shard/protocol"
)

// Runtime profile kinds: the reference runtime, an agent
// speaking the Agent Client Protocol, and pi's RPC mode.
const (
	KindShard = "shard"
	KindACP   = "acp"
	KindPi    = "pi"
)

// DefaultRuntime is the profile an agent created without a runtime runs
// on: the reference runtime.
const DefaultRuntime = "shard"

// RuntimeProfile is one entry of the config file's `runtimes:` mapping: a
// kind of runtime and how to start it. The daemon gives every agent on the
// profile Command (through the adapter for acp and pi) with Env added to
// its environment.
type RuntimeProfile struct {
	// Kind is shard, acp or pi.
	Kind string `yaml:"kind"`
	// Command is the program and its arguments, no shell. For shard it
	// replaces runtime.command (empty: this executable's reference
	// runtime); for acp and pi it is the third-party agent, which the
	// adapter starts. Required for acp and pi.
	Command []string `yaml:"command"`
	// Env is added to the environment of the runtime (and so of the agent
	// it starts). Values are never logged.
	Env map[string]string `yaml:"env"`
	// Models, when set, is the only models list_models offers and
	// set_model accepts (a filter of the agent's own catalog).
	Models []string `yaml:"models"`
	// MCPServers are the MCP servers, by name, whose tools the profile's
	// reference runtime offers, or which the adapter passes to an ACP
	// agent in session/new, load and resume (docs/protocol.md §10.1,
	// Appendix A); the daemon's own (the file's top-level `mcp_servers:`)
	// are merged in, a profile's server replacing the daemon's of the same
	// name. Kinds shard and acp: pi has no MCP client.
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
}

// ConnectsMCP reports whether a runtime of kind takes MCP servers: the
// reference runtime connects to them, and the adapter passes them to an
// ACP agent (stdio is required of every ACP agent); pi's RPC mode has no
// MCP client.
func ConnectsMCP(kind string) bool { return kind == KindShard || kind == KindACP }

// MCPServer is one MCP server (docs/protocol.md §10.1): a stdio server the
// runtime starts (command, args, env) or a streamable HTTP one it dials
// (url, headers), the shape of agent.create's mcp_servers.
type MCPServer = protocol.MCPServer

// runtimeNamePattern keeps a profile name printable and short.
var runtimeNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// EnvList returns Env as sorted KEY=VALUE entries.
func (p RuntimeProfile) EnvList() []string {
	keys := slices.Sorted(maps.Keys(p.Env))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+p.Env[k])
	}
	return out
}

// validate reports what is wrong with the profile named name, or nil.
func (p RuntimeProfile) validate(name string) error {
	if !runtimeNamePattern.MatchString(name) {
		return fmt.Errorf("runtimes.%s: the name must match %s", name, runtimeNamePattern)
	}
	switch p.Kind {
	case KindShard:
	case KindACP, KindPi:
		if len(p.Command) == 0 || p.Command[0] == "" {
			return fmt.Errorf("runtimes.%s: kind %s needs a command", name, p.Kind)
		}
	default:
		return fmt.Errorf("runtimes.%s: kind %q: want shard, acp or pi", name, p.Kind)
	}
	if name == DefaultRuntime && p.Kind != KindShard {
		return fmt.Errorf("runtimes.%s: the default profile must be of kind shard", name)
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("runtimes.%s.env: %q is not a variable name", name, k)
		}
	}
	if len(p.MCPServers) > 0 && !ConnectsMCP(p.Kind) {
		return fmt.Errorf("runtimes.%s.mcp_servers: kind %s has no MCP client (only kinds shard and acp take MCP servers)", name, p.Kind)
	}
	for sn, s := range p.MCPServers {
		if err := protocol.ValidateMCPServer(sn, s); err != nil {
			return fmt.Errorf("runtimes.%s.mcp_servers: %w", name, err)
		}
	}
	return nil
}

// runtimesLayer reads the `runtimes:` mapping of the YAML file at path (a
// file only setting: its names are free-form, which the flat key table of
// the other settings cannot hold). A missing file has none. The default
// profile is always present.
func runtimesLayer(path string) (map[string]RuntimeProfile, error) {
	out := map[string]RuntimeProfile{}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	if len(data) > 0 {
		var doc struct {
			Runtimes   map[string]RuntimeProfile `yaml:"runtimes"`
			MCPServers map[string]MCPServer      `yaml:"mcp_servers"`
			Rest       map[string]any            `yaml:",inline"` // the other settings: fileLayer's
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true) // a misspelt profile field is an error
		if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w %s: runtimes: %w", ErrFile, path, err)
		}
		for name, s := range doc.MCPServers {
			if err := protocol.ValidateMCPServer(name, s); err != nil {
				return nil, fmt.Errorf("%w %s: mcp_servers: %w", ErrFile, path, err)
			}
		}
		for name, p := range doc.Runtimes {
			if err := p.validate(name); err != nil {
				return nil, fmt.Errorf("%w %s: %w", ErrFile, path, err)
			}
			out[name] = p
		}
		if _, ok := out[DefaultRuntime]; !ok {
			out[DefaultRuntime] = RuntimeProfile{Kind: KindShard}
		}
		// The daemon's servers under the own of each profile that takes
		// MCP servers (a profile's wins by name, docs/protocol.md §13).
		for name, p := range out {
			if !ConnectsMCP(p.Kind) || len(doc.MCPServers) == 0 {
				continue
			}
			merged := maps.Clone(doc.MCPServers)
			maps.Copy(merged, p.MCPServers)
			p.MCPServers = merged
			out[name] = p
		}
	}
	if _, ok := out[DefaultRuntime]; !ok {
		out[DefaultRuntime] = RuntimeProfile{Kind: KindShard}
	}
	return out, nil
}

// isRuntimesKey reports whether a flattened file key belongs to the
// `runtimes:` mapping, which runtimesLayer reads.
func isRuntimesKey(key string) bool {
	return key == "runtimes" || strings.HasPrefix(key, "runtimes.") || key == "mcp_servers" || strings.HasPrefix(key, "mcp_servers.")
}
