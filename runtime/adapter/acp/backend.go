package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
)

// Options configure a Backend.
type Options struct {
	// Command is the agent's program and arguments (no shell).
	Command []string
	// Cwd is the agent's working directory, the root of the files its
	// fs/* requests may touch.
	Cwd string
	// Env is the agent's environment.
	Env []string
	// Stderr receives the agent's stderr (the agent log).
	Stderr io.Writer
	// SessionDir, when set, keeps the ACP session id (acp-session.json) so
	// that the next generation loads the session where the agent offers
	// session/load.
	SessionDir string
	// AuthMethod, when set, is sent in authenticate after initialize
	// (e.g. codex-acp's "openai-api-key").
	AuthMethod string
	// NoFS, when set, leaves fs/read_text_file and fs/write_text_file out
	// of the client capabilities, so the agent reads and writes its files
	// itself, after its own permission request. Gemini CLI needs it: its
	// write_file reads the target through the client first and takes any
	// error (a new file's "not found" too) as failure, and a write through
	// the client would ask permission a second time (docs/protocol.md
	// Appendix A).
	NoFS bool
	// MCPServers are the agent's MCP servers by name (EnvMCPServers),
	// passed in session/new, load and resume: stdio ones always, HTTP ones
	// when the agent takes them (docs/protocol.md Appendix A). Their env
	// and headers may hold secrets: never logged.
	MCPServers map[string]protocol.MCPServer
	// StartTimeout bounds initialize and session/new|load. 0: 30s.
	StartTimeout time.Duration
	Log          *slog.Logger
	// Trace, when set, receives every JSON line the agent wrote (tests
	// record transcripts with it; the daemon never sets it, as the lines
	// carry prompts and answers).
	Trace io.Writer
}

// Backend is an ACP agent as an adapter.Backend. The agent is a child of
// the adapter in the adapter's process group (so the daemon's group
// signals reach it) and dies with it (Pdeathsig).
type Backend struct {
	opts Options
	tr   *Translator
	ev   adapter.Events

	*adapter.Proc // the agent's process: Done, Err, Close

	conn    *sdk.ClientSideConnection
	session sdk.SessionId
	offer   adapter.Offer
	// closable: the agent offers session/close, sent when the backend is
	// closed (set by Start, read by Close after it).
	closable bool

	terms terminals // the agent's terminal/* commands

	// life is cancelled by Close; the backend's own goroutines (a
	// session/cancel being sent) run under it.
	life context.Context
	stop context.CancelFunc
	// calls owns what the backend runs off the Host's goroutines: the
	// session/cancel sends and the agent's requests the SDK hands to the
	// client (each counted with Begin, as the SDK starts their
	// goroutines). Close closes it once the agent and its connection are
	// gone, which ends them all.
	calls xsync.Group
}

// New returns a Backend that Start will start.
func New(opts Options) *Backend {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	life, stop := context.WithCancel(context.Background())
	return &Backend{opts: opts, Proc: adapter.NewProc(), life: life, stop: stop}
}

// sessionFile holds the ACP session id across generations.
const sessionFile = "acp-session.json"

// Start implements adapter.Backend.
func (b *Backend) Start(ctx context.Context, ev adapter.Events) (adapter.Offer, error) {
	if len(b.opts.Command) == 0 {
		return adapter.Offer{}, errors.New("acp: no agent command")
	}
	b.ev, b.tr = ev, NewTranslator(ev)
	stdin, stdout, err := b.Proc.Start(b.opts.Command, b.opts.Cwd, b.opts.Env, b.opts.Stderr)
	if err != nil {
		return adapter.Offer{}, fmt.Errorf("acp: %w", err)
	}
	pr, pw := io.Pipe()
	// The Proc owns the filter: its last act is Exited, and Close waits
	// for Done.
	go b.filter(stdout, pw)
	b.conn = sdk.NewClientSideConnection(&client{b: b}, stdin, pr)
	b.conn.SetLogger(b.opts.Log)

	sctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	offer, err := b.open(sctx)
	if err != nil {
		return adapter.Offer{}, err
	}
	b.offer = offer
	return offer, nil
}

