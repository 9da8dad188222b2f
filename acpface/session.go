package acpface

import (
	"context"
	"encoding/json"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// The ids of the session's config options.
const (
	configMode      = "mode"
	configModel     = "model"
	configReasoning = "reasoning"
)

// Catalog reads' answers (docs/protocol.md §9.2).
type (
	modesData struct {
		Modes  []protocol.ModeDescriptor `json:"modes"`
		Active string                    `json:"active"`
	}
	modelsData struct {
		Models []protocol.ModelDescriptor `json:"models"`
		Active protocol.ModelDescriptor   `json:"active"`
	}
	level struct {
		ID          string `json:"id"`
		Label       string `json:"label"`
		Description string `json:"description,omitempty"`
	}
	levelsData struct {
		Levels []level `json:"levels"`
		Active string  `json:"active"`
	}
)

// tool is what the face knows of one tool call of the turn.
type tool struct {
	name     string
	args     map[string]any
	readOnly *bool
	asked    bool // a permission request was matched to it
	seq      int  // the order the face learnt of it
}

// turn is the one session/prompt waiting on the agent.
type turn struct {
	promptID  string // the prompt command's id
	accepted  bool   // its response came (in order with the events)
	started   bool   // its turn_start was seen
	turnID    string
	cancelled bool
	errEv     *protocol.ErrorEvent
	end       *protocol.TurnEnd
	err       error
	done      chan struct{}
}

// session is one open ACP session: one agent this face is attached to.
// The pump goroutine feeds it events in order (handle); the editor's
// requests read and change it under mu.
type session struct {
	f    *Face
	conn *client.Conn
	id   string

	attached chan struct{} // closed once agent.attach answered (cwd known)
	synced   chan struct{} // closed at the first sync after attach
	gone     chan struct{} // closed by fail

	mu       sync.Mutex
	replay   bool // replay the live window at the first sync
	seenSync bool
	failErr  error
	cwd      string
	title    string
	status   protocol.AgentStatus
	mode     string
	modeList []protocol.ModeDescriptor
	catalog  modelsData
	levels   levelsData
	window   int // the active model's context window
	tools    map[string]*tool
	toolSeq  int
	cur      *turn
	asks     map[string]context.CancelFunc // open editor requests by request_id
}

func newSession(f *Face, conn *client.Conn, id string, replay bool) *session {
	return &session{f: f, conn: conn, id: id, replay: replay,
		attached: make(chan struct{}), synced: make(chan struct{}), gone: make(chan struct{}),
		tools: map[string]*tool{}, asks: map[string]context.CancelFunc{}}
}

// fail ends the session: a waiting prompt or open gets err.
func (s *session) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failErr != nil {
		return
	}
	s.failErr = err
	close(s.gone)
	if t := s.cur; t != nil && t.end == nil && t.err == nil {
		t.err = err
		close(t.done)
	}
	for id, cancel := range s.asks {
		cancel()
		delete(s.asks, id)
	}
}

func (s *session) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failErr
}

// request sends a per-agent command and decodes its answer into data.
func (s *session) request(ctx context.Context, cmd protocol.Typed, data any) error {
	cmd.Head().AgentID = s.id
	return s.conn.Call(ctx, cmd, data)
}

// loadCatalogs reads the agent's modes, models and reasoning levels. A
// runtime without one (a refusal) just has no such option.
func (s *session) loadCatalogs(ctx context.Context) {
	var modes modesData
	var models modelsData
	var levels levelsData
	errModes := s.request(ctx, &protocol.ListModes{Header: protocol.Header{Type: protocol.TypeListModes}}, &modes)
	errModels := s.request(ctx, &protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels}}, &models)
	errLevels := s.request(ctx, &protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels}}, &levels)
	s.mu.Lock()
	defer s.mu.Unlock()
	if errModes == nil {
		s.modeList = modes.Modes
		if modes.Active != "" {
			s.mode = modes.Active
		}
	}
	if errModels == nil {
		s.catalog = models
		s.window = models.Active.ContextWindow
	}
	if errLevels == nil {
		s.levels = levels
	} else {
		s.levels = levelsData{}
	}
}

