package adapter

import (
	"encoding/json"
	"slices"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/tools"
)

// Roles of live-window messages.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// userInput is a user message: its text and images, with the blocks that
// name the images in the window (stored by the Host's image store).
type userInput struct {
	text   string
	images []protocol.Image
	blocks []protocol.ContentBlock
}

// startTurnLocked opens a turn for a user message and runs it.
func (h *Host) startTurnLocked(in userInput) {
	t := h.newTurnLocked()
	h.turn = t
	h.setStatusLocked(protocol.StatusStreaming)
	h.emitLocked(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart}, TurnID: t.id})
	content := slices.Clone(in.blocks)
	if in.text != "" || len(content) == 0 {
		content = append(content, protocol.ContentBlock{Type: protocol.BlockText, Text: in.text})
	}
	h.window = append(h.window, protocol.Message{ID: h.nextIDLocked("msg"), Role: roleUser, Content: content})
	// Never refused: no turn starts once h.closing is set (under mu), and
	// Run closes the group only after setting it.
	h.turns.Go(func() {
		res, err := h.b.Prompt(h.life, in.text, in.images)
		h.endTurn(t, res, err)
	})
}

// endTurn closes t: its messages enter the window, usage and turn_end are
// written, and the next follow-up (if any) starts.
func (h *Host) endTurn(t *turn, res TurnResult, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked(t)
	if err != nil {
		h.log.Warn("turn failed", "err", err)
		h.emitLocked(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeProviderError,
			Message: "the agent failed the turn: " + err.Error()})
	}
	for len(h.pending) > 0 { // the agent ended the turn with a request open
		h.resolveLocked(h.pending[0], Answer{Cancelled: true}, "", "abort")
	}
	h.saveWindowLocked() // before turn_end: a client that saw it finds the turn after a resume

	u := res.Usage
	if u == nil {
		u = t.usage
	}
	if res.ContextWindow > 0 {
		// The agent's window (ACP usage_update size) is the active model's.
		if i := slices.IndexFunc(h.offer.Models, func(m protocol.ModelDescriptor) bool { return m.ID == h.offer.Model }); i >= 0 {
			h.offer.Models[i].ContextWindow = res.ContextWindow
		}
	}
	if u != nil {
		h.emitLocked(protocol.UsageEvent{Header: protocol.Header{Type: protocol.TypeUsage}, Usage: *u})
	}
	reason := res.StopReason
	if t.aborted {
		reason = StopCancelled
	}
	h.emitLocked(protocol.TurnEnd{Header: protocol.Header{Type: protocol.TypeTurnEnd}, TurnID: t.id, Usage: u, StopReason: reason})
	h.turn = nil
	h.setStatusLocked(protocol.StatusIdle)
	if len(h.followUps) > 0 && !h.closing {
		next := h.followUps[0]
		h.followUps = h.followUps[1:]
		h.startTurnLocked(next)
	}
}

// abortLocked cancels the turn in flight: the agent is told, and every
// open permission request is answered "cancelled" (as ACP requires).
func (h *Host) abortLocked() {
	t := h.turn
	for len(h.pending) > 0 {
		h.resolveLocked(h.pending[0], Answer{Cancelled: true}, protocol.DecisionDeny, "abort")
	}
	if t == nil || t.aborted {
		return
	}
	t.aborted = true
	h.b.Cancel()
}

// current is the turn events belong to: the replay before hello, else the
// turn in flight (nil: an update outside any turn, which is dropped).
func (h *Host) currentLocked() *turn {
	if !h.started {
		return h.replay
	}
	return h.turn
}

// assistantLocked returns t's assistant message being streamed, starting
// one (after moving tool results into the window) when there is none.
func (h *Host) assistantLocked(t *turn) *protocol.Message {
	if t.results != nil {
		h.window = append(h.window, *t.results)
		t.results = nil
	}
	if t.msg == nil {
		t.msg = &protocol.Message{ID: h.nextIDLocked("msg"), Role: roleAssistant}
	}
	return t.msg
}

// flushLocked moves what t assembled into the window; an assistant
// message is announced with message_complete.
func (h *Host) flushLocked(t *turn) {
	if t == nil {
		return
	}
	if t.msg != nil {
		m := *t.msg
		t.msg = nil
		h.window = append(h.window, m)
		if h.started {
			h.emitLocked(protocol.MessageComplete{Header: protocol.Header{Type: protocol.TypeMessageComplete}, MessageID: m.ID, Message: m})
		}
	}
	if t.results != nil {
		h.window = append(h.window, *t.results)
		t.results = nil
	}
}

// UserText implements Events (a load's replay: each user message closes
// the assistant message before it).
func (h *Host) UserText(text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.currentLocked()
	if t == nil || h.started {
		return
	}
	h.flushLocked(t)
	if m := h.replayedUserLocked(); m != nil {
		if k := len(m.Content) - 1; m.Content[k].Type == protocol.BlockText {
			m.Content[k].Text += text // chunks of one message
			return
		}
		m.Content = append(m.Content, protocol.ContentBlock{Type: protocol.BlockText, Text: text})
		return
	}
	h.window = append(h.window, protocol.Message{ID: h.nextIDLocked("msg"), Role: roleUser,
		Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: text}}})
}

