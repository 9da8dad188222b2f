package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// errHung ends the turn goroutine after `sim: hang` once Run's context is
// done.
var errHung = errors.New("agent: runtime hung")

// turnState is one turn: the prompt that started it and the provider calls
// and tool runs that follow until the model stops.
type turnState struct {
	id     string
	prompt string
	ctx    context.Context // cancelled by abort, shutdown or Run's context
	cancel context.CancelFunc

	// Protected by runtime.mu.
	steers  []string // steer messages not yet delivered, oldest first
	aborted bool

	// Owned by the turn goroutine.
	usage protocol.Usage
}

// outcomeKind says how a turn ended.
type outcomeKind int

const (
	outDone outcomeKind = iota
	outAborted
	outFailed
	outHung
)

// outcome is how a turn ended; err is set for outFailed.
type outcome struct {
	kind outcomeKind
	err  *protocol.Error
}

// resolvedBy tells who closed a pending request.
type resolvedBy int

const (
	byAnswer resolvedBy = iota
	byTimeout
	byAbort
)

// toolCallReq is a tool call the model made.
type toolCallReq struct {
	id   string
	name string
	args map[string]any
}

func userMessage(id, text string) protocol.Message {
	return protocol.Message{ID: id, Role: roleUser, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: text}}}
}

// startTurnLocked opens a turn for a user message and starts its goroutine.
func (r *runtime) startTurnLocked(text string) {
	t := &turnState{id: r.ids.next("turn"), prompt: text, usage: protocol.Usage{Model: r.opts.Model}}
	t.ctx, t.cancel = context.WithCancel(r.runCtx)
	r.turn = t
	r.setStatusLocked(protocol.StatusStreaming)
	r.emitLocked(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart}, TurnID: t.id})
	r.appendWindowLocked(userMessage(r.ids.next("msg"), text))
	r.turns.Go(func() { r.runTurn(t) })
}

// runTurn plays a turn: provider calls, each followed by its tool calls,
// until a call makes no tool call and no steer is waiting.
func (r *runtime) runTurn(t *turnState) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("turn panicked", slog.Any("panic", p))
			r.endTurn(t, outcome{kind: outFailed, err: protocol.Errorf(protocol.CodeInternal, "internal error in the agent runtime")})
		}
	}()
	queue := parseDirectives(t.prompt)
	for {
		if t.ctx.Err() != nil {
			r.endTurn(t, outcome{kind: outAborted})
			return
		}
		queue = r.deliverSteers(t, queue)
		call := queue
		if i := slices.IndexFunc(queue, directive.endsCall); i >= 0 {
			call = queue[:i+1]
		}
		queue = queue[len(call):]
		if len(call) == 0 { // tool results came back and the script is done
			call = []directive{{kind: dirSay, text: afterToolsReply}}
		}
		calls, end := r.providerCall(t, call)
		if end != nil {
			r.endTurn(t, *end)
			return
		}
		if len(calls) > 0 {
			if end := r.runTools(t, calls); end != nil {
				r.endTurn(t, *end)
				return
			}
			continue
		}
		if r.endTurn(t, outcome{kind: outDone}) {
			return
		}
	}
}

// deliverSteers moves waiting steer messages into the live window and puts
// their directives (or a reply quoting them) in front of the queue.
func (r *runtime) deliverSteers(t *turnState, queue []directive) []directive {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(t.steers) == 0 || t.aborted {
		return queue
	}
	var front []directive
	for _, s := range t.steers {
		r.appendWindowLocked(userMessage(r.ids.next("msg"), s))
		front = append(front, parseDirectives(s)...)
	}
	t.steers = nil
	return append(front, queue...)
}