// filter passes the agent's stdout lines that are JSON on to the ACP
// connection and reports the others (never their text) as protocol
// errors; at EOF it waits for the process, then marks the backend done.
func (b *Backend) filter(stdout io.Reader, pw *io.PipeWriter) {
	rd := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			if json.Valid(line) {
				if b.opts.Trace != nil {
					_, _ = b.opts.Trace.Write(line)
				}
				if _, werr := pw.Write(line); werr != nil {
					break
				}
			} else {
				b.ev.ProtocolError(fmt.Sprintf("a %d-byte line that is not JSON", len(line)))
			}
		}
		if err != nil {
			break
		}
	}
	b.Exited(func() { _ = pw.Close() })
}

// open runs initialize (and authenticate) and opens the session: loaded
// when a previous generation left its id and the agent can load, else new.
func (b *Backend) open(ctx context.Context) (adapter.Offer, error) {
	init, err := b.conn.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{
			Fs:       sdk.FileSystemCapabilities{ReadTextFile: !b.opts.NoFS, WriteTextFile: !b.opts.NoFS},
			Terminal: true,
		},
		ClientInfo: &sdk.Implementation{Name: "shard", Version: "1"},
	})
	if err != nil {
		return adapter.Offer{}, b.startErr("initialize", err)
	}
	if b.opts.AuthMethod != "" {
		if _, err := b.conn.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: b.opts.AuthMethod}); err != nil {
			return adapter.Offer{}, b.startErr("authenticate", err)
		}
	}
	caps := init.AgentCapabilities
	b.closable = caps.SessionCapabilities.Close != nil
	mcps := mcpServers(b.opts.MCPServers, caps.McpCapabilities.Http, b.opts.Log)
	// The previous generation's session: resumed where the agent offers
	// session/resume (no replay: the Host shows the window it kept), else
	// loaded (its replay is the window), else a new one.
	id := sdk.SessionId(b.savedSession())
	if id != "" && caps.SessionCapabilities.Resume != nil {
		resp, err := b.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: id, Cwd: b.opts.Cwd, McpServers: mcps})
		if err == nil {
			b.session = id
			b.tr.SetConfig(resp.ConfigOptions)
			o := offerFrom(resp.Modes, resp.Models, resp.ConfigOptions)
			o.Images, o.Resumed = caps.PromptCapabilities.Image, true
			return o, nil
		}
		b.opts.Log.Warn("session/resume failed; trying session/load", "err", err)
	}
	if id != "" && caps.LoadSession {
		resp, err := b.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: b.opts.Cwd, McpServers: mcps})
		if err == nil {
			b.session = id
			b.tr.SetConfig(resp.ConfigOptions)
			o := offerFrom(resp.Modes, resp.Models, resp.ConfigOptions)
			o.Images = caps.PromptCapabilities.Image
			return o, nil
		}
		b.opts.Log.Warn("session/load failed; starting a new session", "err", err)
	}
	resp, err := b.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: b.opts.Cwd, McpServers: mcps})
	if err != nil {
		return adapter.Offer{}, b.startErr("session/new", err)
	}
	b.session = resp.SessionId
	b.saveSession(string(resp.SessionId))
	b.tr.SetConfig(resp.ConfigOptions)
	o := offerFrom(resp.Modes, resp.Models, resp.ConfigOptions)
	o.Images = init.AgentCapabilities.PromptCapabilities.Image // promptCapabilities.image
	return o, nil
}

func (b *Backend) startErr(step string, err error) error {
	select {
	case <-b.Done():
		return fmt.Errorf("acp: %s: the agent exited (%v): %w", step, b.Err(), err)
	default:
	}
	return fmt.Errorf("acp: %s: %w", step, err)
}