// replayedUserLocked is the user message a load's replay is building (the
// window's last message, when it is a user message of text and images),
// nil when the next chunk starts a new one.
func (h *Host) replayedUserLocked() *protocol.Message {
	n := len(h.window)
	if n == 0 || h.window[n-1].Role != roleUser || len(h.window[n-1].Content) == 0 {
		return nil
	}
	m := &h.window[n-1]
	for _, b := range m.Content {
		if b.Type != protocol.BlockText && b.Type != protocol.BlockImage {
			return nil
		}
	}
	return m
}

// UserImage implements Events (a load's replay): the image is kept like a
// prompt's (file I/O, without mu) and joins the user message being
// replayed. One that cannot be kept is left out of the window, and logged.
func (h *Host) UserImage(im protocol.Image) {
	h.mu.Lock()
	started := h.started
	h.mu.Unlock()
	if started {
		return
	}
	b, err := h.images.Put(im)
	if err != nil {
		h.log.Warn("a replayed image cannot be kept", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.currentLocked()
	if t == nil || h.started {
		return
	}
	h.flushLocked(t)
	if m := h.replayedUserLocked(); m != nil {
		m.Content = append(m.Content, b)
		return
	}
	h.window = append(h.window, protocol.Message{ID: h.nextIDLocked("msg"), Role: roleUser, Content: []protocol.ContentBlock{b}})
}

// Text implements Events.
func (h *Host) Text(text string) { h.chunk(protocol.BlockText, text) }

// Thinking implements Events.
func (h *Host) Thinking(text string) { h.chunk(protocol.BlockThinking, text) }

func (h *Host) chunk(kind, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.currentLocked()
	if t == nil || text == "" {
		return
	}
	m := h.assistantLocked(t)
	n := len(m.Content)
	if n == 0 || m.Content[n-1].Type != kind {
		m.Content = append(m.Content, protocol.ContentBlock{Type: kind})
		n++
	}
	m.Content[n-1].Text += text
	if h.started {
		h.emitLocked(protocol.MessageDelta{Header: protocol.Header{Type: protocol.TypeMessageDelta}, MessageID: m.ID,
			BlockIndex: n - 1, Kind: kind, TextDelta: text})
	}
}

// ToolCall implements Events. A new call closes the assistant message
// (tool_call block and message_complete); tool_call is written once the
// call leaves pending (after its permission), tool_result once it is
// completed or failed.
func (h *Host) ToolCall(tc Tool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.currentLocked()
	if t == nil {
		return
	}
	st := t.tools[tc.ID]
	if st == nil {
		st = &toolState{}
		t.tools[tc.ID] = st
		m := h.assistantLocked(t)
		m.Content = append(m.Content, protocol.ContentBlock{Type: protocol.BlockToolCall, ID: tc.ID, Name: tc.Name, Args: tc.Args})
		if h.started {
			args, _ := json.Marshal(argsOrEmpty(tc.Args))
			h.emitLocked(protocol.MessageDelta{Header: protocol.Header{Type: protocol.TypeMessageDelta}, MessageID: m.ID,
				BlockIndex: len(m.Content) - 1, Kind: protocol.DeltaToolCall, ToolCallID: tc.ID, Name: tc.Name, ArgsDelta: string(args)})
		}
		h.flushLocked(t)
	}
	terminal := tc.Status == ToolCompleted || tc.Status == ToolFailed
	if !st.announced && (tc.Status != ToolPending && tc.Status != "" || terminal) {
		st.announced = true
		if h.started {
			ro := tc.ReadOnly
			h.emitLocked(protocol.ToolCall{Header: protocol.Header{Type: protocol.TypeToolCall}, ToolCallID: tc.ID, Name: tc.Name,
				Args: argsOrEmpty(tc.Args), Render: diffRender(tc), ReadOnly: &ro})
		}
	}
	if terminal && !st.finished {
		st.finished = true
		content := protocol.ToolResultContent{Kind: "text", Text: tc.Output}
		block := protocol.ContentBlock{Type: protocol.BlockToolResult, ToolCallID: tc.ID, Content: &content, IsError: tc.Status == ToolFailed}
		if t.results == nil {
			t.results = &protocol.Message{ID: h.nextIDLocked("msg"), Role: roleUser}
		}
		t.results.Content = append(t.results.Content, block)
		if h.started {
			h.emitLocked(protocol.ToolResult{Header: protocol.Header{Type: protocol.TypeToolResult}, ToolCallID: tc.ID,
				Content: content, IsError: block.IsError, Render: diffRender(tc)})
		}
	}
}

func argsOrEmpty(a map[string]any) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	return a
}

// diffRender is the diff descriptor of the call's first file change, nil
// when it shows none.
func diffRender(tc Tool) *protocol.RenderDescriptor {
	if len(tc.Diffs) == 0 {
		return nil
	}
	d := tc.Diffs[0]
	return tools.DiffRender(d.Path, d.Old, d.New)
}
