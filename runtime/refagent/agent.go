package refagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// Defaults of Options.
const (
	defaultMode            = modeBuild
	defaultProvider        = providerSim
	defaultHeadlessTimeout = 5 * time.Minute
	defaultHeadlessPolicy  = protocol.HeadlessDeny
	defaultContextWindow   = 200_000
	defaultServerVersion   = "dev"
	defaultTrimAfter       = 2 * time.Second
)

// Options configure one runtime process. cmd/shardd fills them from env and
// config; zero values take the documented defaults. Run copies Options and
// never modifies them. The fields are grouped by concern into embedded
// structs, so o.Stdin, o.Provider and the rest read as before while a
// literal names its group.
type Options struct {
	Stdio
	Identity
	ProviderOptions
	Headless
	Compaction
	Hooks
}

// Stdio is the runtime's three streams. They are the whole of its
// conversation with the daemon, so they travel together and apart from
// everything that configures what is said on them.
type Stdio struct {
	// Stdin carries JSONL commands. It is required. When ctx is done, Run
	// closes Stdin if it is an io.Closer so that a blocked read returns, and
	// then waits for the reader: a Stdin whose Close does not interrupt a
	// pending Read (a blocking *os.File, such as a terminal) delays Run's
	// return until it yields a line or EOF.
	Stdin io.Reader
	// Stdout receives JSONL events and responses. It is required. Every
	// record is written with a single Write call.
	Stdout io.Writer
	// Stderr receives coarse diagnostics only, never prompts, text or tool
	// arguments. Default: discarded.
	Stderr io.Writer
}

// Identity is who the agent is and where it works: the ids and socket the
// daemon hands a child, the directories and environment its tools and
// transcript use, and the mode and model it starts in. It is what differs
// between two agents of one daemon (cmd/shardd reads most of it from the
// SHARD_* environment of each child), while the other groups mostly follow
// the daemon's config.
type Identity struct {
	// AgentID and SessionID come from SHARD_AGENT_ID and SHARD_SESSION_ID;
	// they may be empty when the runtime is run by hand. A runtime speaks
	// the direct protocol, which omits agent_id, so they serve diagnostics
	// and, for AgentID, the parent_agent_id of the subagent tool's daemon
	// commands.
	AgentID, SessionID string
	// Socket is the daemon's unix socket (SHARD_SOCKET), which the
	// subagent tool dials to create, wait for, inspect and stop this
	// agent's subagent jobs (docs/protocol.md §10.3). Default "": with no Socket
	// or no AgentID every subagent call is a tool error saying that
	// subagents need the daemon.
	Socket string
	// Cwd is the working directory that relative tool paths resolve
	// against. Default: the process working directory.
	Cwd string
	// SessionDir is the session directory: the transcript session.jsonl,
	// the allow_always grants grants.jsonl and the forks/ made from it
	// (session.go). "" disables persistence: the session and its grants
	// last for the run only and cannot be forked. The daemon passes
	// $SHARD_HOME/sessions/<session_id>.
	SessionDir string
	// Environ is the environment bash commands run with, as KEY=value
	// strings, minus APIKeyEnv. Default: the process environment.
	Environ []string
	// Mode is the initial mode, "build" or "plan". Default "build".
	Mode string
	// Model is the agent's initial model (SHARD_AGENT_MODEL): a catalog id
	// such as "openai/gpt-4.1" or a model name (of ModelProvider when it is
	// set, else the first provider offering it). A real provider serves any
	// name it is given (the name joins the catalog); for sim an unknown
	// name is logged and ignored. Default "": ProviderModel.
	Model string
	// ModelProvider is the agent's initial provider (SHARD_AGENT_PROVIDER):
	// the name of one of the runtime's providers, whose first model runs
	// when Model is empty. An unknown name is logged and ignored. Default
	// "": the first provider.
	ModelProvider string
	// ServerVersion is reported in hello. Default "dev".
	ServerVersion string
	// Tools limits the agent's tools to these names (the Agent's tools,
	// SHARD_AGENT_TOOLS; docs/protocol.md §10.1): the model is offered only
	// them, and a call of any other is refused with a tool error and never
	// runs. The skill tool comes with Skills whatever Tools says. Names no
	// tool has are logged and ignored (the daemon refuses them at create).
	// Default nil: every tool (ToolNames).
	Tools []string
	// Skills names the agent's skills (SHARD_AGENT_SKILLS), looked up in
	// the project under Cwd and in Home (runtime/skills): each one's name
	// and description go into the system prompt, and the skill tool
	// returns its body. A skill not found at start is logged and left out.
	// Default nil: none, and no skill tool.
	Skills []string
	// SystemPrompt is the delegated system prompt of a subagent's manifest
	// (SHARD_AGENT_SYSTEM_PROMPT, set by the daemon for the children it
	// creates), which the model gets after the runtime's own. Default "".
	SystemPrompt string
	// Home is the Shard home (SHARD_HOME), whose skills/ folder holds the
	// user's own skills. Default "": none.
	Home string
	// MCPServers are the MCP servers (SHARD_MCP_SERVERS) whose tools the
	// runtime offers as <server>__<tool> (docs/protocol.md §10.1): Run
	// connects to them before hello, each bounded, and stops them when it
	// returns. A server that fails is logged and its tools are
	// unavailable. Default nil: none.
	MCPServers []MCPServer
}

