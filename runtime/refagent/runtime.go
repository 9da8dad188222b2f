package refagent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// Roles of live-window messages.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// Modes. build may run every tool (mutating ones through the permission
// gate); plan refuses mutating tools.
const (
	modeBuild = "build"
	modePlan  = "plan"
)

// Sources of permission_resolved / ui_resolved besides the answering
// client's own.
const (
	sourceClient  = "client"
	sourceTimeout = "timeout"
	sourceAbort   = "abort"
	// sourceHeadless is the daemon's headless-policy answer (spec §6.3).
	sourceHeadless = "headless"
)

// modeCatalog is the list_modes catalog in registration order.
func modeCatalog() []protocol.ModeDescriptor {
	return []protocol.ModeDescriptor{
		{Name: modeBuild, Description: "Read and change files; changes ask for permission."},
		{Name: modePlan, Description: "Read-only: explore and plan; tools that change files are refused."},
	}
}

func knownMode(m string) bool { return m == modeBuild || m == modePlan }

// listModesData is the data of a list_modes response (wire spec §9.2).
type listModesData struct {
	Modes  []protocol.ModeDescriptor `json:"modes"`
	Active string                    `json:"active"`
}

// setModeData is the data of a set_mode response (wire spec §9.2).
type setModeData struct {
	PreviousMode string `json:"previous_mode"`
	Mode         string `json:"mode"`
}

// requestKind tells permission requests from UI requests.
type requestKind int

const (
	kindPermission requestKind = iota
	kindUI
)

// pendingRequest is an open permission_request or ui_request.
type pendingRequest struct {
	id   string
	kind requestKind
	// raw is the event exactly as it was written; get_sync returns it.
	raw []byte
	// choices maps a permission choice id to its decision.
	choices map[string]string
	// done receives the one resolution; buffered so the resolver never
	// blocks.
	done chan resolution
}

// resolution is how a pending request was closed.
type resolution struct {
	decision string          // permission: allow | allow_always | deny
	choiceID string          // permission: set when the answer used choice_id
	value    json.RawMessage // ui: the answer; nil means null
	source   string          // echoed in the resolved event
	by       resolvedBy      // who closed it; decides what the turn does next
}

// runtime is the state of one Run. Its methods ending in Locked require mu.
type runtime struct {
	opts   Options
	log    *slog.Logger
	ids    *idGen
	runCtx context.Context
	cancel context.CancelCauseFunc
	models *models
	// tools are the registered tools by name; toolSpecs what the model is
	// told about the available ones. Both are immutable.
	tools     map[string]tool
	toolSpecs []provider.ToolSpec
	// turns tracks the goroutines of turns and between-turn compactions;
	// shutdown waits for it.
	turns sync.WaitGroup

	// mu protects the following, and serialises every write to Stdout so
	// that state and the events announcing it change together. It is never
	// held across a transcript fsync (session: write under mu, then
	// awaitDurable without it, then announce under mu again).
	mu        sync.Mutex
	status    protocol.AgentStatus
	mode      string
	window    []protocol.Message // the live window (after the latest compaction)
	pending   []*pendingRequest
	turn      *turnState     // nil when idle
	followUps []queuedPrompt // queued follow_up prompts, oldest first
	// delivered: ids of dedupe-keyed prompts accepted (transcript + this run).
	delivered map[string]bool
	grants    *grants // allow_always grants
	closing   bool    // shutdown began: no new turns
	hung      bool    // `sim: hang` ran: nothing is written or answered again
	writeErr  error   // first Stdout write failure; nothing is written after it
	sess      *session
	active    protocol.ModelDescriptor // the model of the next provider call
	reasoning string                   // selected reasoning level; "" is the model's default
	// meta holds the thinking signatures of live-window blocks, for
	// providers that need them back (Anthropic), and the exit codes of tool
	// results (bash), which the model sees as text (requestLocked).
	meta windowMeta
	// compacting is the between-turn compaction running; nil when none.
	compacting *compactJob
	// compactionIndex is the latest compaction's index (0: none) and
	// summaryID the id of its summary, window[0].
	compactionIndex int
	summaryID       string
	// lastContext is the context_tokens the last provider call reported
	// (0 after a compaction): a real provider's count includes the system
	// prompt and tools, which the window estimate does not.
	lastContext int64
	// trimTimer runs Options.Trim once the runtime has stayed idle.
	trimTimer *time.Timer
}

