package adapter

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
)

// readLoop handles commands until Stdin ends (nil).
func (h *Host) readLoop() error {
	rd := protocol.NewReader(h.opts.Stdin, 0)
	for {
		rec, err := rd.Next()
		switch {
		case errors.Is(err, protocol.ErrRecordTooLong):
			h.mu.Lock()
			h.respondErrLocked(protocol.Header{}, protocol.Errorf(protocol.CodeInvalidRequest, "record too long"))
			h.mu.Unlock()
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		h.handle(rec)
	}
}

// goAgent runs f, a command's round trip to the agent that answers hd,
// in the Host's group; once Run is closing the command is answered
// CONFLICT instead. mu must be held.
func (h *Host) goAgent(hd protocol.Header, f func()) {
	if h.closing || !h.turns.Go(f) {
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeConflict, "runtime is shutting down"))
	}
}

// handle answers one command. It never waits for the agent: what needs a
// round trip to it (set_mode, set_model) is answered from a goroutine.
func (h *Host) handle(rec []byte) {
	cmd, hd, err := protocol.DecodeCommand(rec)
	if gi, ok := cmd.(*protocol.GetImage); ok && err == nil {
		im, gerr := h.images.Get(gi.SHA256) // file I/O, without mu
		h.mu.Lock()
		defer h.mu.Unlock()
		if gerr != nil {
			h.respondErrLocked(hd, gerr)
			return
		}
		h.respondLocked(hd, im)
		return
	}
	var blocks []protocol.ContentBlock
	if err == nil {
		blocks, err = h.storeImages(cmd)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.respondErrLocked(hd, err)
		return
	}
	switch c := cmd.(type) {
	case *protocol.Prompt:
		h.promptLocked(hd, userInput{text: c.Message, images: c.Images, blocks: blocks}, c.StreamingBehavior, c.DedupeKey)
	case *protocol.Steer:
		if c.Strict {
			// An agent without mid-turn input cannot take a steer into the
			// turn in flight (the daemon's subagent.steer).
			h.respondErrLocked(hd, errUnsupported("steering a turn in flight"))
			return
		}
		h.promptLocked(hd, userInput{text: c.Message, images: c.Images, blocks: blocks}, protocol.BehaviorSteer, "")
	case *protocol.Abort:
		h.followUps = nil
		h.abortLocked()
		h.respondLocked(hd, nil)
	case *protocol.GetSync:
		h.respondLocked(hd, protocol.GetSyncData{Status: h.status, Mode: h.mode, Capabilities: h.capabilitiesLocked(),
			LiveWindow: h.liveWindowLocked(), PendingRequests: h.pendingRawLocked()})
	case *protocol.PermissionResponse:
		h.permissionResponseLocked(hd, c)
	case *protocol.UIResponse:
		h.respondLocked(hd, nil) // the adapter never asks UI questions: late or unknown
	case *protocol.ListModes:
		h.respondLocked(hd, struct {
			Modes  []protocol.ModeDescriptor `json:"modes"`
			Active string                    `json:"active"`
		}{h.modesLocked(), h.mode})
	case *protocol.SetMode:
		h.setModeLocked(hd, c.Mode)
	case *protocol.ListModels:
		if len(h.offer.Models) == 0 {
			h.respondErrLocked(hd, errUnsupported("a model catalog"))
			return
		}
		h.respondLocked(hd, struct {
			Models []protocol.ModelDescriptor `json:"models"`
			Active protocol.ModelDescriptor   `json:"active"`
		}{h.offer.Models, h.activeModelLocked()})
	case *protocol.SetModel:
		h.setModelLocked(hd, c.Model)
	case *protocol.ListReasoningLevels:
		if len(h.offer.Levels) == 0 {
			h.respondErrLocked(hd, errUnsupported("reasoning levels"))
			return
		}
		h.respondLocked(hd, listLevelsData{Model: h.activeModelLocked(), Levels: h.offer.Levels, Active: h.offer.Level, Effective: effectiveNext})
	case *protocol.SetReasoningLevel:
		h.setLevelLocked(hd, c.Model, c.Effort)
	case *protocol.SessionOp:
		h.respondErrLocked(hd, errUnsupported("session_op "+c.Op))
	default:
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not supported by this runtime", hd.Type))
	}
}

