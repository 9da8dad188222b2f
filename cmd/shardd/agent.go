package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/memtrim"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
	"github.com/shard-dev/shard/runtime/refagent"
)

// newAgentCommand is `shardd agent --headless`: the reference runtime,
// speaking the per-agent protocol as JSONL on stdin/stdout. The daemon runs
// it with SHARD_AGENT_ID, SHARD_SESSION_ID, SHARD_SESSION_DIR,
// SHARD_AGENT_MODE, SHARD_AGENT_PROVIDER, SHARD_AGENT_MODEL,
// SHARD_AGENT_HEADLESS_POLICY (empty: headless.policy), SHARD_AGENT_TOOLS
// and SHARD_AGENT_SKILLS (comma-separated; unset: every tool, no skill),
// SHARD_AGENT_SYSTEM_PROMPT (a subagent's delegated prompt) and its
// effective settings in the environment (SHARD_PROVIDER_* and
// SHARD_PROVIDERS among them: the provider set, config.ProviderSet); run by
// hand it is a direct connection (docs/protocol.md §12.1).
func newAgentCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var headless bool
	var adapterKind string
	cmd := &cobra.Command{
		Use:   "agent --headless | agent --adapter acp -- <command…>",
		Short: "Run the reference agent runtime, or an adapter for a third-party agent, on stdin/stdout (JSONL)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if adapterKind != "" {
				return runAdapter(cmd.Context(), adapterKind, args, stdin, stdout, stderr)
			}
			if len(args) > 0 {
				return errors.New("arguments are only taken with --adapter")
			}
			if !headless {
				return errors.New("only --headless is supported: the runtime speaks JSONL on stdin/stdout")
			}
			// Settings come from config.yaml and SHARD_* only; the daemon
			// exports its effective values.
			fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
			config.RegisterFlags(fs)
			home, _ := os.UserHomeDir()
			cfg, err := config.Load(fs, os.Environ(), home)
			if err != nil {
				return err
			}
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			specs, err := providerSpecs(cfg)
			if err != nil {
				return err
			}
			// The daemon names the agent's provider and model; run by hand,
			// the runtime starts on the configured default.
			defProvider, defModel := cfg.DefaultModel()
			agentProvider, agentModel := os.Getenv("SHARD_AGENT_PROVIDER"), os.Getenv("SHARD_AGENT_MODEL")
			if agentProvider == "" && agentModel == "" {
				agentProvider, agentModel = defProvider, defModel
			}
			return refagent.Run(ctx, refagent.Options{
				Stdio: refagent.Stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr},
				Identity: refagent.Identity{
					AgentID:       os.Getenv("SHARD_AGENT_ID"),
					SessionID:     os.Getenv("SHARD_SESSION_ID"),
					SessionDir:    os.Getenv("SHARD_SESSION_DIR"),
					Socket:        os.Getenv("SHARD_SOCKET"),
					Cwd:           cwd,
					Mode:          os.Getenv("SHARD_AGENT_MODE"),
					Model:         agentModel,
					ModelProvider: agentProvider,
					ServerVersion: version,
					Tools:         listEnv("SHARD_AGENT_TOOLS"),
					Skills:        listEnv("SHARD_AGENT_SKILLS"),
					SystemPrompt:  os.Getenv("SHARD_AGENT_SYSTEM_PROMPT"),
					Home:          cfg.Home,
					MCPServers:    mcpServers(),
				},
				ProviderOptions: refagent.ProviderOptions{
					Providers:  specs,
					MaxRetries: provider.DefaultMaxRetries,

					// Models that take no images (docs/protocol.md §13 P4).
					TextOnlyModels: config.ParseModelList(cfg.Provider.TextOnlyModels),
				},
				Headless: refagent.Headless{
					HeadlessTimeout: cfg.Headless.Timeout,
					HeadlessPolicy:  cmp.Or(os.Getenv("SHARD_AGENT_HEADLESS_POLICY"), cfg.Headless.Policy),
				},
				Compaction: refagent.Compaction{
					ContextWindow:    cfg.Sim.ContextWindow,
					NoAutoCompaction: !cfg.Compaction.Enabled,
					KeepRecentTokens: cfg.Compaction.KeepRecentTokens,
				},
				Hooks: refagent.Hooks{
					Exit:          os.Exit,
					IgnoreSignals: func() { signal.Ignore(syscall.SIGTERM, syscall.SIGINT) },
					Trim:          trimIdle,
				},
			})
		},
	}
	cmd.Flags().BoolVar(&headless, "headless", false, "speak the per-agent protocol on stdin/stdout (required without --adapter)")
	cmd.Flags().StringVar(&adapterKind, "adapter", "", "host a third-party agent speaking this protocol (acp or pi), started as the command after --")
	return cmd
}