// endTurn writes the end of a turn and starts the next queued follow-up. A
// turn that finished normally while a steer is waiting does not end: it
// returns false and the caller makes another provider call.
func (r *runtime) endTurn(t *turnState, out outcome) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.turn != t {
		return true // already ended (a panic inside endTurn)
	}
	if out.kind == outDone && len(t.steers) > 0 && !t.aborted {
		return false
	}
	t.cancel()
	if out.kind == outFailed && len(t.steers) > 0 { // keep them: run after
		r.followUps = append(slices.Clone(t.steers), r.followUps...)
	}
	t.steers = nil
	for len(r.pending) > 0 { // only after a panic: never leave a request open
		r.resolveLocked(r.pending[0], resolution{decision: protocol.DecisionDeny, source: sourceAbort, by: byAbort})
	}
	r.turn = nil
	if out.kind == outHung {
		return true
	}
	status := protocol.StatusIdle
	if out.kind == outFailed {
		status = protocol.StatusError
		r.emitLocked(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: out.err.Code, Message: out.err.Message})
	}
	usage := t.usage
	r.emitLocked(protocol.TurnEnd{Header: protocol.Header{Type: protocol.TypeTurnEnd}, TurnID: t.id, Usage: &usage})
	r.setStatusLocked(status)
	if !r.closing && len(r.followUps) > 0 {
		next := r.followUps[0]
		r.followUps = r.followUps[1:]
		r.startTurnLocked(next)
	}
	return true
}

// ---- provider calls ----

// stream is one sim provider call producing one assistant message.
type stream struct {
	r      *runtime
	t      *turnState
	msgID  string
	blocks []protocol.ContentBlock
	calls  []toolCallReq
}

// providerCall runs one provider call. It returns the tool calls the model
// made, or the outcome that ends the turn.
func (r *runtime) providerCall(t *turnState, call []directive) ([]toolCallReq, *outcome) {
	r.mu.Lock()
	input := tokens(windowBytes(r.window))
	r.mu.Unlock()

	s := &stream{r: r, t: t, msgID: r.ids.next("msg")}
	var err error
	if input > int64(r.opts.ContextWindow) {
		err = protocol.Errorf(protocol.CodeProviderError, "context window exceeded: %d tokens > %d", input, r.opts.ContextWindow)
	}
	for _, d := range call {
		if err != nil {
			break
		}
		err = s.run(d)
	}
	if errors.Is(err, errHung) {
		return nil, &outcome{kind: outHung}
	}
	s.complete(input) // partial content too: it reconciles what was streamed
	var pe *protocol.Error
	switch {
	case err == nil:
		return s.calls, nil
	case errors.Is(err, errTurnAborted):
		return nil, &outcome{kind: outAborted}
	case errors.As(err, &pe):
		return nil, &outcome{kind: outFailed, err: pe}
	}
	return nil, &outcome{kind: outFailed, err: protocol.Errorf(protocol.CodeInternal, "%v", err)}
}

// windowBytes is the sim size of the live window.
func windowBytes(w []protocol.Message) int {
	n := 0
	for _, m := range w {
		n += contentBytes(m.Content)
	}
	return n
}

// run executes one directive.
func (s *stream) run(d directive) error {
	if s.t.ctx.Err() != nil {
		return errTurnAborted
	}
	switch d.kind {
	case dirEcho, dirSay:
		return s.text(protocol.DeltaText, d.text)
	case dirThink:
		return s.text(protocol.DeltaThinking, d.text)
	case dirTool, dirSubagent:
		return s.toolCall(d)
	case dirAsk:
		return s.ask(d)
	case dirSleep:
		return s.sleep(d.dur)
	case dirFlood:
		return s.flood(d.n, d.size)
	case dirFail, dirInvalid:
		return protocol.Errorf(protocol.CodeProviderError, "%s", d.text)
	case dirHang:
		return s.hang()
	case dirExit:
		s.r.log.Warn("sim: exit", "code", d.code)
		s.r.opts.Exit(d.code)
		return nil
	}
	return protocol.Errorf(protocol.CodeProviderError, "sim: unhandled directive")
}

// delta writes one message_delta unless the turn was aborted.
func (s *stream) delta(d protocol.MessageDelta) error {
	d.Header = protocol.Header{Type: protocol.TypeMessageDelta}
	d.MessageID = s.msgID
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.t.aborted || s.t.ctx.Err() != nil {
		return errTurnAborted
	}
	s.r.emitLocked(d)
	return nil
}

// text streams a text or thinking block in a few deltas.
func (s *stream) text(kind, text string) error {
	idx := len(s.blocks)
	typ := protocol.BlockText
	if kind == protocol.DeltaThinking {
		typ = protocol.BlockThinking
	}
	s.blocks = append(s.blocks, protocol.ContentBlock{Type: typ})
	for _, p := range pieces(text, textPieces) {
		if err := s.delta(protocol.MessageDelta{BlockIndex: idx, Kind: kind, TextDelta: p}); err != nil {
			s.dropEmpty(idx)
			return err
		}
		s.blocks[idx].Text += p
	}
	return nil
}