// promptLocked starts a turn when idle. Mid-turn, a third-party agent
// takes no input, so steer and follow_up alike wait for the turn's end and
// run as the next turn (documented in docs/protocol.md).
func (h *Host) promptLocked(hd protocol.Header, in userInput, behavior, dedupeKey string) {
	if dedupeKey != "" {
		if h.delivered[dedupeKey] {
			h.respondLocked(hd, map[string]bool{"duplicate": true})
			return
		}
	}
	switch {
	case h.closing:
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeConflict, "runtime is shutting down"))
		return
	case h.turn == nil:
		h.respondLocked(hd, nil)
		h.startTurnLocked(in)
	case behavior == "":
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeInvalidRequest, `field "streaming_behavior": required while a turn is in flight`))
		return
	default:
		h.followUps = append(h.followUps, in)
		h.respondLocked(hd, nil)
	}
	if dedupeKey != "" {
		h.delivered[dedupeKey] = true
	}
}

func (h *Host) modesLocked() []protocol.ModeDescriptor {
	if len(h.offer.Modes) == 0 {
		return []protocol.ModeDescriptor{{Name: defaultMode, Description: "The agent's only mode."}}
	}
	return h.offer.Modes
}

func (h *Host) setModeLocked(hd protocol.Header, mode string) {
	if !slices.ContainsFunc(h.modesLocked(), func(m protocol.ModeDescriptor) bool { return m.Name == mode }) {
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeNotFound, "mode %q not found", mode))
		return
	}
	prev := h.mode
	if mode == prev {
		h.respondLocked(hd, map[string]string{"previous_mode": prev, "mode": mode})
		return
	}
	h.goAgent(hd, func() {
		err := h.b.SetMode(h.life, mode)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.respondErrLocked(hd, codeOf("set_mode", err))
			return
		}
		h.changeModeLocked(mode)
		h.respondLocked(hd, map[string]string{"previous_mode": prev, "mode": mode})
	})
}

// changeModeLocked records a real mode change and announces it.
func (h *Host) changeModeLocked(mode string) {
	if mode == h.mode {
		return
	}
	prev := h.mode
	h.mode = mode
	h.emitLocked(protocol.ModeChanged{Header: protocol.Header{Type: protocol.TypeModeChanged}, PreviousMode: prev, Mode: mode})
}

// ModeChanged implements Events.
func (h *Host) ModeChanged(mode string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		h.offer.Mode = mode
		return
	}
	h.changeModeLocked(mode)
}

func (h *Host) activeModelLocked() protocol.ModelDescriptor {
	for _, m := range h.offer.Models {
		if m.ID == h.offer.Model {
			return m
		}
	}
	return protocol.ModelDescriptor{ID: h.offer.Model, Model: h.offer.Model}
}

func (h *Host) setModelLocked(hd protocol.Header, model string) {
	if len(h.offer.Models) == 0 {
		h.respondErrLocked(hd, errUnsupported("model selection"))
		return
	}
	var next *protocol.ModelDescriptor
	for i := range h.offer.Models {
		if h.offer.Models[i].ID == model {
			next = &h.offer.Models[i]
		}
	}
	if next == nil {
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeNotFound, "model %q not found", model))
		return
	}
	prev, want := h.activeModelLocked(), *next
	h.goAgent(hd, func() {
		err := h.b.SetModel(h.life, model)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.respondErrLocked(hd, codeOf("set_model", err))
			return
		}
		// The agent may have announced the switch already (ModelChanged).
		cur := h.activeModelLocked()
		h.offer.Model = model
		data := map[string]any{"previous": prev, "active": want, "effective": "next_provider_call"}
		if cur.ID != want.ID {
			h.emitLocked(protocol.ModelChanged{Header: protocol.Header{Type: protocol.TypeModelChanged}, Previous: prev, Active: want,
				Effective: "next_provider_call", Capabilities: h.capabilitiesLocked()})
		}
		h.respondLocked(hd, data)
	})
}