// modes is the session's mode state, nil without a mode catalog.
func (s *session) modes() *acp.SessionModeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.modeList) == 0 {
		return nil
	}
	st := &acp.SessionModeState{CurrentModeId: acp.SessionModeId(s.mode), AvailableModes: []acp.SessionMode{}}
	for _, m := range s.modeList {
		sm := acp.SessionMode{Id: acp.SessionModeId(m.Name), Name: m.Name}
		if m.Description != "" {
			sm.Description = acp.Ptr(m.Description)
		}
		st.AvailableModes = append(st.AvailableModes, sm)
	}
	return st
}

// models is the session's model state, nil without a model catalog.
func (s *session) models() *acp.SessionModelState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.catalog.Models) == 0 {
		return nil
	}
	st := &acp.SessionModelState{CurrentModelId: acp.ModelId(s.catalog.Active.ID), AvailableModels: []acp.ModelInfo{}}
	for _, m := range s.catalog.Models {
		st.AvailableModels = append(st.AvailableModels, acp.ModelInfo{ModelId: acp.ModelId(m.ID), Name: m.Model,
			Description: acp.Ptr(m.Provider + "/" + m.Model)})
	}
	return st
}

// configOptions are the session's selects: mode, model, and the active
// model's reasoning level when it has levels.
func (s *session) configOptions() []acp.SessionConfigOption {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []acp.SessionConfigOption
	sel := func(id, name string, cat acp.SessionConfigOptionCategory, cur string, opts acp.SessionConfigSelectOptionsUngrouped) {
		out = append(out, acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{
			Id: acp.SessionConfigId(id), Name: name, Category: acp.Ptr(cat), Type: "select",
			CurrentValue: acp.SessionConfigValueId(cur), Options: acp.SessionConfigSelectOptions{Ungrouped: &opts},
		}})
	}
	if len(s.modeList) > 0 {
		var opts acp.SessionConfigSelectOptionsUngrouped
		for _, m := range s.modeList {
			o := acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m.Name), Name: m.Name}
			if m.Description != "" {
				o.Description = acp.Ptr(m.Description)
			}
			opts = append(opts, o)
		}
		sel(configMode, "Mode", acp.SessionConfigOptionCategoryMode, s.mode, opts)
	}
	if len(s.catalog.Models) > 0 {
		var opts acp.SessionConfigSelectOptionsUngrouped
		for _, m := range s.catalog.Models {
			opts = append(opts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m.ID), Name: m.Model,
				Description: acp.Ptr(m.Provider + "/" + m.Model)})
		}
		sel(configModel, "Model", acp.SessionConfigOptionCategoryModel, s.catalog.Active.ID, opts)
	}
	if len(s.levels.Levels) > 0 {
		var opts acp.SessionConfigSelectOptionsUngrouped
		for _, l := range s.levels.Levels {
			o := acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(l.ID), Name: l.Label}
			if l.Description != "" {
				o.Description = acp.Ptr(l.Description)
			}
			opts = append(opts, o)
		}
		sel(configReasoning, "Reasoning", acp.SessionConfigOptionCategoryThoughtLevel, s.levels.Active, opts)
	}
	return out
}

func (s *session) setMode(ctx context.Context, mode string) error {
	return rpcError(s.request(ctx, &protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode}, Mode: mode}, nil))
}

func (s *session) setModel(ctx context.Context, model string) error {
	return rpcError(s.request(ctx, &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel}, Model: model}, nil))
}

func (s *session) setReasoning(ctx context.Context, effort string) error {
	s.mu.Lock()
	model := s.catalog.Active.ID
	s.mu.Unlock()
	return rpcError(s.request(ctx, &protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel}, Model: model, Effort: effort}, nil))
}