// ProviderOptions is the model provider the runtime calls and what its
// calls cost. It mirrors the daemon's provider config, and it holds the
// one secret, APIKey, so that what may never be logged sits in one place.
type ProviderOptions struct {
	// Provider names the model provider (config provider.name): "sim",
	// "openai" (any OpenAI-compatible server) or "anthropic". Default
	// "sim", the offline scripted model (docs/sim.md).
	Provider string
	// BaseURL is the provider's endpoint (provider.base_url). Default "":
	// the service's own. Ignored by sim.
	BaseURL string
	// ProviderModel is the configured model (provider.model). Default "":
	// the provider's default ("sim" for sim).
	ProviderModel string
	// APIKey is the provider's key, read by the caller from the
	// environment variable APIKeyEnv names. It is sent only to the
	// provider and never logged or written. Default "": none (local
	// servers).
	APIKey string
	// APIKeyEnv is the name of the environment variable that holds
	// APIKey; bash commands run without it. Default "".
	APIKeyEnv string
	// MaxRetries is how often a failed provider request is retried before
	// its stream starts (HTTP 408, 409, 429, 5xx, connection failures).
	// Default 0: no retries; cmd/shardd passes provider.DefaultMaxRetries.
	MaxRetries int
	// Prices maps a model name to its price, for the cost field of usage.
	// Default nil: no cost is reported.
	Prices map[string]Price
	// Providers, when set, are every provider the runtime may call, the
	// default first (the daemon's provider set): list_models offers all
	// their models and set_model switches among them. Provider, BaseURL,
	// ProviderModel, APIKey, APIKeyEnv and Prices are then ignored; they
	// describe the one provider of a runtime without Providers.
	Providers []ProviderSpec

	// TextOnlyModels names the models (a model name or a catalog id) that
	// take no image input (config provider.text_only_models): a prompt
	// with images to one is refused UNSUPPORTED, and images already in the
	// conversation reach it as a line of text saying so. Default nil:
	// every model, the sim's too, takes images.
	TextOnlyModels []string
}

// ProviderSpec is one provider of Options.Providers.
type ProviderSpec struct {
	// Name is what ModelDescriptor.provider says: unique, without "/".
	Name string
	// Kind is "sim", "openai" (any OpenAI-compatible server) or
	// "anthropic".
	Kind string
	// BaseURL is the service's endpoint; "" is the service's own.
	BaseURL string
	// Models are the models it offers, the first its default; empty means
	// the kind's default (both sim models for sim).
	Models []string
	// APIKey is its key, read by the caller from the variable APIKeyEnv
	// names; sent only to the provider, never logged or written.
	APIKey string
	// APIKeyEnv names the variable holding APIKey; bash commands run
	// without it.
	APIKeyEnv string
	// Prices maps its model names to their prices.
	Prices map[string]Price
	// TextOnlyModels names those of its models that take no image input
	// (config providers.<name>.text_only_models): as Options.TextOnlyModels,
	// but for this provider only, so the same model name on another
	// provider still takes images.
	TextOnlyModels []string
}

// Headless is what the runtime does when no client answers a request: an
// agent often runs with nobody attached, and a permission or UI request
// must then end rather than hold its turn forever.
type Headless struct {
	// HeadlessTimeout bounds how long a permission or UI request waits for
	// an answer before it fails. Default 5m.
	HeadlessTimeout time.Duration
	// HeadlessPolicy is the Agent's headless policy
	// (SHARD_AGENT_HEADLESS_POLICY): "deny", "allow_if_rule_matches" or
	// "queue". It decides what a permission request that got no answer
	// within HeadlessTimeout does to its tool call: queue fails it with
	// TIMEOUT, the others deny it. Grants (allow_always) apply under every
	// policy. Default "deny".
	HeadlessPolicy string
}