// listEnv reads a comma-separated list from the variable name; nil when
// it is unset or empty.
func listEnv(name string) []string {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// trimIdle is the runtime's idle trim (refagent.Options.Trim): the heap's
// free pages go back to the OS, and the executable's read-only pages that
// startup and the last turn touched leave the resident set. An idle child
// of this ~60 MB binary then holds what idling needs, not what every
// package's init touched (BENCHMARKS.md, child RSS).
func trimIdle() {
	debug.FreeOSMemory()
	_, _ = memtrim.DropExecutablePages() // best effort: a failure only leaves pages resident
}

// providerSpecs is the runtime's providers: the daemon's provider set
// (config.ProviderSet), the default first, each with its key read from the
// variable its api_key_env names (or its kind's conventional one). A key
// goes to its provider only: bash runs without any of them.
func providerSpecs(cfg *config.Config) ([]refagent.ProviderSpec, error) {
	var out []refagent.ProviderSpec
	for _, p := range cfg.ProviderSet() {
		parsed, err := config.ParsePrices(p.Prices) // validated by config.Load
		if err != nil {
			return nil, err
		}
		var prices map[string]refagent.Price
		for model, pr := range parsed {
			if prices == nil {
				prices = map[string]refagent.Price{}
			}
			prices[model] = refagent.Price{Input: pr[0], Output: pr[1], CacheRead: pr[2], CacheWrite: pr[3]} // both per million tokens
		}
		sp := refagent.ProviderSpec{Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, Models: p.Models, Prices: prices,
			TextOnlyModels: p.TextOnlyModels} // docs/protocol.md §13 P4
		if p.Kind != config.ProviderSim {
			sp.APIKeyEnv = cmp.Or(p.APIKeyEnv, provider.DefaultAPIKeyEnv(p.Kind))
			if sp.APIKeyEnv != "" {
				sp.APIKey = os.Getenv(sp.APIKeyEnv)
			}
		}
		out = append(out, sp)
	}
	return out, nil
}

// mcpServers are the MCP servers the daemon passes in SHARD_MCP_SERVERS;
// unset or unreadable: none (the latter is said on stderr, without the
// value, which may hold secrets).
func mcpServers() []refagent.MCPServer {
	out, err := decodeMCPServers(os.Getenv("SHARD_MCP_SERVERS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardd agent: SHARD_MCP_SERVERS is not a JSON object of servers; no MCP servers")
	}
	return out
}

// decodeMCPServers decodes v, a JSON object of protocol.MCPServer by name
// ("" is none), into the runtime's servers, sorted by name.
func decodeMCPServers(v string) ([]refagent.MCPServer, error) {
	if v == "" {
		return nil, nil
	}
	var byName map[string]protocol.MCPServer
	if err := json.Unmarshal([]byte(v), &byName); err != nil {
		return nil, fmt.Errorf("SHARD_MCP_SERVERS: %w", err)
	}
	out := make([]refagent.MCPServer, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		s := byName[name]
		out = append(out, refagent.MCPServer{Name: name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers})
	}
	return out, nil
}