// prompt sends the prompt and waits for the end of the turn it started.
// It is always a follow-up (an idle agent starts it at once; docs/protocol.md
// §9.2), so it never fails because another client's turn just began. Its
// response is read from the event stream, not waited for aside (Send, not
// Request): the runtime answers a prompt before it starts the prompt's
// turn, so the prompt's turn is the first turn_start after its response,
// and a turn that started before belongs to another client.
func (s *session) prompt(text string, images []protocol.Image) (acp.PromptResponse, error) {
	t := &turn{done: make(chan struct{}), promptID: s.f.nextPromptID()}
	s.mu.Lock()
	if s.failErr != nil {
		s.mu.Unlock()
		return acp.PromptResponse{}, rpcError(s.failErr)
	}
	if s.cur != nil {
		s.mu.Unlock()
		return acp.PromptResponse{}, invalidParams("a prompt is already running in this session")
	}
	s.cur = t
	s.mu.Unlock()
	s.f.watchPrompt(t.promptID, s)
	defer func() {
		s.f.unwatchPrompt(t.promptID)
		s.mu.Lock()
		if s.cur == t {
			s.cur = nil
		}
		s.mu.Unlock()
	}()
	cmd := &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: t.promptID, AgentID: s.id},
		Message: text, Images: images, StreamingBehavior: protocol.BehaviorFollowUp}
	if err := s.conn.Send(cmd); err != nil {
		return acp.PromptResponse{}, rpcError(err)
	}
	select {
	case <-t.done:
	case <-s.f.base.Done():
		return acp.PromptResponse{}, rpcError(s.f.base.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.err != nil {
		return acp.PromptResponse{}, rpcError(t.err)
	}
	if t.errEv != nil && !t.cancelled {
		return acp.PromptResponse{}, rpcError(protocol.Errorf(t.errEv.Code, "%s", t.errEv.Message))
	}
	var usage *protocol.Usage
	if t.end != nil {
		usage = t.end.Usage
	}
	return acp.PromptResponse{StopReason: stopReason(t.end, t.cancelled), Usage: turnUsage(usage)}, nil
}

// cancel aborts the agent's turn when this session's prompt waits on one;
// it reports whether it did.
func (s *session) cancel(ctx context.Context) bool {
	s.mu.Lock()
	t := s.cur
	if t != nil {
		t.cancelled = true
	}
	s.mu.Unlock()
	if t == nil {
		return false
	}
	if err := s.request(ctx, &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort}}, nil); err != nil {
		s.f.log.Warn("abort refused", "agent_id", s.id, "code", protocol.CodeOf(err))
	}
	return true
}

