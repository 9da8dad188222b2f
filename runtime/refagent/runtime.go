package refagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
)

// runtime coordinates one Run. It owns the lock and the parts that hold
// the state, each with its own file:
//
//   - out (output.go): the Stdout writer;
//   - status (status.go): the agent status and the idle-trim timer;
//   - sel (models.go): the mode, model and reasoning selection;
//   - conv (conversation.go, compaction.go, sessionop.go): the live window
//     and the session transcript behind it (session.go);
//   - reqs (requests.go): the open permission and UI requests;
//   - loop (turn.go): the turn in flight, queued follow-ups, the
//     between-turn compaction, shutdown;
//   - grants (grants.go): the allow_always grants, with a lock of their own;
//   - tools (tools.go, subagent.go): the tools, an immutable toolbox that
//     a new one replaces when an MCP server's tools change (reloadTools).
//
// The runtime's own methods handle commands and move work between the
// parts: starting and ending turns, compacting between turns, session_op.
// The turn's goroutine runs on turnState (turn.go).
//
// mu protects the state of status, sel, conv, reqs and loop, and is held
// for every write to out, so that a state change and the event announcing
// it are one step: the answer to get_sync (the daemon's resync read)
// reflects exactly the events written before it. Methods ending in Locked,
// of the runtime and of its parts, must be called with mu held. mu is
// never held across a transcript fsync (awaitDurable) nor while a turn
// waits for a provider or a tool. Lock order: mu, then out.mu or the
// session's locks (see session); grants.mu is taken without mu.
type runtime struct {
	opts   Options
	log    *slog.Logger
	ids    *idGen
	runCtx context.Context
	// tools are the tools the next provider call offers: a new toolbox
	// replaces them when an MCP server's tools change (reloadTools).
	tools atomic.Pointer[toolbox]
	// prompt is what the system prompt carries besides the runtime's own
	// text (sysprompt.go); immutable, read without mu.
	prompt promptContext
	// work tracks the goroutines of turns and between-turn compactions;
	// shutdown waits for it.
	work sync.WaitGroup

	mu     sync.Mutex
	out    *output
	status *agentStatus
	sel    *selection
	conv   *conversation
	reqs   *requests
	loop   *turnLoop
	grants *grants
	// images keeps the session's images (docs/protocol.md §13 P4); it is
	// safe for concurrent use and does file I/O, so it is used without mu.
	images *images.Store
}

func newRuntime(ctx context.Context, cancel context.CancelCauseFunc, opts Options, log *slog.Logger, ids *idGen, sess *session, st *sessionState, grants *grants, models *models) *runtime {
	out := newOutput(opts.Stdout, log, cancel)
	status := newAgentStatus(out, opts.Trim, opts.TrimAfter)
	r := &runtime{
		opts:   opts,
		log:    log,
		ids:    ids,
		runCtx: ctx,
		out:    out,
		status: status,
		sel:    newSelection(out, models, opts.Mode, loadReasoning(opts.SessionDir, log)),
		conv: &conversation{
			out:             out,
			log:             log,
			ids:             ids,
			store:           sess,
			sessionID:       sessionID(opts),
			window:          st.window,
			meta:            st.meta,
			compactionIndex: st.compactionIndex,
			summaryID:       st.summaryID,
			reported:        models.entry(models.initial).real != nil,
		},
		reqs:   &requests{out: out, status: status},
		loop:   &turnLoop{delivered: st.delivered},
		grants: grants,
		images: images.Open(opts.SessionDir),
	}
	if r.loop.delivered == nil {
		r.loop.delivered = map[string]bool{}
	}
	r.prompt = loadPromptContext(opts, log)
	tb := newToolbox(opts, log, r.currentMode, r.prompt.skills)
	r.tools.Store(&tb)
	return r
}

// currentTools are the tools a provider call made now offers.
func (r *runtime) currentTools() *toolbox { return r.tools.Load() }

// reloadTools rebuilds the toolbox with the MCP servers' current tools, so
// that the next provider call offers them; a call in flight keeps the
// tools it offered (docs/protocol.md §10.1). The rebuilt toolbox is
// limited by the agent's tools like the first.
func (r *runtime) reloadTools() {
	tb := newToolbox(r.opts, r.log, r.currentMode, r.prompt.skills)
	r.tools.Store(&tb)
}

// sessionID is the session's id: Options.SessionID, or else the name of
// the session directory.
func sessionID(opts Options) string {
	if opts.SessionID == "" && opts.SessionDir != "" {
		return filepath.Base(opts.SessionDir)
	}
	return opts.SessionID
}