// Compaction is how the conversation is kept inside the model's context
// window: when compaction runs and how much of the recent conversation it
// keeps. It mirrors the daemon's compaction config.
type Compaction struct {
	// ContextWindow is the context window in tokens of the sim model, and
	// of a real model whose provider reports none. A sim provider call
	// whose input exceeds it fails with PROVIDER_ERROR. Compaction runs
	// between turns above 80% of the window and before a provider call at
	// 100%. Default 200000.
	ContextWindow int
	// KeepRecentTokens is how much of the most recent conversation a
	// compaction keeps, in tokens (session_op compact may override it per
	// call). Default: a fifth of the context window, at most 20000.
	KeepRecentTokens int
	// NoAutoCompaction turns off automatic compaction (both the reserve and
	// the emergency tier; config compaction.enabled=false). session_op
	// compact still runs on demand (docs/protocol.md §9.2).
	NoAutoCompaction bool
}

// Hooks are the points where the runtime reaches into its process: exiting
// it, ignoring its signals, trimming its memory and syncing its files. They
// are functions so that cmd/shardd passes the real thing and a test passes
// a stand-in that it can watch. Exit and IgnoreSignals are called from the
// goroutine that plays the current turn.
type Hooks struct {
	// Exit is called by the `sim: exit <code>` directive. Default os.Exit.
	Exit func(code int)
	// IgnoreSignals is called by the `sim: hang` directive; cmd/shardd
	// passes a function that ignores SIGTERM. Default: does nothing.
	IgnoreSignals func()
	// Trim, when set, is called once the runtime has been idle for
	// TrimAfter: after startup and after every turn, compaction or session
	// operation that ends in idle. An idle runtime waits, often for hours,
	// and what it touched to get there (startup's package initialization,
	// a turn's provider and tool code) need not stay resident; cmd/shardd
	// passes a function that returns those pages to the kernel
	// (internal/memtrim). It runs on a timer goroutine, never under the
	// runtime's lock, and must be safe to call at any time.
	Trim func()
	// extraTools are registered after the built-in ones (this package's
	// tests: a tool that crashes).
	extraTools []tool
	// mcpDown are the MCP servers that failed to start, with why (Run sets
	// it): a call of one of their tools says so.
	mcpDown map[string]string
	// mcpTools are the MCP servers' tools as they are now (Run sets it;
	// mcpClients.tools); each toolbox built takes them.
	mcpTools func() []tool
	// mcpSettled is ready when no MCP server's tool-list change is
	// waiting to be followed (Run sets it; mcpClients.settled).
	mcpSettled func() <-chan struct{}
	// mcpToolsChanged, when set, is called after the toolbox is rebuilt
	// for a server's new tool list (this package's tests wait on it).
	mcpToolsChanged func(server string)
	// mcpStartTimeout bounds each MCP server's start (connectMCP).
	// Default 20s; this package's tests shorten it.
	mcpStartTimeout time.Duration
	// TrimAfter is how long the runtime must stay idle before Trim runs.
	// Default 2s: long enough that a client's next prompt right after a
	// turn does not fault the pages straight back in, short enough that an
	// idle fleet sheds them within a moment.
	TrimAfter time.Duration

	// syncFile, when set, replaces (*os.File).Sync for the transcript, so
	// a test can hold an fsync and watch what the runtime does meanwhile
	// (session). Unexported: only this package's tests set it.
	syncFile func(*os.File) error
}

// withDefaults returns a copy of o with every zero field set to its default.
func (o Options) withDefaults() Options {
	o.Mode = cmp.Or(o.Mode, defaultMode)
	o.Provider = cmp.Or(o.Provider, defaultProvider)
	o.HeadlessTimeout = cmp.Or(o.HeadlessTimeout, defaultHeadlessTimeout)
	o.HeadlessPolicy = cmp.Or(o.HeadlessPolicy, defaultHeadlessPolicy)
	o.ContextWindow = cmp.Or(o.ContextWindow, defaultContextWindow)
	o.ServerVersion = cmp.Or(o.ServerVersion, defaultServerVersion)
	o.TrimAfter = cmp.Or(o.TrimAfter, defaultTrimAfter)
	o.mcpStartTimeout = cmp.Or(o.mcpStartTimeout, defaultMCPStartTimeout)
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	if o.IgnoreSignals == nil {
		o.IgnoreSignals = func() {}
	}
	return o
}

// validate reports the first invalid option of a defaulted Options.
func (o Options) validate() error {
	switch {
	case o.Stdin == nil:
		return fmt.Errorf("%w: Stdin is required", ErrInvalidOptions)
	case o.Stdout == nil:
		return fmt.Errorf("%w: Stdout is required", ErrInvalidOptions)
	case !knownMode(o.Mode):
		return fmt.Errorf("%w: unknown mode %q (want build or plan)", ErrInvalidOptions, o.Mode)
	case o.HeadlessTimeout < 0:
		return fmt.Errorf("%w: HeadlessTimeout must not be negative", ErrInvalidOptions)
	case !protocol.ValidHeadlessPolicy(o.HeadlessPolicy):
		return fmt.Errorf("%w: unknown headless policy %q (want deny, allow_if_rule_matches or queue)", ErrInvalidOptions, o.HeadlessPolicy)
	case o.ContextWindow < 0:
		return fmt.Errorf("%w: ContextWindow must not be negative", ErrInvalidOptions)
	case o.KeepRecentTokens < 0:
		return fmt.Errorf("%w: KeepRecentTokens must not be negative", ErrInvalidOptions)
	case o.MaxRetries < 0:
		return fmt.Errorf("%w: MaxRetries must not be negative", ErrInvalidOptions)
	}
	for _, sp := range specs(o) {
		if sp.Kind != providerSim && sp.Kind != provider.NameOpenAI && sp.Kind != provider.NameAnthropic {
			return fmt.Errorf("%w: unknown provider %q (want sim, openai or anthropic)", ErrInvalidOptions, sp.Kind)
		}
	}
	return nil
}