// waitTurn waits until no prompt of this session waits on the agent.
func (s *session) waitTurn(ctx context.Context) {
	s.mu.Lock()
	t := s.cur
	s.mu.Unlock()
	if t == nil {
		return
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
}

// finish ends the waiting prompt with the turn's end (under mu).
func (s *session) finishLocked(te *protocol.TurnEnd) {
	t := s.cur
	if t == nil || t.end != nil || t.err != nil {
		return
	}
	if te == nil {
		te = &protocol.TurnEnd{}
	}
	t.end = te
	close(t.done)
}

// handle is one event of the agent, in the daemon's order.
func (s *session) handle(msg protocol.Typed) {
	switch ev := msg.(type) {
	case *protocol.Sync:
		s.onSync(ev)
	case *protocol.Status:
		s.mu.Lock()
		s.status = ev.Status
		if t := s.cur; t != nil && t.cancelled && t.accepted && !t.started && ev.Status == protocol.StatusIdle {
			s.finishLocked(nil) // the prompt was dropped before its turn began
		}
		s.mu.Unlock()
	case *protocol.TurnStart:
		s.mu.Lock()
		if t := s.cur; t != nil && t.accepted && !t.started {
			t.started, t.turnID = true, ev.TurnID
		}
		s.mu.Unlock()
	case *protocol.TurnEnd:
		s.mu.Lock()
		if t := s.cur; t != nil && t.started && t.turnID == ev.TurnID {
			s.finishLocked(ev)
		}
		s.tools = map[string]*tool{}
		s.mu.Unlock()
	case *protocol.ErrorEvent:
		s.f.log.Warn("agent error", "agent_id", s.id, "code", ev.Code, "fatal", ev.Fatal)
		if ev.Code == protocol.CodeToolError {
			return // the turn goes on; the tool_result says it
		}
		s.mu.Lock()
		if t := s.cur; t != nil && t.errEv == nil {
			t.errEv = ev
		}
		s.mu.Unlock()
	case *protocol.MessageDelta:
		s.onDelta(ev)
	case *protocol.MessageComplete:
		s.onComplete(ev.Message, false)
	case *protocol.ToolCall:
		s.onToolCall(ev)
	case *protocol.ToolResult:
		s.onToolResult(ev.ToolCallID, &ev.Content, ev.IsError, ev.Render)
	case *protocol.UsageEvent:
		s.onUsage(&ev.Usage)
	case *protocol.PermissionRequest:
		s.askPermission(ev)
	case *protocol.UIRequest:
		s.askQuestion(ev)
	case *protocol.PermissionResolved:
		s.resolved(ev.RequestID)
	case *protocol.UIResolved:
		s.resolved(ev.RequestID)
	case *protocol.ModeChanged:
		s.mu.Lock()
		s.mode = ev.Mode
		s.mu.Unlock()
		s.f.update(s.id, acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: acp.SessionModeId(ev.Mode)}})
		s.sendConfig()
	case *protocol.ModelChanged:
		s.mu.Lock()
		s.catalog.Active = ev.Active
		s.window = ev.Active.ContextWindow
		s.mu.Unlock()
		// The new model's reasoning levels are read off the pump.
		go func() {
			s.loadCatalogs(s.f.base)
			s.sendConfig()
		}()
	case *protocol.ReasoningLevelChanged:
		s.mu.Lock()
		s.levels.Active = ev.Active
		s.mu.Unlock()
		s.sendConfig()
	case *protocol.AgentUpdated:
		s.mu.Lock()
		s.title = ev.Info.Title
		s.mu.Unlock()
		s.f.update(s.id, acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{Title: acp.Ptr(ev.Info.Title)}})
	case *protocol.AgentExited:
		s.f.log.Warn("the agent's runtime exited", "agent_id", s.id)
		s.mu.Lock()
		if t := s.cur; t != nil && t.end == nil && t.err == nil {
			t.err = protocol.Errorf(protocol.CodeInternal, "the agent's runtime exited: %s", ev.Reason)
			close(t.done)
		}
		s.mu.Unlock()
	}
}

// onPromptResponse takes the answer to the waiting prompt, in its place in
// the event stream: a refusal ends the prompt with it; an acceptance arms
// the wait for the prompt's turn.
func (s *session) onPromptResponse(r *protocol.Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.cur
	if t == nil || t.promptID != r.ID || t.end != nil || t.err != nil {
		return
	}
	if !r.Success {
		if r.Error != nil {
			t.err = r.Error
		} else {
			t.err = protocol.Errorf(protocol.CodeInternal, "prompt refused")
		}
		close(t.done)
		return
	}
	t.accepted = true
}

// sendConfig tells the editor the config options as they are now.
func (s *session) sendConfig() {
	opts := s.configOptions()
	if opts == nil {
		return
	}
	s.f.update(s.id, acp.SessionUpdate{ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{ConfigOptions: opts}})
}