func newRuntime(ctx context.Context, cancel context.CancelCauseFunc, opts Options, log *slog.Logger, ids *idGen, sess *session, st *sessionState, grants *grants, models *models) *runtime {
	r := &runtime{
		opts:            opts,
		log:             log,
		ids:             ids,
		runCtx:          ctx,
		cancel:          cancel,
		models:          models,
		status:          protocol.StatusIdle,
		mode:            opts.Mode,
		window:          st.window,
		grants:          grants,
		sess:            sess,
		active:          models.initial,
		meta:            st.meta,
		compactionIndex: st.compactionIndex,
		summaryID:       st.summaryID,
		delivered:       st.delivered,
	}
	if r.delivered == nil {
		r.delivered = map[string]bool{}
	}
	r.tools, r.toolSpecs = r.newTools()
	return r
}

// start writes hello and the initial sync (direct-connection form: no
// agent_id, no runtime_epoch).
func (r *runtime) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(protocol.Hello{
		Header:          protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version,
		ServerVersion:   r.opts.ServerVersion,
		Capabilities:    r.capabilitiesLocked(),
	})
	r.emitLocked(protocol.Sync{
		Header:          protocol.Header{Type: protocol.TypeSync},
		Status:          r.status,
		Mode:            r.mode,
		Capabilities:    r.capabilitiesLocked(),
		LiveWindow:      r.liveWindowLocked(),
		PendingRequests: r.pendingRawLocked(),
	})
	r.armTrimLocked()
	r.log.Info("runtime started", "messages", len(r.window), "compaction_index", r.compactionIndex,
		"mode", r.mode, "provider", r.models.name, "model", r.active.ID, "headless_policy", r.opts.HeadlessPolicy)
}

// shutdown stops accepting turns, aborts the current one and waits for it.
// After `sim: hang` the turn goroutine returns only when Run's context is
// done, so shutdown waits for that too.
func (r *runtime) shutdown() {
	r.mu.Lock()
	r.closing = true
	r.armTrimLocked() // closing: stops it
	r.abortLocked()
	r.mu.Unlock()
	r.turns.Wait()
}

// writeError returns the Stdout write failure, if any.
func (r *runtime) writeError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeErr
}

// ---- output ----

// emitLocked writes one typed message.
func (r *runtime) emitLocked(v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		r.log.Error("encode message", slog.Any("err", err))
		return
	}
	r.writeLocked(b)
}

// writeLocked writes one encoded record and its newline in a single Write.
// A write failure is remembered and ends the run: the peer is gone.
func (r *runtime) writeLocked(rec []byte) {
	if r.hung || r.writeErr != nil {
		return
	}
	line := make([]byte, len(rec)+1)
	copy(line, rec)
	line[len(rec)] = '\n'
	if _, err := r.opts.Stdout.Write(line); err != nil {
		r.writeErr = fmt.Errorf("agent: write stdout: %w", err)
		r.log.Error("stdout write failed; stopping", slog.Any("err", err))
		r.cancel(r.writeErr)
	}
}

// setStatusLocked changes the status and announces a real change.
func (r *runtime) setStatusLocked(s protocol.AgentStatus) {
	if r.status == s {
		return
	}
	r.status = s
	r.emitLocked(protocol.Status{Header: protocol.Header{Type: protocol.TypeStatus}, Status: s})
	r.armTrimLocked()
}

// armTrimLocked starts the idle-trim timer when the runtime is idle and
// stops it otherwise (Options.Trim). A timer that fires just as a turn
// starts trims anyway: harmless, the pages fault back in.
func (r *runtime) armTrimLocked() {
	if r.opts.Trim == nil {
		return
	}
	if r.trimTimer != nil {
		r.trimTimer.Stop()
		r.trimTimer = nil
	}
	if r.status == protocol.StatusIdle && !r.closing {
		r.trimTimer = time.AfterFunc(r.opts.TrimAfter, r.opts.Trim)
	}
}