// Price is what a model costs in US dollars per million tokens, by kind
// of token (the kinds of protocol.Usage).
type Price struct {
	Input, Output, CacheRead, CacheWrite float64
}

// cost prices u.
func (p Price) cost(u protocol.Usage) float64 {
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite) / 1e6
}

// Run serves one runtime process: it restores the session from
// Options.SessionDir, writes hello and sync, then handles commands from
// Stdin until Stdin hits EOF or ctx is done. Either way it aborts a running
// turn, waits for every goroutine it started and returns nil. It returns an
// error for invalid options, a failed read of Stdin or a failed write to
// Stdout (the latter ends the run at once).
//
// A session that cannot be restored (a transcript that is not safe to read
// is a SESSION_CORRUPT protocol error; other failures are INTERNAL_ERROR)
// is never replaced by an empty one: Run writes hello, then a fatal error
// event with the error's code, and returns the error without reading
// Stdin.
//
// After a `sim: hang` directive Run answers nothing and returns only when
// ctx is done. Run never exits the process itself; only `sim: exit` does,
// through Options.Exit.
func Run(ctx context.Context, opts Options) (err error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(opts.Stderr, nil)).With(
		"component", "agent", "agent_id", opts.AgentID, "session_id", opts.SessionID)

	models, err := newModels(opts, log)
	if err != nil {
		return err
	}
	ids := newIDGen()
	sess, state, err := openSession(opts.SessionDir, ids, time.Now(), opts.syncFile)
	if err != nil {
		log.Error("session cannot be restored", slog.Any("err", err))
		failStart(opts, models, err)
		return err
	}
	defer func() {
		if cerr := sess.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	grants, err := loadGrants(opts.SessionDir, log)
	if err != nil {
		log.Error("grants cannot be read", slog.Any("err", err))
		failStart(opts, models, err)
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The MCP servers' tools join the toolbox before it is built; their
	// sessions end after the turns that use them (r.shutdown below).
	mcps := connectMCP(ctx, opts.MCPServers, bashEnviron(opts.Environ, keyVars(opts)...), opts.Stderr, opts.mcpStartTimeout, log)
	defer mcps.close()
	opts.mcpTools = mcps.tools
	opts.mcpSettled = mcps.settled
	opts.mcpDown = mcps.down
	r := newRuntime(ctx, cancel, opts, log, ids, sess, state, grants, models)
	// A server's notifications/tools/list_changed rebuilds the toolbox
	// from here on; one that came before is followed now.
	mcps.follow(ctx, func(server string) {
		r.reloadTools()
		if opts.mcpToolsChanged != nil {
			opts.mcpToolsChanged(server)
		}
	})
	r.start()

	var reader sync.WaitGroup
	readDone := make(chan error, 1)
	reader.Go(func() { readDone <- r.readLoop() })

	var readErr error
	stdinOpen := true
	select {
	case readErr = <-readDone:
		stdinOpen = false
	case <-ctx.Done():
	}

	r.shutdown()
	if stdinOpen {
		if c, ok := opts.Stdin.(io.Closer); ok {
			_ = c.Close() // unblocks the reader; its error is expected
		}
	}
	reader.Wait()

	if werr := r.writeError(); werr != nil {
		return werr
	}
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		return readErr
	}
	return nil
}

// failStart tells a direct client why the runtime cannot start: hello, then
// a fatal error event carrying err's code. Write errors are ignored: Run
// returns err anyway.
func failStart(opts Options, m *models, err error) {
	pe := protocol.AsError(err)
	for _, v := range []any{
		protocol.Hello{
			Header:          protocol.Header{Type: protocol.TypeHello},
			ProtocolVersion: protocol.Version,
			ServerVersion:   opts.ServerVersion,
			Capabilities:    capabilities(m, m.initial),
		},
		protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: pe.Code, Message: pe.Message, Fatal: true},
	} {
		if b, merr := protocol.Marshal(v); merr == nil {
			_, _ = opts.Stdout.Write(append(b, '\n'))
		}
	}
}