// onSync takes the agent's state: the first sync after attach replays the
// live window (session/load) and releases open; every sync brings the open
// requests, which the editor is asked (once each).
func (s *session) onSync(ev *protocol.Sync) {
	// The attach's answer came before its sync (one ordered stream) and is
	// not queued behind it: waiting for open to take it never blocks long.
	select {
	case <-s.attached:
	case <-s.gone:
		return
	}
	s.mu.Lock()
	s.status, s.mode = ev.Status, ev.Mode
	replay := s.replay && !s.seenSync
	first := !s.seenSync
	s.seenSync = true
	s.mu.Unlock()
	if replay {
		s.replayWindow(ev.LiveWindow.Messages)
	}
	for _, raw := range ev.PendingRequests {
		msg, err := protocol.DecodeEvent(raw)
		if err != nil {
			continue
		}
		msg.Head().AgentID = s.id
		switch r := msg.(type) {
		case *protocol.PermissionRequest:
			s.askPermission(r)
		case *protocol.UIRequest:
			s.askQuestion(r)
		}
	}
	if first {
		close(s.synced)
	}
}

// replayWindow sends the live window as the session/updates that would have
// streamed it: user messages, agent text and thinking, and each tool call
// with its result (a diff rebuilt from an edit's arguments).
func (s *session) replayWindow(msgs []protocol.Message) {
	for _, m := range msgs {
		if m.Role == "user" {
			for _, b := range m.Content {
				switch b.Type {
				case protocol.BlockText:
					s.f.update(s.id, acp.UpdateUserMessageText(b.Text))
				case protocol.BlockToolResult:
					s.onToolResult(b.ToolCallID, b.Content, b.IsError, nil)
				}
			}
			continue
		}
		s.onComplete(m, true)
	}
}

// onDelta streams text and thinking, and announces a tool call as soon as
// its id is known.
func (s *session) onDelta(ev *protocol.MessageDelta) {
	switch ev.Kind {
	case protocol.DeltaText:
		if ev.TextDelta != "" {
			s.f.update(s.id, acp.UpdateAgentMessageText(ev.TextDelta))
		}
	case protocol.DeltaThinking:
		if ev.TextDelta != "" {
			s.f.update(s.id, acp.UpdateAgentThoughtText(ev.TextDelta))
		}
	case protocol.DeltaToolCall:
		if ev.ToolCallID == "" {
			return
		}
		s.mu.Lock()
		_, seen := s.tools[ev.ToolCallID]
		if !seen {
			s.toolSeq++
			s.tools[ev.ToolCallID] = &tool{name: ev.Name, seq: s.toolSeq}
		}
		s.mu.Unlock()
		if !seen {
			s.f.update(s.id, acp.StartToolCall(acp.ToolCallId(ev.ToolCallID), ev.Name,
				acp.WithStartKind(toolKind(ev.Name, nil)), acp.WithStartStatus(acp.ToolCallStatusPending)))
		}
	}
}

// onComplete takes an assistant message's tool calls with their
// arguments; on replay it also sends its text and thinking.
func (s *session) onComplete(m protocol.Message, replay bool) {
	for _, b := range m.Content {
		switch b.Type {
		case protocol.BlockText:
			if replay && b.Text != "" {
				s.f.update(s.id, acp.UpdateAgentMessageText(b.Text))
			}
		case protocol.BlockThinking:
			if replay && b.Text != "" {
				s.f.update(s.id, acp.UpdateAgentThoughtText(b.Text))
			}
		case protocol.BlockToolCall:
			s.mu.Lock()
			tc, seen := s.tools[b.ID]
			if !seen {
				s.toolSeq++
				tc = &tool{name: b.Name, seq: s.toolSeq}
				s.tools[b.ID] = tc
			}
			tc.args = b.Args
			cwd := s.cwd
			s.mu.Unlock()
			title, kind := toolTitle(b.Name, b.Args), toolKind(b.Name, nil)
			if !seen {
				s.f.update(s.id, acp.StartToolCall(acp.ToolCallId(b.ID), title, acp.WithStartKind(kind),
					acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(b.Args),
					acp.WithStartLocations(toolLocations(cwd, b.Args)), acp.WithStartContent(argsDiff(cwd, b.Name, b.Args))))
				continue
			}
			s.f.update(s.id, acp.UpdateToolCall(acp.ToolCallId(b.ID), acp.WithUpdateTitle(title), acp.WithUpdateKind(kind),
				acp.WithUpdateRawInput(b.Args), acp.WithUpdateLocations(toolLocations(cwd, b.Args))))
		}
	}
}