// appendWindowLocked adds a message to the live window and writes it to the
// transcript; the entry is on disk once awaitDurable(ticket) returned.
func (r *runtime) appendWindowLocked(m protocol.Message) writeTicket {
	r.window = append(r.window, m)
	return r.persistLocked(m)
}

// persistLocked writes the live-window message m, with its meta, to the
// transcript (in state order: mu is held) and returns the ticket to pass to
// awaitDurable, which the caller calls after releasing mu and before it
// announces anything that depends on the entry (session: the lock is never
// held across an fsync). A failed write is logged and reported with a
// non-fatal error event: the message stays in the live window but would be
// missing after a restart.
func (r *runtime) persistLocked(m protocol.Message) writeTicket {
	t, err := r.sess.write(r.meta.entryFor(m, time.Now()))
	if err != nil {
		r.persistFailedLocked(err)
	}
	return t
}

// awaitDurable returns once the entry of t (and every one before it) is
// fsynced. mu must not be held. A failed sync is reported as persistLocked
// reports a failed write.
func (r *runtime) awaitDurable(t writeTicket) {
	if err := r.sess.durable(t); err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.persistFailedLocked(err)
	}
}

// persistFailedLocked reports a transcript write or sync that failed.
func (r *runtime) persistFailedLocked(err error) {
	r.log.Error("session append failed", slog.Any("err", err))
	r.emitLocked(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeInternal,
		Message: "the session transcript could not be written; this message will be missing after a restart"})
}

// windowLocked returns the window for encoding (never nil).
func (r *runtime) windowLocked() []protocol.Message {
	if r.window == nil {
		return []protocol.Message{}
	}
	return r.window
}

// liveWindowLocked is the live window of sync and get_sync.
func (r *runtime) liveWindowLocked() protocol.LiveWindow {
	lw := protocol.LiveWindow{Messages: r.windowLocked()}
	if r.compactionIndex > 0 {
		idx := r.compactionIndex
		lw.CompactionIndex = &idx
	}
	return lw
}

// pendingRawLocked returns the open requests as emitted (never nil).
func (r *runtime) pendingRawLocked() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(r.pending))
	for _, p := range r.pending {
		out = append(out, p.raw)
	}
	return out
}

func (r *runtime) respondLocked(h protocol.Header, data any) {
	r.writeLocked(protocol.NewResponse(h.ID, h.Type, data))
}

func (r *runtime) respondErrLocked(h protocol.Header, err error) {
	r.writeLocked(protocol.NewErrorResponse(h.ID, h.Type, err))
}

// ---- input ----

// readLoop reads and handles commands until Stdin ends. It returns nil at
// EOF.
func (r *runtime) readLoop() error {
	rd := protocol.NewReader(r.opts.Stdin, 0)
	for {
		rec, err := rd.Next()
		switch {
		case errors.Is(err, protocol.ErrRecordTooLong):
			r.mu.Lock()
			if !r.hung {
				r.respondErrLocked(protocol.Header{}, protocol.Errorf(protocol.CodeInvalidRequest, "record exceeds %d bytes", protocol.DefaultMaxRecord))
			}
			r.mu.Unlock()
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("agent: read stdin: %w", err)
		}
		r.handle(rec)
	}
}

