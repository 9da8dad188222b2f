package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
)

// Options configure a Host.
type Options struct {
	// Stdin carries the daemon's commands. When Run leaves before Stdin
	// ended (ctx done, the agent gone), it closes Stdin if it is an
	// io.Closer, so that its reader's blocked read returns, and waits for
	// the reader: a Stdin whose Close does not interrupt a pending Read (a
	// blocking *os.File) delays Run's return until it yields a line or EOF.
	Stdin  io.Reader
	Stdout io.Writer
	Log    *slog.Logger
	// ServerVersion is announced in hello.
	ServerVersion string
	// HeadlessTimeout bounds how long a permission request waits for an
	// answer; past it the request is denied (source "timeout"). 0: forever.
	HeadlessTimeout time.Duration
	// Models, when set, filters the agent's model catalog (the profile's
	// models).
	Models []string
	// SessionDir, when set, is where the images of prompts are kept
	// (images/ in it, docs/protocol.md §13 P4), for get_image; "" keeps
	// them in memory.
	SessionDir string
	// Clock returns the current time; nil is time.Now (ids only).
	Clock func() time.Time
	// Mode, Provider and Model are the selection the daemon kept for the
	// agent (SHARD_AGENT_MODE, _PROVIDER, _MODEL: what mode_changed and
	// model_changed last said). An agent whose session opens in another
	// mode or model (Claude's resumed session runs its default again) is
	// switched back before hello, where the agent offers it: the mode by
	// name, the model by id or name when Provider is "acp" or empty (the
	// daemon keeps a third-party model's name, docs/protocol.md
	// Appendix A).
	Mode, Provider, Model string
}

// selectionTimeout bounds each switch that restores the kept selection.
const selectionTimeout = 10 * time.Second

// restoreSelection switches the agent back to the kept mode and model
// (Options.Mode, Model) where they differ from what its session opened
// with and it offers them; a switch that fails is logged and the offer
// kept as it is.
func restoreSelection(ctx context.Context, opts Options, b Backend, o Offer) Offer {
	if m := opts.Mode; m != "" && m != o.Mode && slices.ContainsFunc(o.Modes, func(d protocol.ModeDescriptor) bool { return d.Name == m }) {
		sctx, cancel := context.WithTimeout(ctx, selectionTimeout)
		err := b.SetMode(sctx, m)
		cancel()
		if err != nil {
			opts.Log.Warn("the kept mode is not restored", "mode", m, "err", err)
		} else {
			o.Mode = m
		}
	}
	if opts.Model == "" || (opts.Provider != "" && opts.Provider != "acp") {
		return o
	}
	i := slices.IndexFunc(o.Models, func(d protocol.ModelDescriptor) bool { return d.ID == opts.Model || d.Model == opts.Model })
	if i < 0 || o.Models[i].ID == o.Model || (len(opts.Models) > 0 && !slices.Contains(opts.Models, o.Models[i].ID)) {
		return o
	}
	sctx, cancel := context.WithTimeout(ctx, selectionTimeout)
	defer cancel()
	if err := b.SetModel(sctx, o.Models[i].ID); err != nil {
		opts.Log.Warn("the kept model is not restored", "model", o.Models[i].ID, "err", err)
		return o
	}
	o.Model = o.Models[i].ID
	return o
}

// Host is the Shard side of an adapter: it speaks the per-agent protocol
// on Stdin/Stdout and drives a Backend. mu guards every field below it and
// every write to Stdout, so a state change and the event announcing it are
// written together and get_sync reflects exactly the events before it (as
// in the reference runtime).
type Host struct {
	opts Options
	b    Backend
	log  *slog.Logger
	// images keeps the images of prompts; safe for concurrent use, it does
	// file I/O and is used without mu.
	images *images.Store
	ids    int64 // guarded by mu

	mu        sync.Mutex
	started   bool // hello written: events are emitted; before it (a load's replay) they only build the window
	status    protocol.AgentStatus
	mode      string
	offer     Offer
	window    []protocol.Message
	pending   []*pending
	turn      *turn // nil when idle (and during replay: replay)
	replay    *turn
	followUps []userInput
	delivered map[string]bool // dedupe keys of prompts accepted by this process
	closing   bool
	writeErr  error
	badOutput bool   // a PROTOCOL_ERROR for the agent's output was reported (or is due at start)
	badDetail string // what it was (never the line itself)

	// life is the context of the goroutines below: Run cancels it on its
	// way out, once the agent is closed.
	life context.Context
	// turns owns the goroutines that wait for the agent (a turn, a mode or
	// model switch); Run closes it, which refuses new ones and waits.
	turns xsync.Group
}