// onToolCall marks a call running (its permission, if any, was given).
func (s *session) onToolCall(ev *protocol.ToolCall) {
	s.mu.Lock()
	tc, seen := s.tools[ev.ToolCallID]
	if !seen {
		s.toolSeq++
		tc = &tool{name: ev.Name, seq: s.toolSeq}
		s.tools[ev.ToolCallID] = tc
	}
	tc.args, tc.readOnly = ev.Args, ev.ReadOnly
	cwd := s.cwd
	s.mu.Unlock()
	title, kind := toolTitle(ev.Name, ev.Args), toolKind(ev.Name, ev.ReadOnly)
	if !seen {
		s.f.update(s.id, acp.StartToolCall(acp.ToolCallId(ev.ToolCallID), title, acp.WithStartKind(kind),
			acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(ev.Args),
			acp.WithStartLocations(toolLocations(cwd, ev.Args))))
		return
	}
	s.f.update(s.id, acp.UpdateToolCall(acp.ToolCallId(ev.ToolCallID), acp.WithUpdateStatus(acp.ToolCallStatusInProgress),
		acp.WithUpdateTitle(title), acp.WithUpdateKind(kind), acp.WithUpdateLocations(toolLocations(cwd, ev.Args))))
}

// onToolResult completes a call with its output and diff.
func (s *session) onToolResult(id string, c *protocol.ToolResultContent, isError bool, render *protocol.RenderDescriptor) {
	s.mu.Lock()
	cwd := s.cwd
	var name string
	var args map[string]any
	if tc := s.tools[id]; tc != nil {
		name, args = tc.name, tc.args
	}
	s.mu.Unlock()
	content := resultContent(cwd, c, render)
	if render == nil && !isError {
		content = append(content, argsDiff(cwd, name, args)...)
	}
	status := acp.ToolCallStatusCompleted
	if isError {
		status = acp.ToolCallStatusFailed
	}
	opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(status)}
	if len(content) > 0 {
		opts = append(opts, acp.WithUpdateContent(content))
	}
	s.f.update(s.id, acp.UpdateToolCall(acp.ToolCallId(id), opts...))
}

// onUsage is ACP's usage_update: the context used against the active
// model's window, and the cost when the daemon knows it.
func (s *session) onUsage(u *protocol.Usage) {
	s.mu.Lock()
	size := s.window
	s.mu.Unlock()
	used := u.ContextTokens
	if used == 0 {
		used = u.Input + u.CacheRead + u.CacheWrite + u.Output
	}
	up := &acp.SessionUsageUpdate{Used: int(used), Size: size}
	if u.Cost > 0 {
		up.Cost = &acp.Cost{Amount: u.Cost, Currency: "USD"}
	}
	s.f.update(s.id, acp.SessionUpdate{UsageUpdate: up})
}

// matchTool finds the call a permission request is about: the latest one
// of that tool not yet asked about. The wire's permission_request names the
// tool, not the call (docs/protocol.md §9.5).
func (s *session) matchTool(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var id string
	for tid, tc := range s.tools {
		if tc.name == name && !tc.asked && (id == "" || tc.seq > s.tools[id].seq) {
			id = tid
		}
	}
	if id != "" {
		s.tools[id].asked = true
	}
	return id
}