// start writes hello and the initial sync (direct-connection form: no
// agent_id, no runtime_epoch).
func (r *runtime) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out.emit(protocol.Hello{
		Header:          protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version,
		ServerVersion:   r.opts.ServerVersion,
		Capabilities:    r.sel.capabilitiesLocked(),
	})
	r.out.emit(protocol.Sync{
		Header:          protocol.Header{Type: protocol.TypeSync},
		Status:          r.status.cur,
		Mode:            r.sel.mode,
		Capabilities:    r.sel.capabilitiesLocked(),
		LiveWindow:      r.conv.liveLocked(),
		PendingRequests: r.reqs.rawLocked(),
	})
	r.status.armLocked()
	r.log.Info("runtime started", "messages", len(r.conv.window), "compaction_index", r.conv.compactionIndex,
		"mode", r.sel.mode, "provider", r.sel.active.Provider, "model", r.sel.active.ID, "headless_policy", r.opts.HeadlessPolicy)
}

// shutdown stops accepting turns, aborts the current one and waits for it.
// After `sim: hang` the turn goroutine returns only when Run's context is
// done, so shutdown waits for that too.
func (r *runtime) shutdown() {
	r.mu.Lock()
	r.loop.closing = true
	r.status.stopLocked()
	r.abortLocked()
	r.mu.Unlock()
	r.work.Wait()
}

// writeError returns the Stdout write failure, if any.
func (r *runtime) writeError() error {
	return r.out.failure()
}

// currentMode is the selected mode, for work that runs without mu (the
// subagent tool creates children in it).
func (r *runtime) currentMode() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sel.mode
}