// storeImages keeps the images of a prompt or steer (images/ of the
// session directory, docs/protocol.md §13 P4) before the command is
// handled, and returns the blocks that name them in the window. An agent
// that takes no images refuses them UNSUPPORTED: the prompt is not run
// without them. It runs without mu (file I/O) but for the check.
func (h *Host) storeImages(cmd protocol.Command) ([]protocol.ContentBlock, error) {
	ims := images.Of(cmd)
	if len(ims) == 0 {
		return nil, nil
	}
	h.mu.Lock()
	ok := h.offer.Images
	h.mu.Unlock()
	if !ok {
		return nil, errUnsupported("images in a prompt")
	}
	blocks := make([]protocol.ContentBlock, 0, len(ims))
	for i, im := range ims {
		b, err := h.images.Put(im)
		if err != nil {
			if protocol.AsError(err).Code == protocol.CodeInvalidRequest {
				return nil, err
			}
			h.log.Error("image cannot be stored", "image", i, "err", err)
			return nil, fmt.Errorf("%w: %w", protocol.Errorf(protocol.CodeInternal, "images[%d] cannot be stored", i), err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// effectiveNext is when a selection applies (docs/protocol.md §9.2).
const effectiveNext = "next_provider_call"

// Response data of the reasoning-level commands (docs/protocol.md §9.2).
type (
	listLevelsData struct {
		Model     protocol.ModelDescriptor `json:"model"`
		Levels    []Level                  `json:"levels"`
		Active    string                   `json:"active"`
		Effective string                   `json:"effective"`
	}
	setLevelData struct {
		Model     protocol.ModelDescriptor `json:"model"`
		Previous  string                   `json:"previous"`
		Active    string                   `json:"active"`
		Effective string                   `json:"effective"`
	}
)

// setLevelLocked switches the agent's reasoning level: UNSUPPORTED for an
// agent without levels (or a Backend that cannot set them), CONFLICT when
// model is not the active model's id (a stale picker), NOT_FOUND for a
// level the agent does not offer; an idempotent set answers without an
// event. The level is the agent's session's: the agent keeps it (a
// resumed or loaded session has it again).
func (h *Host) setLevelLocked(hd protocol.Header, model, level string) {
	ls, ok := h.b.(LevelSetter)
	if len(h.offer.Levels) == 0 || !ok {
		h.respondErrLocked(hd, errUnsupported("reasoning levels"))
		return
	}
	active := h.activeModelLocked()
	if model != active.ID {
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeConflict, "model %q is not the active model %q", model, active.ID))
		return
	}
	if !slices.ContainsFunc(h.offer.Levels, func(l Level) bool { return l.ID == level }) {
		h.respondErrLocked(hd, protocol.Errorf(protocol.CodeNotFound, "reasoning level %q not found", level))
		return
	}
	prev := h.offer.Level
	if level == prev {
		h.respondLocked(hd, setLevelData{Model: active, Previous: prev, Active: level, Effective: effectiveNext})
		return
	}
	h.goAgent(hd, func() {
		err := ls.SetLevel(h.life, level)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.respondErrLocked(hd, codeOf("set_reasoning_level", err))
			return
		}
		h.changeLevelLocked(level)
		h.respondLocked(hd, setLevelData{Model: h.activeModelLocked(), Previous: prev, Active: level, Effective: effectiveNext})
	})
}

// changeLevelLocked records a real level change and announces it.
func (h *Host) changeLevelLocked(level string) {
	if level == h.offer.Level {
		return
	}
	prev := h.offer.Level
	h.offer.Level = level
	h.emitLocked(protocol.ReasoningLevelChanged{Header: protocol.Header{Type: protocol.TypeReasoningLevelChanged},
		Model: h.activeModelLocked(), Previous: prev, Active: level, Effective: effectiveNext})
}

// LevelChanged implements Events.
func (h *Host) LevelChanged(level string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		h.offer.Level = level
		return
	}
	h.changeLevelLocked(level)
}

// ModelChanged implements Events: a model of the catalog becomes the
// active one, announced with model_changed; one outside it (or the
// profile's filter) is logged and ignored.
func (h *Host) ModelChanged(model string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		h.offer.Model = model
		return
	}
	i := slices.IndexFunc(h.offer.Models, func(m protocol.ModelDescriptor) bool { return m.ID == model })
	if i < 0 {
		h.log.Info("the agent switched to a model outside the catalog", "model", model)
		return
	}
	prev := h.activeModelLocked()
	if prev.ID == model {
		return
	}
	h.offer.Model = model
	h.emitLocked(protocol.ModelChanged{Header: protocol.Header{Type: protocol.TypeModelChanged}, Previous: prev, Active: h.offer.Models[i],
		Effective: effectiveNext, Capabilities: h.capabilitiesLocked()})
}