// askPermission asks the editor (session/request_permission) and sends its
// answer. The request is broadcast (docs/protocol.md §6.3): when another
// client answers first, permission_resolved cancels the editor's request
// (resolved) and nothing is sent; an answer of the editor that loses is
// discarded by the daemon without an error.
func (s *session) askPermission(req *protocol.PermissionRequest) {
	args, _ := req.Input.(map[string]any)
	tid := s.matchTool(req.ToolName)
	if tid == "" {
		tid = "permission-" + req.RequestID
	}
	s.mu.Lock()
	cwd := s.cwd
	s.mu.Unlock()
	kind := toolKind(req.ToolName, nil)
	title := req.Prompt
	if title == "" {
		title = toolTitle(req.ToolName, args)
	}
	tc := acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(tid), Title: acp.Ptr(title), Kind: &kind,
		Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: req.Input,
		Locations: toolLocations(cwd, args), Content: argsDiff(cwd, req.ToolName, args)}
	s.ask(req.RequestID, acp.RequestPermissionRequest{SessionId: acp.SessionId(s.id), ToolCall: tc, Options: permissionOptions(req)},
		func(o acp.RequestPermissionOutcome) protocol.Typed {
			if o.Selected != nil {
				if resp, ok := permissionAnswer(req, o.Selected.OptionId); ok {
					return &resp
				}
			}
			// Cancelled (or an option never offered): deny, so the agent
			// never waits on an editor that will not answer.
			return &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse},
				RequestID: req.RequestID, Decision: protocol.DecisionDeny}
		})
}

// askQuestion asks the editor a question the agent put (ui_request) as a
// permission request whose options are the answers (questionOptions).
func (s *session) askQuestion(ui *protocol.UIRequest) {
	opts, ok := questionOptions(ui)
	if !ok {
		return
	}
	title := ui.Title
	if ui.Message != "" {
		title += ": " + ui.Message
	}
	tc := acp.ToolCallUpdate{ToolCallId: acp.ToolCallId("question-" + ui.RequestID), Title: acp.Ptr(title),
		Kind: acp.Ptr(acp.ToolKindThink), Status: acp.Ptr(acp.ToolCallStatusPending)}
	s.ask(ui.RequestID, acp.RequestPermissionRequest{SessionId: acp.SessionId(s.id), ToolCall: tc, Options: opts},
		func(o acp.RequestPermissionOutcome) protocol.Typed {
			v := json.RawMessage("null")
			if o.Selected != nil {
				v = questionAnswer(o.Selected.OptionId)
			}
			return &protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse}, RequestID: ui.RequestID, Value: v}
		})
}

// ask runs one editor request for the daemon request id, off the pump,
// and sends answer(outcome) unless the request was resolved meanwhile.
func (s *session) ask(id string, req acp.RequestPermissionRequest, answer func(acp.RequestPermissionOutcome) protocol.Typed) {
	s.mu.Lock()
	if _, open := s.asks[id]; open || s.failErr != nil {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.f.base)
	s.asks[id] = cancel
	s.mu.Unlock()
	go func() {
		defer cancel()
		<-s.f.ready
		resp, err := s.f.asc.RequestPermission(ctx, req)
		s.mu.Lock()
		_, open := s.asks[id]
		delete(s.asks, id)
		s.mu.Unlock()
		if !open {
			return // resolved by another client, or the session ended
		}
		if err != nil {
			// The editor could not answer: the request stays open for the
			// other clients (or the headless policy).
			s.f.log.Warn("the editor did not answer a request", "agent_id", s.id, "err", err)
			return
		}
		if err := s.request(s.f.base, answer(resp.Outcome), nil); err != nil {
			s.f.log.Warn("answer refused", "agent_id", s.id, "code", protocol.CodeOf(err))
		}
	}()
}

// resolved closes the editor's request for a daemon request another
// client (or the editor) answered: the SDK cancels it ($/cancel_request),
// and the editor resolves it as cancelled.
func (s *session) resolved(id string) {
	s.mu.Lock()
	cancel := s.asks[id]
	delete(s.asks, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