// dropEmpty removes block idx when nothing of it was streamed.
func (s *stream) dropEmpty(idx int) {
	if idx == len(s.blocks)-1 && s.blocks[idx].Text == "" {
		s.blocks = s.blocks[:idx]
	}
}

// flood streams n text deltas of size bytes as fast as possible.
func (s *stream) flood(n, size int) error {
	if n == 0 {
		return nil
	}
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	piece := string(chunk)
	idx := len(s.blocks)
	s.blocks = append(s.blocks, protocol.ContentBlock{Type: protocol.BlockText})
	var sb strings.Builder
	sb.Grow(n * size)
	var err error
	for range n {
		if err = s.delta(protocol.MessageDelta{BlockIndex: idx, Kind: protocol.DeltaText, TextDelta: piece}); err != nil {
			break
		}
		sb.WriteString(piece)
	}
	s.blocks[idx].Text = sb.String()
	s.dropEmpty(idx)
	return err
}

// toolCall streams a tool_call block: the first delta names the call, the
// following ones carry the JSON arguments in fragments.
func (s *stream) toolCall(d directive) error {
	id := s.r.ids.next("tc")
	idx := len(s.blocks)
	s.blocks = append(s.blocks, protocol.ContentBlock{Type: protocol.BlockToolCall, ID: id, Name: d.tool, Args: d.args})
	err := s.delta(protocol.MessageDelta{BlockIndex: idx, Kind: protocol.DeltaToolCall, ToolCallID: id, Name: d.tool})
	for _, frag := range pieces(d.rawArgs, textPieces) {
		if err != nil {
			break
		}
		err = s.delta(protocol.MessageDelta{BlockIndex: idx, Kind: protocol.DeltaToolCall, ArgsDelta: frag})
	}
	if err != nil { // an unfinished call is never run: drop it
		s.blocks = s.blocks[:idx]
		return err
	}
	s.calls = append(s.calls, toolCallReq{id: id, name: d.tool, args: d.args})
	return nil
}

// sleep pauses the stream; abort cuts it short.
func (s *stream) sleep(d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-s.t.ctx.Done():
		return errTurnAborted
	}
}

// hang makes the runtime unresponsive (escalation tests): nothing is written
// or answered again, SIGTERM is ignored, and the turn goroutine blocks
// without spinning until Run's context is done.
func (s *stream) hang() error {
	s.r.log.Warn("sim: hang: ignoring input, abort and SIGTERM")
	s.r.mu.Lock()
	s.r.hung = true
	s.r.mu.Unlock()
	s.r.opts.IgnoreSignals()
	<-s.r.runCtx.Done()
	return errHung
}

// ask opens a ui_request, waits for it, and has the model say the answer.
func (s *stream) ask(d directive) error {
	r := s.r
	p := &pendingRequest{id: r.ids.next("ui"), kind: kindUI, done: make(chan resolution, 1)}
	p.raw = protocol.MustMarshal(protocol.UIRequest{
		Header:    protocol.Header{Type: protocol.TypeUIRequest},
		RequestID: p.id,
		Kind:      d.askKind,
		Title:     d.title,
		Options:   d.options,
	})
	if err := r.open(s.t, p, protocol.StatusWaitingForUI); err != nil {
		return err
	}
	res := r.await(s.t, p)
	var text string
	switch res.by {
	case byAbort:
		return errTurnAborted
	case byTimeout:
		text = fmt.Sprintf("answer: null (TIMEOUT: no answer within %s)", r.opts.HeadlessTimeout)
	default:
		text = "answer: " + uiValueText(res.value)
	}
	return s.text(protocol.DeltaText, text)
}

// uiValueText renders a ui_response value for the model's reply.
func uiValueText(v json.RawMessage) string {
	if v == nil {
		return "null"
	}
	var str string
	if json.Unmarshal(v, &str) == nil {
		return str
	}
	var list []string
	if json.Unmarshal(v, &list) == nil {
		return strings.Join(list, ", ")
	}
	return string(v)
}