// awaitDurable returns once the transcript entry of t (and every one
// before it) is fsynced. mu must not be held: the point is that a slow
// disk delays only the work that wrote. A failed sync is reported as
// conversation.persistLocked reports a failed write.
func (r *runtime) awaitDurable(t writeTicket) {
	if err := r.conv.store.durable(t); err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.conv.persistFailedLocked(err)
	}
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
			if !r.out.isHung() {
				r.out.respondErr(protocol.Header{}, protocol.Errorf(protocol.CodeInvalidRequest, "record exceeds %d bytes", protocol.DefaultMaxRecord))
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
	if gi, ok := cmd.(*protocol.GetImage); ok && err == nil {
		r.getImage(h, gi.SHA256)
		return
	}
	switch c := cmd.(type) {
	case *protocol.SetReasoningLevel: // these save the session's level without mu (reasoning.go)
		if err == nil {
			r.setReasoning(h, c.Model, c.Effort)
			return
		}
	case *protocol.SetModel:
		if err == nil {
			r.setModel(h, c.Model)
			return
		}
	}
	var imgs []protocol.ContentBlock
	if err == nil {
		imgs, err = r.storeImages(cmd)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out.isHung() {
		return
	}
	if err != nil {
		r.out.respondErr(h, err)
		return
	}
	switch c := cmd.(type) {
	case *protocol.Prompt:
		r.promptLocked(h, queuedPrompt{text: c.Message, images: imgs}, c.StreamingBehavior, c.DedupeKey)
	case *protocol.Steer:
		if c.Strict {
			r.strictSteerLocked(h, queuedPrompt{text: c.Message, images: imgs})
			return
		}
		r.promptLocked(h, queuedPrompt{text: c.Message, images: imgs}, protocol.BehaviorSteer, "")
	case *protocol.Abort:
		r.abortLocked()
		r.out.respond(h, nil)
	case *protocol.GetSync:
		r.out.respond(h, protocol.GetSyncData{
			Status:          r.status.cur,
			Mode:            r.sel.mode,
			Capabilities:    r.sel.capabilitiesLocked(),
			LiveWindow:      r.conv.liveLocked(),
			PendingRequests: r.reqs.rawLocked(),
		})
	case *protocol.PermissionResponse:
		r.reqs.permissionResponseLocked(h, c)
	case *protocol.UIResponse:
		r.reqs.uiResponseLocked(h, c)
	case *protocol.ListModes:
		r.sel.listModesLocked(h)
	case *protocol.SetMode:
		r.sel.setModeLocked(h, c.Mode)
	case *protocol.ListModels:
		r.sel.listModelsLocked(h)
	case *protocol.ListReasoningLevels:
		r.sel.listReasoningLocked(h)
	case *protocol.SessionOp:
		r.sessionOpLocked(h, c)
	default:
		r.out.respondErr(h, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not supported by this runtime", h.Type))
	}
}

// promptLocked handles prompt and steer. Idle: the prompt starts a turn
// (whatever its streaming_behavior). Mid-turn: steer is delivered before the
// turn's next provider call; follow_up runs as a new turn afterwards. A steer
// that reaches a turn already aborting is queued as a follow-up rather than
// lost. While a between-turn compaction runs, a prompt waits for it.
func (r *runtime) promptLocked(h protocol.Header, q queuedPrompt, behavior, dedupeKey string) {
	if dedupeKey != "" {
		// A repeat of a prompt already delivered (a completion report the
		// daemon re-sent after a crash) is acknowledged, not run again.
		q.id = dedupeID(dedupeKey)
		if r.loop.delivered[q.id] {
			r.out.respond(h, map[string]bool{"duplicate": true})
			return
		}
	}
	l := r.loop
	t := l.cur
	switch {
	case l.closing:
		r.out.respondErr(h, protocol.Errorf(protocol.CodeConflict, "runtime is shutting down"))
		return
	case t == nil && l.compacting != nil:
		l.followUps = append(l.followUps, q)
		r.out.respond(h, nil)
	case t == nil:
		r.out.respond(h, nil)
		r.startTurnLocked(q)
	case behavior == "":
		r.out.respondErr(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "streaming_behavior": required while a turn is in flight`))
		return
	case behavior == protocol.BehaviorSteer && !t.aborted:
		t.steers = append(t.steers, q)
		r.out.respond(h, nil)
	default:
		l.followUps = append(l.followUps, q)
		r.out.respond(h, nil)
	}
	if q.id != "" {
		l.delivered[q.id] = true
	}
}

// strictSteerLocked accepts a steer only into a turn in flight (the
// daemon's subagent.steer): it is delivered before the turn's next provider
// call — the runtime adds one if the last call is already running — and is
// never kept for a later turn. It is answered only once a provider request
// carrying it is built (SteerData: it reached the model); an abort, a
// failure or the end of the turn before that answers CONFLICT
// (docs/protocol.md §10.3), as does the lack of a turn.
func (r *runtime) strictSteerLocked(h protocol.Header, q queuedPrompt) {
	t := r.loop.cur
	if r.loop.closing || t == nil || t.aborted {
		r.out.respondErr(h, protocol.Errorf(protocol.CodeConflict, "no turn in flight to steer"))
		return
	}
	q.strict = &h
	t.steers = append(t.steers, q)
}

// abortLocked cancels the current turn, closes its open requests with
// source "abort" and drops queued steers and follow-ups (so the agent
// actually goes idle, as kill escalation expects). A between-turn
// compaction is cancelled. Idle: nothing happens.
func (r *runtime) abortLocked() {
	r.loop.followUps = nil
	if j := r.loop.compacting; j != nil {
		j.cancel()
	}
	t := r.loop.cur
	if t == nil || t.aborted {
		return
	}
	t.aborted = true
	t.refuseStrictLocked("the turn was aborted")
	t.cancel()
	r.reqs.abortAllLocked()
}

// storeImages stores the images of a prompt or steer (docs/protocol.md
// §13 P4) before the command is handled, so that the message naming them
// is written only once their files are durable, and returns their blocks.
// It runs on the reader without mu (file I/O and fsyncs), after checking
// under mu that the active model takes images: a prompt with images to one
// that does not is refused UNSUPPORTED, whole, rather than run without
// them. A model switched in between is covered by the provider call, which
// tells such a model in text that an image was there.
func (r *runtime) storeImages(cmd protocol.Command) ([]protocol.ContentBlock, error) {
	ims := images.Of(cmd)
	if len(ims) == 0 {
		return nil, nil
	}
	r.mu.Lock()
	ok, model := r.sel.imagesLocked(), r.sel.active.ID
	r.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "model %s does not take images", model)
	}
	blocks := make([]protocol.ContentBlock, 0, len(ims))
	for i, im := range ims {
		b, err := r.images.Put(im)
		if err != nil {
			if pe := protocol.AsError(err); pe.Code == protocol.CodeInvalidRequest {
				return nil, err
			}
			r.log.Error("image cannot be stored", "image", i, slog.Any("err", err))
			return nil, fmt.Errorf("%w: %w", protocol.Errorf(protocol.CodeInternal, "images[%d] cannot be stored", i), err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// getImage answers get_image from the session's images. The file is read
// without mu; only the answer takes it.
func (r *runtime) getImage(h protocol.Header, sha string) {
	im, err := r.images.Get(sha)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out.isHung() {
		return
	}
	if err != nil {
		r.out.respondErr(h, err)
		return
	}
	r.out.respond(h, im)
}