// turn is the turn in flight and the messages it is assembling.
type turn struct {
	id      string
	aborted bool
	msg     *protocol.Message // the assistant message being streamed; nil: none
	results *protocol.Message // tool results not yet in the window
	tools   map[string]*toolState
	usage   *protocol.Usage
}

// toolState is what the Host told the clients about one tool call.
type toolState struct {
	announced bool // tool_call written
	finished  bool // tool_result written
}

// Run speaks the per-agent protocol for the agent behind b until Stdin
// ends (nil), ctx is done, or the agent dies (an error: the process exits
// non-zero and the daemon reports agent_exited). A Backend that does not
// start is an error before anything is written, which the daemon reports as
// RUNTIME_START_FAILED. When Run returns, the agent is closed and every
// goroutine Run started has ended (see Options.Stdin).
func Run(ctx context.Context, opts Options, b Backend) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	h := &Host{opts: opts, b: b, log: opts.Log, status: protocol.StatusIdle, delivered: map[string]bool{}, life: life,
		images: images.Open(opts.SessionDir)}
	h.replay = h.newTurnLocked()
	offer, err := b.Start(ctx, h)
	if err != nil {
		_ = b.Close()
		return fmt.Errorf("adapter: start agent: %w", err)
	}
	offer = restoreSelection(ctx, opts, b, offer)
	var kept []protocol.Message
	if offer.Resumed {
		kept = h.loadWindow() // file I/O, before mu
	}
	h.start(offer, kept)
	var reader sync.WaitGroup
	readDone := make(chan error, 1)
	reader.Go(func() { readDone <- h.readLoop() })
	var runErr error
	stdinOpen := true
	select {
	case err := <-readDone:
		runErr = err // stdin closed: the daemon stops us
		stdinOpen = false
	case <-ctx.Done():
	case <-b.Done():
		runErr = fmt.Errorf("adapter: agent exited: %w", b.Err())
		h.mu.Lock()
		h.emitLocked(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeInternal,
			Message: "the agent exited", Fatal: true})
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.closing = true
	h.abortLocked()
	h.mu.Unlock()
	closeErr := b.Close()
	// The agent is gone: what still waits for it gives up, and no command
	// starts a new wait (h.closing, and the group refuses).
	stop()
	h.turns.Close()
	if stdinOpen {
		if c, ok := opts.Stdin.(io.Closer); ok {
			_ = c.Close() // ends the reader's read; its error is expected
		}
	}
	reader.Wait()
	if runErr == nil && closeErr != nil {
		h.log.Info("agent stopped", "err", closeErr)
	}
	return runErr
}

func (h *Host) newTurnLocked() *turn {
	return &turn{id: h.nextIDLocked("turn"), tools: map[string]*toolState{}}
}

func (h *Host) nextIDLocked(prefix string) string {
	h.ids++
	now := time.Now
	if h.opts.Clock != nil {
		now = h.opts.Clock
	}
	return prefix + "-" + strconv.FormatInt(now().UnixMilli(), 36) + "-" + strconv.FormatInt(h.ids, 10)
}

// start ends the replay and writes hello and the initial sync. kept is
// the live window of a resumed session (Offer.Resumed), which had no
// replay.
func (h *Host) start(offer Offer, kept []protocol.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.opts.Models) > 0 {
		offer.Models = slices.DeleteFunc(offer.Models, func(m protocol.ModelDescriptor) bool {
			return !slices.Contains(h.opts.Models, m.ID)
		})
	}
	h.offer, h.mode = offer, offer.Mode
	if h.mode == "" {
		h.mode = defaultMode
	}
	h.flushLocked(h.replay)
	h.replay = nil
	if offer.Resumed {
		h.window = kept
	} else {
		// A replayed or new session's window replaces the kept one, which
		// belonged to the session before.
		h.saveWindowLocked()
	}
	h.started = true
	h.emitLocked(protocol.Hello{Header: protocol.Header{Type: protocol.TypeHello}, ProtocolVersion: protocol.Version,
		ServerVersion: h.opts.ServerVersion, Capabilities: h.capabilitiesLocked()})
	h.emitLocked(protocol.Sync{Header: protocol.Header{Type: protocol.TypeSync}, Status: h.status, Mode: h.mode,
		Capabilities: h.capabilitiesLocked(), LiveWindow: h.liveWindowLocked(), PendingRequests: h.pendingRawLocked()})
	if h.badOutput {
		h.reportBadOutputLocked()
	}
}