// complete writes message_complete and usage for what the call produced and
// adds the message to the live window. An empty call writes nothing.
func (s *stream) complete(input int64) {
	if len(s.blocks) == 0 {
		return
	}
	r := s.r
	output := tokens(contentBytes(s.blocks))
	u := protocol.Usage{Input: input, Output: output, ContextTokens: input + output, Model: r.opts.Model}
	s.t.usage.Input += u.Input
	s.t.usage.Output += u.Output
	s.t.usage.ContextTokens = u.ContextTokens

	msg := protocol.Message{ID: s.msgID, Role: roleAssistant, Content: s.blocks}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(protocol.MessageComplete{Header: protocol.Header{Type: protocol.TypeMessageComplete}, MessageID: s.msgID, Message: msg})
	r.appendWindowLocked(msg)
	r.emitLocked(protocol.UsageEvent{Header: protocol.Header{Type: protocol.TypeUsage}, Usage: u})
}

// ---- waiting for answers ----

// open registers a pending request unless the turn was aborted.
func (r *runtime) open(t *turnState, p *pendingRequest, waiting protocol.AgentStatus) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.aborted || t.ctx.Err() != nil {
		return errTurnAborted
	}
	r.openLocked(p, waiting)
	return nil
}

// await waits for p's resolution: an answer, the headless timeout, or the
// turn's end.
func (r *runtime) await(t *turnState, p *pendingRequest) resolution {
	timer := time.NewTimer(r.opts.HeadlessTimeout)
	defer timer.Stop()
	select {
	case res := <-p.done:
		return res
	case <-timer.C:
		r.resolveIfOpen(p, resolution{decision: protocol.DecisionDeny, source: sourceTimeout, by: byTimeout})
	case <-t.ctx.Done():
		r.resolveIfOpen(p, resolution{decision: protocol.DecisionDeny, source: sourceAbort, by: byAbort})
	}
	return <-p.done // whichever resolution won
}

// ---- tools ----