func (b *Backend) savedSession() string {
	if b.opts.SessionDir == "" {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(b.opts.SessionDir, sessionFile))
	if err != nil {
		return ""
	}
	var s struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal(data, &s) != nil {
		return ""
	}
	return s.SessionID
}

func (b *Backend) saveSession(id string) {
	if b.opts.SessionDir == "" {
		return
	}
	data, _ := json.Marshal(map[string]string{"session_id": id})
	if err := os.MkdirAll(b.opts.SessionDir, 0o700); err == nil {
		err = os.WriteFile(filepath.Join(b.opts.SessionDir, sessionFile), data, 0o600)
		if err != nil {
			b.opts.Log.Warn("save ACP session id", "err", err)
		}
	}
}

// offerOf maps ACP's mode and model state.
func offerOf(modes *sdk.SessionModeState, models *sdk.SessionModelState) adapter.Offer {
	var o adapter.Offer
	if modes != nil {
		for _, m := range modes.AvailableModes {
			d := protocol.ModeDescriptor{Name: string(m.Id), Description: m.Name}
			if m.Description != nil && *m.Description != "" {
				d.Description = *m.Description
			}
			o.Modes = append(o.Modes, d)
		}
		o.Mode = string(modes.CurrentModeId)
	}
	if models != nil {
		for _, m := range models.AvailableModels {
			o.Models = append(o.Models, protocol.ModelDescriptor{ID: string(m.ModelId), Provider: "acp", Model: m.Name})
		}
		o.Model = string(models.CurrentModelId)
	}
	return o
}

// Close implements adapter.Backend: the agent's terminals are killed
// (and waited for), then the agent is stopped, and then Close waits for
// the agent's requests still being answered (their contexts end with the
// agent's connection) and for the backend's own goroutines; a request
// the SDK hands over later is refused.
func (b *Backend) Close() error {
	b.stop()
	b.terms.closeAll()
	b.closeSession()
	err := b.Proc.Close()
	b.calls.Close()
	return err
}

// closeTimeout bounds session/close: an agent that does not answer is
// stopped anyway.
const closeTimeout = 2 * time.Second

// closeSession sends session/close, where the agent offers it and the
// session is open, before the agent is stopped: the agent frees the
// session (Claude ends its CLI child) while its history stays for the
// next generation's resume or load.
func (b *Backend) closeSession() {
	if !b.closable || b.session == "" {
		return
	}
	select {
	case <-b.Done():
		return // the agent is gone already
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if _, err := b.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: b.session}); err != nil {
		b.opts.Log.Warn("session/close", "err", err)
	}
}

// Prompt implements adapter.Backend.
// The prompt is ACP content blocks: an image block (base64 data and MIME
// type) per image, then the text (none for an images-only prompt).
func (b *Backend) Prompt(ctx context.Context, text string, images []protocol.Image) (adapter.TurnResult, error) {
	var prompt []sdk.ContentBlock
	for _, im := range images {
		prompt = append(prompt, sdk.ImageBlock(im.Data, im.MimeType))
	}
	if text != "" || len(prompt) == 0 {
		prompt = append(prompt, sdk.TextBlock(text))
	}
	resp, err := b.conn.Prompt(ctx, sdk.PromptRequest{SessionId: b.session, Prompt: prompt})
	if err != nil {
		return adapter.TurnResult{}, err
	}
	res := adapter.TurnResult{StopReason: string(resp.StopReason), Usage: usageOf(resp)}
	// The usage_updates of the turn (they came before the answer): the
	// context's tokens and size, the turn's cost.
	if used, size, cost, ok := b.tr.TakeUsage(); ok {
		if res.Usage == nil {
			res.Usage = &protocol.Usage{}
		}
		res.Usage.ContextTokens, res.Usage.Cost, res.ContextWindow = int64(used), cost, size
	}
	return res, nil
}