// handle answers one command record. It never waits for a turn: every
// branch only changes state under mu.
func (r *runtime) handle(rec []byte) {
	cmd, h, err := protocol.DecodeCommand(rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hung {
		return
	}
	if err != nil {
		r.respondErrLocked(h, err)
		return
	}
	switch c := cmd.(type) {
	case *protocol.Prompt:
		r.promptLocked(h, c.Message, c.StreamingBehavior, c.DedupeKey)
	case *protocol.Steer:
		if c.Strict {
			r.strictSteerLocked(h, c.Message)
			return
		}
		r.promptLocked(h, c.Message, protocol.BehaviorSteer, "")
	case *protocol.Abort:
		r.abortLocked()
		r.respondLocked(h, nil)
	case *protocol.GetSync:
		r.respondLocked(h, protocol.GetSyncData{
			Status:          r.status,
			Mode:            r.mode,
			Capabilities:    r.capabilitiesLocked(),
			LiveWindow:      r.liveWindowLocked(),
			PendingRequests: r.pendingRawLocked(),
		})
	case *protocol.PermissionResponse:
		r.permissionResponseLocked(h, c)
	case *protocol.UIResponse:
		r.uiResponseLocked(h, c)
	case *protocol.ListModes:
		r.respondLocked(h, listModesData{Modes: modeCatalog(), Active: r.mode})
	case *protocol.SetMode:
		r.setModeLocked(h, c.Mode)
	case *protocol.ListModels:
		r.listModelsLocked(h)
	case *protocol.SetModel:
		r.setModelLocked(h, c.Model)
	case *protocol.ListReasoningLevels:
		r.listReasoningLocked(h)
	case *protocol.SetReasoningLevel:
		r.setReasoningLocked(h, c.Model, c.Effort)
	case *protocol.SessionOp:
		r.sessionOpLocked(h, c)
	default:
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not supported by this runtime", h.Type))
	}
}

// promptLocked handles prompt and steer. Idle: the prompt starts a turn
// (whatever its streaming_behavior). Mid-turn: steer is delivered before the
// turn's next provider call; follow_up runs as a new turn afterwards. A steer
// that reaches a turn already aborting is queued as a follow-up rather than
// lost. While a between-turn compaction runs, a prompt waits for it.
func (r *runtime) promptLocked(h protocol.Header, text, behavior, dedupeKey string) {
	q := queuedPrompt{text: text}
	if dedupeKey != "" {
		// A repeat of a prompt already delivered (a completion report the
		// daemon re-sent after a crash) is acknowledged, not run again.
		q.id = dedupeID(dedupeKey)
		if r.delivered[q.id] {
			r.respondLocked(h, map[string]bool{"duplicate": true})
			return
		}
	}
	t := r.turn
	switch {
	case r.closing:
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeConflict, "runtime is shutting down"))
		return
	case t == nil && r.compacting != nil:
		r.followUps = append(r.followUps, q)
		r.respondLocked(h, nil)
	case t == nil:
		r.respondLocked(h, nil)
		r.startTurnLocked(q)
	case behavior == "":
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "streaming_behavior": required while a turn is in flight`))
		return
	case behavior == protocol.BehaviorSteer && !t.aborted:
		t.steers = append(t.steers, q)
		r.respondLocked(h, nil)
	default:
		r.followUps = append(r.followUps, q)
		r.respondLocked(h, nil)
	}
	if q.id != "" {
		r.delivered[q.id] = true
	}
}

// queuedPrompt is a user message waiting for its turn (or its provider
// boundary); id is preset for dedupe-keyed prompts.
type queuedPrompt struct {
	text, id string
}

// strictSteerLocked accepts a steer only into a turn in flight (the
// daemon's subagent.steer): it is delivered before the turn's next provider
// call — the runtime adds one if the last call is already running — and is
// never kept for a later turn. Without such a turn it answers CONFLICT.
func (r *runtime) strictSteerLocked(h protocol.Header, text string) {
	t := r.turn
	if r.closing || t == nil || t.aborted {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeConflict, "no turn in flight to steer"))
		return
	}
	t.steers = append(t.steers, queuedPrompt{text: text})
	r.respondLocked(h, protocol.SteerData{TurnID: t.id})
}

// abortLocked cancels the current turn, closes its open requests with
// source "abort" and drops queued steers and follow-ups (so the agent
// actually goes idle, as kill escalation expects). A between-turn
// compaction is cancelled. Idle: nothing happens.
func (r *runtime) abortLocked() {
	r.followUps = nil
	if r.compacting != nil {
		r.compacting.cancel()
	}
	t := r.turn
	if t == nil || t.aborted {
		return
	}
	t.aborted = true
	t.steers = nil
	t.cancel()
	for len(r.pending) > 0 {
		r.resolveLocked(r.pending[0], resolution{decision: protocol.DecisionDeny, source: sourceAbort, by: byAbort})
	}
}

func (r *runtime) setModeLocked(h protocol.Header, mode string) {
	if !knownMode(mode) {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "mode %q not found", mode))
		return
	}
	prev := r.mode
	if mode != prev {
		r.mode = mode
		r.emitLocked(protocol.ModeChanged{Header: protocol.Header{Type: protocol.TypeModeChanged}, PreviousMode: prev, Mode: mode})
	}
	r.respondLocked(h, setModeData{PreviousMode: prev, Mode: mode})
}

// ---- permission and UI requests ----

// findPendingLocked returns the open request with id, or nil.
func (r *runtime) findPendingLocked(id string) *pendingRequest {
	for _, p := range r.pending {
		if p.id == id {
			return p
		}
	}
	return nil
}

// openLocked registers p, writes its event and moves to the waiting status.
func (r *runtime) openLocked(p *pendingRequest, waiting protocol.AgentStatus) {
	r.pending = append(r.pending, p)
	r.writeLocked(p.raw)
	r.setStatusLocked(waiting)
}

// resolveLocked closes an open request: it writes the resolved event,
// returns the status to streaming and hands the resolution to the waiting
// turn. It runs at most once per request (p leaves r.pending here).
func (r *runtime) resolveLocked(p *pendingRequest, res resolution) {
	i := slices.Index(r.pending, p)
	if i < 0 {
		return
	}
	r.pending = slices.Delete(r.pending, i, i+1)
	switch p.kind {
	case kindPermission:
		ev := protocol.PermissionResolved{Header: protocol.Header{Type: protocol.TypePermissionResolved}, RequestID: p.id, Source: res.source}
		if res.choiceID != "" {
			ev.ChoiceID = res.choiceID
		} else {
			ev.Decision = res.decision
		}
		r.emitLocked(ev)
	case kindUI:
		r.emitLocked(protocol.UIResolved{Header: protocol.Header{Type: protocol.TypeUIResolved}, RequestID: p.id, Value: res.value, Source: res.source})
	}
	if r.turn != nil && len(r.pending) == 0 {
		r.setStatusLocked(protocol.StatusStreaming)
	}
	p.done <- res
}

// resolveIfOpen resolves p unless an answer already won.
func (r *runtime) resolveIfOpen(p *pendingRequest, res resolution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolveLocked(p, res)
}

func (r *runtime) permissionResponseLocked(h protocol.Header, c *protocol.PermissionResponse) {
	p := r.findPendingLocked(c.RequestID)
	if p == nil { // late or unknown: dropped silently (wire spec §6.3)
		r.respondLocked(h, nil)
		return
	}
	if p.kind != kindPermission {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "request_id": %s is a ui request`, c.RequestID))
		return
	}
	res := resolution{decision: c.Decision, source: cmp.Or(c.Source, sourceClient)}
	if c.ChoiceID != "" {
		dec, ok := p.choices[c.ChoiceID]
		if !ok { // the request stays open; another answer may win
			r.respondErrLocked(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "choice_id": unknown choice %q for request %s`, c.ChoiceID, c.RequestID))
			return
		}
		res.decision, res.choiceID = dec, c.ChoiceID
	}
	r.resolveLocked(p, res)
	r.respondLocked(h, nil)
}

func (r *runtime) uiResponseLocked(h protocol.Header, c *protocol.UIResponse) {
	p := r.findPendingLocked(c.RequestID)
	if p == nil {
		r.respondLocked(h, nil)
		return
	}
	if p.kind != kindUI {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "request_id": %s is a permission request`, c.RequestID))
		return
	}
	value := c.Value
	if string(value) == "null" {
		value = nil
	}
	r.resolveLocked(p, resolution{value: value, source: cmp.Or(c.Source, sourceClient)})
	r.respondLocked(h, nil)
}