// runTools runs the tool calls of one assistant message in order. Their
// results form one user message of tool_result blocks; each block enters the
// live window together with its tool_result event (so get_sync never lags
// the events), and the message is persisted once complete. An abort stops
// the run; calls that did not run get an "aborted" block (so the transcript
// never holds an unanswered call) but no events.
func (r *runtime) runTools(t *turnState, calls []toolCallReq) *outcome {
	b := &toolBatch{msgID: r.ids.next("msg"), idx: -1}
	var end *outcome
	for i, c := range calls {
		if err := r.runTool(t, b, c); err != nil {
			end = &outcome{kind: outAborted}
			r.mu.Lock()
			for _, rest := range calls[i:] {
				r.addResultLocked(b, resultBlock(rest.id, errorOutput("aborted")))
			}
			r.mu.Unlock()
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.idx >= 0 {
		if err := r.sess.append(r.window[b.idx]); err != nil {
			r.log.Error("session append failed", slog.Any("err", err))
		}
	}
	return end
}

// toolBatch is the user message collecting one assistant message's tool
// results; idx is its position in the live window once it exists.
type toolBatch struct {
	msgID string
	idx   int
}

// addResultLocked adds a tool_result block to the batch's window message,
// creating the message on the first result.
func (r *runtime) addResultLocked(b *toolBatch, block protocol.ContentBlock) {
	if b.idx < 0 {
		r.window = append(r.window, protocol.Message{ID: b.msgID, Role: roleUser, Content: []protocol.ContentBlock{block}})
		b.idx = len(r.window) - 1
		return
	}
	r.window[b.idx].Content = append(r.window[b.idx].Content, block)
}

func resultBlock(id string, out toolOutput) protocol.ContentBlock {
	content := out.content
	return protocol.ContentBlock{Type: protocol.BlockToolResult, ToolCallID: id, Content: &content, IsError: out.isError}
}

// runTool takes one call through validation, plan mode and the permission
// gate, then reports it with tool_call and tool_result. It returns
// errTurnAborted when the turn ended meanwhile.
func (r *runtime) runTool(t *turnState, b *toolBatch, c toolCallReq) error {
	tl, ok := r.lookupTool(c.name)
	if !ok {
		return r.report(t, b, c, false, func() toolOutput { return errorOutput("unknown tool %q", c.name) })
	}
	if tl.unavailable != "" {
		return r.report(t, b, c, tl.readOnly, func() toolOutput { return errorOutput("%s", tl.unavailable) })
	}
	if err := tl.check(c.args); err != nil {
		return r.report(t, b, c, tl.readOnly, func() toolOutput { return errorOutput("invalid arguments: %v", err) })
	}
	if !tl.readOnly && !tl.ungated {
		refusal, err := r.gate(t, tl, c)
		if err != nil {
			return err
		}
		if refusal != nil {
			return r.report(t, b, c, false, func() toolOutput { return *refusal })
		}
	}
	return r.report(t, b, c, tl.readOnly, func() toolOutput { return tl.run(t.ctx, r.opts.Cwd, c.args) })
}

// report writes tool_call, runs fn, and writes tool_result while adding the
// result to the live window.
func (r *runtime) report(t *turnState, b *toolBatch, c toolCallReq, readOnly bool, fn func() toolOutput) error {
	args := c.args
	if args == nil {
		args = map[string]any{}
	}
	r.mu.Lock()
	if t.aborted || t.ctx.Err() != nil {
		r.mu.Unlock()
		return errTurnAborted
	}
	r.emitLocked(protocol.ToolCall{Header: protocol.Header{Type: protocol.TypeToolCall}, ToolCallID: c.id, Name: c.name, Args: args, ReadOnly: &readOnly})
	r.mu.Unlock()

	start := time.Now()
	out := fn()
	ms := time.Since(start).Milliseconds()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(protocol.ToolResult{
		Header:     protocol.Header{Type: protocol.TypeToolResult},
		ToolCallID: c.id,
		Content:    out.content,
		IsError:    out.isError,
		DurationMs: &ms,
		Render:     out.render,
	})
	r.addResultLocked(b, resultBlock(c.id, out))
	return nil
}

// Permission presentation: legacy options and structured choices.
func permissionOptions() []string {
	return []string{protocol.DecisionAllow, protocol.DecisionAllowAlways, protocol.DecisionDeny}
}

func permissionChoices() []protocol.PermissionChoice {
	return []protocol.PermissionChoice{
		{ID: "allow", Label: "Allow once", Intent: "allow"},
		{ID: "allow_always", Label: "Always allow this exact request", Intent: "persist"},
		{ID: "deny", Label: "Deny", Intent: "deny"},
	}
}

// choiceDecisions maps each choice id to its decision.
func choiceDecisions() map[string]string {
	return map[string]string{
		"allow":        protocol.DecisionAllow,
		"allow_always": protocol.DecisionAllowAlways,
		"deny":         protocol.DecisionDeny,
	}
}

// grantKey identifies an exact request for allow_always: the tool name and
// the canonical JSON of its arguments (sorted keys, numbers verbatim).
func grantKey(c toolCallReq) string {
	return c.name + " " + string(protocol.MustMarshal(c.args))
}

// gate decides whether a mutating call may run. It returns a refusal to
// report as the tool's error result, nil to run it, or errTurnAborted.
func (r *runtime) gate(t *turnState, tl tool, c toolCallReq) (*toolOutput, error) {
	key := grantKey(c)
	r.mu.Lock()
	if r.mode == modePlan {
		r.mu.Unlock()
		out := errorOutput("%s is not allowed: the agent is in plan mode, where tools that change files are refused; switch to build mode to run it", c.name)
		return &out, nil
	}
	if r.allowAlways[key] {
		r.mu.Unlock()
		return nil, nil
	}
	r.mu.Unlock()

	prompt, details := tl.ask(c.args)
	p := &pendingRequest{id: r.ids.next("perm"), kind: kindPermission, choices: choiceDecisions(), done: make(chan resolution, 1)}
	p.raw = protocol.MustMarshal(protocol.PermissionRequest{
		Header:    protocol.Header{Type: protocol.TypePermissionRequest},
		RequestID: p.id,
		ToolName:  c.name,
		Input:     c.args,
		Prompt:    prompt,
		Options:   permissionOptions(),
		Details:   details,
		Choices:   permissionChoices(),
	})
	if err := r.open(t, p, protocol.StatusWaitingForPermission); err != nil {
		return nil, err
	}
	res := r.await(t, p)
	var out toolOutput
	switch {
	case res.by == byAbort:
		return nil, errTurnAborted
	case res.by == byTimeout:
		out = errorOutput("permission request timed out (TIMEOUT): no answer within %s", r.opts.HeadlessTimeout)
	case res.decision == protocol.DecisionAllow:
		return nil, nil
	case res.decision == protocol.DecisionAllowAlways:
		r.mu.Lock()
		r.allowAlways[key] = true
		r.mu.Unlock()
		return nil, nil
	default:
		out = errorOutput("permission denied")
	}
	return &out, nil
}