// defaultMode is the one mode of an agent that offers none.
const defaultMode = "default"

// Capabilities (docs/protocol.md §9.1).
const (
	capStreamingDeltas = "streaming-deltas"
	capModeCatalog     = "mode-catalog"
	capModeSwitch      = "mode-switch"
	capModelCatalog    = "model-catalog"
	capModelSwitch     = "model-switch"
	capReasoningCat    = "reasoning-catalog"
	capReasoningSwitch = "reasoning-switch"
)

func (h *Host) capabilitiesLocked() []string {
	caps := []string{capStreamingDeltas, capModeCatalog}
	if len(h.offer.Modes) > 1 {
		caps = append(caps, capModeSwitch)
	}
	if len(h.offer.Models) > 0 {
		caps = append(caps, capModelCatalog, capModelSwitch)
	}
	if len(h.offer.Levels) > 0 {
		caps = append(caps, capReasoningCat)
		if _, ok := h.b.(LevelSetter); ok {
			caps = append(caps, capReasoningSwitch)
		}
	}
	if h.offer.Images {
		caps = append(caps, protocol.CapImageInput)
	}
	return caps
}

// ---- output ----

func (h *Host) emitLocked(v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		h.log.Error("encode message", "err", err)
		return
	}
	h.writeLocked(b)
}

func (h *Host) writeLocked(rec []byte) {
	if h.writeErr != nil {
		return
	}
	line := append(append(make([]byte, 0, len(rec)+1), rec...), '\n')
	if _, err := h.opts.Stdout.Write(line); err != nil {
		h.writeErr = fmt.Errorf("adapter: write stdout: %w", err)
	}
}

func (h *Host) respondLocked(hd protocol.Header, data any) {
	h.writeLocked(protocol.NewResponse(hd.ID, hd.Type, data))
}

func (h *Host) respondErrLocked(hd protocol.Header, err error) {
	h.writeLocked(protocol.NewErrorResponse(hd.ID, hd.Type, err))
}

func (h *Host) setStatusLocked(s protocol.AgentStatus) {
	if h.status == s {
		return
	}
	h.status = s
	h.emitLocked(protocol.Status{Header: protocol.Header{Type: protocol.TypeStatus}, Status: s})
}

func (h *Host) liveWindowLocked() protocol.LiveWindow {
	msgs := h.window
	if msgs == nil {
		msgs = []protocol.Message{}
	}
	return protocol.LiveWindow{Messages: msgs}
}

// ProtocolError implements Events: the first line of garbage is reported
// as a non-fatal PROTOCOL_ERROR, as the daemon does for its own runtimes.
func (h *Host) ProtocolError(detail string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log.Warn("agent wrote a line that is not its protocol; dropped", "detail", detail)
	if h.badOutput {
		return
	}
	h.badOutput = true
	h.badDetail = detail
	if h.started { // else start reports it after sync
		h.reportBadOutputLocked()
	}
}

func (h *Host) reportBadOutputLocked() {
	h.emitLocked(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeProtocolError,
		Message: "the agent wrote output that is not its protocol (dropped): " + h.badDetail})
}

// errUnsupported is the UNSUPPORTED answer for what the agent lacks.
func errUnsupported(what string) error {
	return protocol.Errorf(protocol.CodeUnsupported, "%s is not offered by this agent", what)
}

// codeOf keeps a protocol error's code, else INTERNAL_ERROR; an
// ErrUnsupported becomes UNSUPPORTED.
func codeOf(what string, err error) error {
	if errors.Is(err, ErrUnsupported) {
		return errUnsupported(what)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return err
	}
	return protocol.Errorf(protocol.CodeInternal, "%s: %w", what, err)
}