// usageOf is the token usage of a session/prompt answer: its usage, else
// Gemini CLI's _meta.quota (token_count, and the model when model_usage
// names one), else nil.
func usageOf(resp sdk.PromptResponse) *protocol.Usage {
	if u := resp.Usage; u != nil {
		pu := &protocol.Usage{Input: int64(u.InputTokens), Output: int64(u.OutputTokens)}
		if u.CachedReadTokens != nil {
			pu.CacheRead = int64(*u.CachedReadTokens)
		}
		if u.CachedWriteTokens != nil {
			pu.CacheWrite = int64(*u.CachedWriteTokens)
		}
		return pu
	}
	q, ok := resp.Meta["quota"]
	if !ok {
		return nil
	}
	raw, err := json.Marshal(q)
	if err != nil {
		return nil
	}
	return quotaUsage(raw)
}

// quotaUsage decodes Gemini CLI's _meta.quota: {token_count: {input_tokens,
// output_tokens}, model_usage: [{model, token_count}]}. nil when it has no
// token_count.
func quotaUsage(raw []byte) *protocol.Usage {
	var quota struct {
		TokenCount *struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"token_count"`
		ModelUsage []struct {
			Model string `json:"model"`
		} `json:"model_usage"`
	}
	if json.Unmarshal(raw, &quota) != nil || quota.TokenCount == nil {
		return nil
	}
	u := &protocol.Usage{Input: max(quota.TokenCount.Input, 0), Output: max(quota.TokenCount.Output, 0)}
	if len(quota.ModelUsage) == 1 {
		u.Model = quota.ModelUsage[0].Model
	}
	return u
}

// cancelTimeout bounds sending session/cancel.
const cancelTimeout = 5 * time.Second

// Cancel implements adapter.Backend (session/cancel), sent from a
// goroutine of the backend: the Host calls Cancel holding its lock. Once
// Close began there is no turn left to cancel.
func (b *Backend) Cancel() {
	b.calls.Go(func() {
		ctx, cancel := context.WithTimeout(b.life, cancelTimeout)
		defer cancel()
		if err := b.conn.Cancel(ctx, sdk.CancelNotification{SessionId: b.session}); err != nil {
			b.opts.Log.Warn("session/cancel", "err", err)
		}
	})
}

// SetMode implements adapter.Backend: session/set_config_option when the
// agent has a config option of category mode, else session/set_mode.
func (b *Backend) SetMode(ctx context.Context, mode string) error {
	if id := b.tr.mapped().mode; id != "" {
		return b.setConfig(ctx, id, mode)
	}
	if len(b.offer.Modes) == 0 {
		return adapter.ErrUnsupported
	}
	_, err := b.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: b.session, ModeId: sdk.SessionModeId(mode)})
	return err
}

// SetModel implements adapter.Backend: session/set_config_option when the
// agent has a config option of category model, else the unstable
// session/set_model.
func (b *Backend) SetModel(ctx context.Context, model string) error {
	if id := b.tr.mapped().model; id != "" {
		return b.setConfig(ctx, id, model)
	}
	if len(b.offer.Models) == 0 {
		return adapter.ErrUnsupported
	}
	_, err := b.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: b.session, ModelId: sdk.UnstableModelId(model)})
	return err
}

// SetLevel implements adapter.LevelSetter: session/set_config_option of
// the agent's config option of category thought_level.
func (b *Backend) SetLevel(ctx context.Context, level string) error {
	id := b.tr.mapped().thought
	if id == "" {
		return adapter.ErrUnsupported
	}
	return b.setConfig(ctx, id, level)
}

// setConfig sends session/set_config_option and records the options its
// answer carries (the Host announces the change it asked for).
func (b *Backend) setConfig(ctx context.Context, id sdk.SessionConfigId, value string) error {
	resp, err := b.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
		SessionId: b.session, ConfigId: id, Value: sdk.SessionConfigValueId(value)}})
	if err != nil {
		return err
	}
	if len(resp.ConfigOptions) > 0 {
		b.tr.SetConfig(resp.ConfigOptions)
	}
	return nil
}
