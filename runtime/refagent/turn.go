package refagent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// errHung ends the turn goroutine after `sim: hang` once Run's context is
// done.
var errHung = errors.New("agent: runtime hung")

// turnState is one turn: the prompt that started it and the provider calls
// and tool runs that follow until the model stops.
type turnState struct {
	id       string
	promptID string          // id of the prompt's message in the live window
	ctx      context.Context // cancelled by abort, shutdown or Run's context
	cancel   context.CancelFunc
	prov     provider.Provider // what the turn's provider calls go to
	// prompt is the transcript write of the prompt's message, set before
	// the turn goroutine starts; the goroutine waits for it to be durable
	// before anything else (so before any turn_end).
	prompt writeTicket

	// Protected by runtime.mu.
	steers  []queuedPrompt // steer messages not yet delivered, oldest first
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

// toolCallReq is a tool call the model made. argsErr is set when its
// arguments were not a JSON object (args is then empty).
type toolCallReq struct {
	id      string
	name    string
	args    map[string]any
	argsErr error
}

func userMessage(id, text string) protocol.Message {
	return protocol.Message{ID: id, Role: roleUser, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: text}}}
}

// startTurnLocked opens a turn for a user message and starts its goroutine.
func (r *runtime) startTurnLocked(q queuedPrompt) {
	if q.id == "" {
		q.id = r.ids.next("msg")
	}
	text := q.text
	t := &turnState{id: r.ids.next("turn"), promptID: q.id, usage: protocol.Usage{Model: r.active.Model}}
	t.ctx, t.cancel = context.WithCancel(r.runCtx)
	t.prov = r.providerFor(t)
	r.turn = t
	r.setStatusLocked(protocol.StatusStreaming)
	r.emitLocked(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart}, TurnID: t.id})
	t.prompt = r.appendWindowLocked(userMessage(t.promptID, text))
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
	// The prompt was written under mu by startTurnLocked; its fsync runs
	// here, outside mu, so the command that started the turn is not held up.
	r.awaitDurable(t.prompt)
	for {
		if t.ctx.Err() != nil {
			r.endTurn(t, outcome{kind: outAborted})
			return
		}
		r.deliverSteers(t)
		if end := r.compactBeforeCall(t); end != nil {
			r.endTurn(t, *end)
			return
		}
		r.deliverSteers(t) // any that came while compacting
		calls, end := r.providerCall(t)
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

// deliverSteers moves waiting steer messages into the live window, where
// the next provider call sees them.
func (r *runtime) deliverSteers(t *turnState) {
	r.mu.Lock()
	if len(t.steers) == 0 || t.aborted {
		r.mu.Unlock()
		return
	}
	var last writeTicket
	for _, s := range t.steers {
		id := s.id
		if id == "" {
			id = r.ids.next("msg")
		}
		last = r.appendWindowLocked(userMessage(id, s.text))
	}
	t.steers = nil
	r.mu.Unlock()
	r.awaitDurable(last) // one fsync covers them all
}

// endTurn writes the end of a turn and starts the next queued follow-up. A
// turn that finished normally while a steer is waiting does not end: it
// returns false and the caller makes another provider call. When the
// context is above the reserve threshold after a turn that did not fail,
// the agent compacts (status compacting instead of idle) before any
// follow-up runs.
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
	if out.kind != outFailed && !r.closing && r.overReserveLocked() {
		if j := r.planCompactionLocked(r.keepTokensLocked()); j != nil {
			r.setStatusLocked(protocol.StatusCompacting)
			r.startCompactionLocked(j)
			return true
		}
	}
	r.setStatusLocked(status)
	r.nextFollowUpLocked()
	return true
}

// nextFollowUpLocked starts the oldest queued follow-up, if any.
func (r *runtime) nextFollowUpLocked() {
	if r.closing || r.turn != nil || r.compacting != nil || len(r.followUps) == 0 {
		return
	}
	next := r.followUps[0]
	r.followUps = r.followUps[1:]
	r.startTurnLocked(next)
}

// ---- provider calls ----

// providerFor returns the provider turn t calls: the configured real
// provider, shared by all turns, or a sim of the turn's own (it keeps the
// turn's script between calls).
func (r *runtime) providerFor(t *turnState) provider.Provider {
	if r.models.real != nil {
		return r.models.real
	}
	return newSimTurn(r, t, r.ids, r.models.window)
}

// requestLocked assembles the next provider call from the live window and
// the current selection: the model and reasoning level are read here, once
// per call, so set_model and set_reasoning_level never affect a call in
// flight.
func (r *runtime) requestLocked() provider.Request {
	msgs := make([]protocol.Message, len(r.window))
	for i, m := range r.window {
		msgs[i] = r.forModelLocked(m)
	}
	return provider.Request{
		Model:      r.active.Model,
		System:     systemPrompt(r.opts.Cwd, r.mode),
		Messages:   msgs,
		Tools:      r.toolSpecs,
		Reasoning:  r.reasoning,
		Signatures: maps.Clone(r.meta.sigs),
	}
}

// forModelLocked is m as the model sees it: a tool result with an exit code
// (bash) carries it as "[exit code: N]" text after the output (wire spec
// §9.4: the event's content stays the pure output).
func (r *runtime) forModelLocked(m protocol.Message) protocol.Message {
	if m.Role != roleUser || len(r.meta.exitCodes) == 0 {
		return m
	}
	var content []protocol.ContentBlock
	for i, b := range m.Content {
		code, ok := r.meta.exitCodes[b.ToolCallID]
		if b.Type != protocol.BlockToolResult || !ok || b.Content == nil {
			continue
		}
		if content == nil {
			content = slices.Clone(m.Content)
		}
		c := *b.Content
		note := fmt.Sprintf("[exit code: %d]", code)
		switch c.Kind {
		case "error":
			c.Message = joinNote(c.Message, note)
		default:
			c.Text = joinNote(c.Text, note)
		}
		content[i].Content = &c
	}
	if content != nil {
		m.Content = content
	}
	return m
}

func joinNote(text, note string) string {
	if text == "" {
		return note
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + note
}

// systemPrompt is what a real model is told about its situation; the sim
// ignores it.
func systemPrompt(cwd, mode string) string {
	var sb strings.Builder
	sb.WriteString("You are Shard, a coding agent working on the user's machine. ")
	if cwd != "" {
		fmt.Fprintf(&sb, "Your working directory is %s; relative paths in tool calls resolve against it. ", cwd)
	}
	sb.WriteString("Use the tools to read, search and change files and to run commands; read before you edit, " +
		"keep changes focused, and say briefly what you did when you are done.")
	if mode == modePlan {
		sb.WriteString("\n\nYou are in plan mode: only read-only tools (read, ls, grep, find) run; tools that change " +
			"files or run commands are refused. Explore, then describe the changes you propose.")
	}
	return sb.String()
}

// reply is one provider call's answer as it streams in: the blocks by the
// provider's block index, plus the call's usage and stop.
type reply struct {
	msgID   string
	model   string // the model asked for
	blocks  []*replyBlock
	usage   *protocol.Usage
	stopped bool // EventStop arrived: the answer is complete
}

// replyBlock is one content block being assembled.
type replyBlock struct {
	typ      string // protocol.BlockText, BlockThinking or BlockToolCall
	text     strings.Builder
	id, name string          // tool_call
	args     strings.Builder // tool_call: JSON text
	sig      *provider.Signature
}

// providerCall makes one provider call, streaming its answer as
// message_delta events, and ends it with message_complete (adding the
// message to the live window) and usage. It returns the tool calls of a
// complete answer, or the outcome that ends the turn.
func (r *runtime) providerCall(t *turnState) ([]toolCallReq, *outcome) {
	r.mu.Lock()
	req := r.requestLocked()
	r.mu.Unlock()

	st, err := t.prov.Stream(t.ctx, req)
	if err != nil {
		return nil, r.callFailed(t, err)
	}
	defer st.Close()
	a := &reply{msgID: r.ids.next("msg"), model: req.Model}
	var end error
	for {
		// A stream ends with io.EOF or an error, also after an abort:
		// cancelling t.ctx makes Next return promptly.
		ev, err := st.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				end = err
			}
			break
		}
		r.apply(t, a, ev)
	}
	if errors.Is(end, errHung) {
		return nil, &outcome{kind: outHung}
	}
	calls := r.complete(t, a)
	if end == nil && a.stopped {
		return calls, nil
	}
	if end == nil { // io.EOF without EventStop: a provider bug
		end = protocol.Errorf(protocol.CodeProviderError, "%s: stream ended without a stop", t.prov.Name())
	}
	return nil, r.callFailed(t, end)
}

// callFailed is the outcome of a provider call that failed with err.
func (r *runtime) callFailed(t *turnState, err error) *outcome {
	if t.ctx.Err() != nil {
		return &outcome{kind: outAborted}
	}
	// The message says what went wrong without secrets, but may quote the
	// service: only the status goes to stderr.
	r.log.Warn("provider call failed", "provider", t.prov.Name(), "http_status", provider.HTTPStatus(err))
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return &outcome{kind: outFailed, err: pe}
	}
	return &outcome{kind: outFailed, err: protocol.Errorf(protocol.CodeProviderError, "%w", err)}
}

// apply folds one event into the answer and streams it as a message_delta.
// After an abort nothing more reaches the wire or the message, except the
// usage; the answer stays incomplete.
func (r *runtime) apply(t *turnState, a *reply, ev provider.Event) {
	switch ev.Kind {
	case provider.EventUsage:
		a.usage = ev.Usage
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.aborted || t.ctx.Err() != nil {
		return // a stop after the abort leaves the answer incomplete too
	}
	if ev.Kind == provider.EventStop {
		a.stopped = true
		return
	}
	d := protocol.MessageDelta{Header: protocol.Header{Type: protocol.TypeMessageDelta}, MessageID: a.msgID, BlockIndex: ev.Index}
	switch ev.Kind {
	case provider.EventText:
		b := a.block(ev.Index, protocol.BlockText)
		if b == nil || ev.Text == "" {
			return
		}
		b.text.WriteString(ev.Text)
		d.Kind, d.TextDelta = protocol.DeltaText, ev.Text
	case provider.EventThinking:
		b := a.block(ev.Index, protocol.BlockThinking)
		if b == nil {
			return
		}
		if ev.Signature != "" || ev.Redacted { // kept for the round trip, never shown
			if b.sig == nil {
				b.sig = &provider.Signature{}
			}
			b.sig.Value += ev.Signature
			b.sig.Redacted = b.sig.Redacted || ev.Redacted
		}
		if ev.Text == "" {
			return
		}
		b.text.WriteString(ev.Text)
		d.Kind, d.TextDelta = protocol.DeltaThinking, ev.Text
	case provider.EventToolCallStart:
		b := a.block(ev.Index, protocol.BlockToolCall)
		if b == nil {
			return
		}
		b.id, b.name = ev.ToolCallID, ev.ToolName
		d.Kind, d.ToolCallID, d.Name = protocol.DeltaToolCall, ev.ToolCallID, ev.ToolName
	case provider.EventToolCallArgs:
		b := a.block(ev.Index, protocol.BlockToolCall)
		if b == nil || ev.ArgsDelta == "" {
			return
		}
		b.args.WriteString(ev.ArgsDelta)
		d.Kind, d.ArgsDelta = protocol.DeltaToolCall, ev.ArgsDelta
	default:
		return
	}
	r.emitLocked(d)
}

// block returns block idx, opening it with typ on first use; nil when idx
// is out of range or already holds another kind of block.
func (a *reply) block(idx int, typ string) *replyBlock {
	if idx < 0 || idx > len(a.blocks)+maxBlockGap {
		return nil
	}
	for len(a.blocks) <= idx {
		a.blocks = append(a.blocks, nil)
	}
	b := a.blocks[idx]
	if b == nil {
		b = &replyBlock{typ: typ}
		a.blocks[idx] = b
	}
	if b.typ != typ {
		return nil
	}
	return b
}

// maxBlockGap bounds how far ahead of the blocks seen so far an event's
// block index may point (providers number blocks densely).
const maxBlockGap = 64

// complete ends a provider call: message_complete with what the call
// produced, the message into the live window (and the thinking signatures
// by block), then usage. The tool calls of an answer that did not complete
// are dropped (they are never run, so the transcript holds no unanswered
// call). It returns the tool calls to run.
func (r *runtime) complete(t *turnState, a *reply) []toolCallReq {
	var (
		content []protocol.ContentBlock
		calls   []toolCallReq
		sigs    = map[int]provider.Signature{}
	)
	for _, b := range a.blocks {
		if b == nil {
			continue
		}
		switch b.typ {
		case protocol.BlockText:
			content = append(content, protocol.ContentBlock{Type: protocol.BlockText, Text: b.text.String()})
		case protocol.BlockThinking:
			if b.text.Len() == 0 && b.sig == nil {
				continue
			}
			if b.sig != nil {
				sigs[len(content)] = *b.sig
			}
			content = append(content, protocol.ContentBlock{Type: protocol.BlockThinking, Text: b.text.String()})
		case protocol.BlockToolCall:
			if !a.stopped {
				continue
			}
			args, err := decodeToolArgs(b.args.String())
			content = append(content, protocol.ContentBlock{Type: protocol.BlockToolCall, ID: b.id, Name: b.name, Args: args})
			calls = append(calls, toolCallReq{id: b.id, name: b.name, args: args, argsErr: err})
		}
	}

	u := a.usage
	if u == nil && a.stopped && len(content) > 0 { // a server that reports none
		u = &protocol.Usage{Model: a.model}
	}
	// The message is written with its signatures under mu, fsynced without
	// it, and only then enters the live window and is announced: get_sync
	// never shows a message before its message_complete, and both come
	// after the entry is on disk.
	msg := protocol.Message{ID: a.msgID, Role: roleAssistant, Content: content}
	var written writeTicket
	if len(content) > 0 {
		r.mu.Lock()
		for i, sig := range sigs {
			r.meta.sigs[provider.BlockRef{MessageID: a.msgID, Index: i}] = sig
		}
		written = r.persistLocked(msg)
		r.mu.Unlock()
		r.awaitDurable(written)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(content) > 0 {
		r.window = append(r.window, msg)
		r.emitLocked(protocol.MessageComplete{Header: protocol.Header{Type: protocol.TypeMessageComplete}, MessageID: a.msgID, Message: msg})
	}
	if u != nil {
		usage := *u
		usage.Model = cmp.Or(usage.Model, a.model)
		usage = r.priced(usage, a.model)
		t.usage.Input += usage.Input
		t.usage.Output += usage.Output
		t.usage.CacheRead += usage.CacheRead
		t.usage.CacheWrite += usage.CacheWrite
		t.usage.Cost += usage.Cost
		t.usage.ContextTokens = usage.ContextTokens
		t.usage.Model = usage.Model
		r.lastContext = usage.ContextTokens
		r.emitLocked(protocol.UsageEvent{Header: protocol.Header{Type: protocol.TypeUsage}, Usage: usage})
	}
	return calls
}

// decodeToolArgs decodes a tool call's JSON arguments; empty means {}.
// Numbers keep their text (json.Number), so the canonical form used by
// allow_always is exact. Arguments that are not a JSON object give {} and
// the error the call will report.
func decodeToolArgs(raw string) (map[string]any, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil || args == nil {
		return map[string]any{}, errors.New("the arguments are not a JSON object")
	}
	if dec.More() {
		return map[string]any{}, errors.New("trailing data after the arguments' JSON object")
	}
	return args, nil
}

// ---- the sim's runtime-level directives (simHost) ----

// simHang makes the runtime unresponsive (escalation tests): nothing is
// written or answered again, SIGTERM is ignored (unless onlyAbort), and the
// turn goroutine blocks without spinning until Run's context is done.
func (r *runtime) simHang(onlyAbort bool) error {
	r.log.Warn("sim: hang: ignoring input and abort", "sigterm_ignored", !onlyAbort)
	r.mu.Lock()
	r.hung = true
	r.mu.Unlock()
	if !onlyAbort {
		r.opts.IgnoreSignals()
	}
	<-r.runCtx.Done()
	return errHung
}

// simExit exits the process.
func (r *runtime) simExit(code int) {
	r.log.Warn("sim: exit", "code", code)
	r.opts.Exit(code)
}

// simAsk opens a ui_request, waits for it, and returns the model's reply
// quoting the answer.
func (r *runtime) simAsk(t *turnState, d directive) (string, error) {
	p := &pendingRequest{id: r.ids.next("ui"), kind: kindUI, done: make(chan resolution, 1)}
	p.raw = protocol.MustMarshal(protocol.UIRequest{
		Header:    protocol.Header{Type: protocol.TypeUIRequest},
		RequestID: p.id,
		Kind:      d.askKind,
		Title:     d.title,
		Options:   d.options,
	})
	if err := r.open(t, p, protocol.StatusWaitingForUI); err != nil {
		return "", err
	}
	res := r.await(t, p)
	switch res.by {
	case byAbort:
		return "", errTurnAborted
	case byTimeout:
		return fmt.Sprintf("answer: null (TIMEOUT: no answer within %s)", r.opts.HeadlessTimeout), nil
	}
	return "answer: " + uiValueText(res.value), nil
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
// never holds an unanswered call) but no events. The message is written to
// the transcript (with the exit codes) and synced before runTools returns,
// so before any turn_end.
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
	var written writeTicket
	if b.idx >= 0 {
		written = r.persistLocked(r.window[b.idx])
	}
	r.mu.Unlock()
	r.awaitDurable(written)
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
	tl, ok := r.tools[c.name]
	if !ok {
		return r.report(t, b, c, tool{name: c.name}, func() toolOutput { return errorOutput("unknown tool %q", c.name) })
	}
	fail := func(out toolOutput) error {
		return r.report(t, b, c, tool{name: tl.name, readOnly: tl.readOnly}, func() toolOutput { return out })
	}
	switch {
	case tl.unavailable != "":
		return fail(errorOutput("%s", tl.unavailable))
	case c.argsErr != nil:
		return fail(errorOutput("invalid arguments: %v", c.argsErr))
	}
	if err := tl.check(c.args); err != nil {
		return fail(errorOutput("%v", err))
	}
	if !tl.readOnly && !tl.ungated {
		refusal, err := r.gate(t, tl, c)
		if err != nil {
			return err
		}
		if refusal != nil {
			return fail(*refusal)
		}
	}
	return r.report(t, b, c, tl, func() toolOutput { return tl.run(t.ctx, c.args) })
}

// report writes tool_call (with tl's start-time render, if any), runs fn,
// and writes tool_result while adding the result to the live window.
func (r *runtime) report(t *turnState, b *toolBatch, c toolCallReq, tl tool, fn func() toolOutput) error {
	args := c.args
	if args == nil {
		args = map[string]any{}
	}
	var render *protocol.RenderDescriptor
	if tl.preview != nil {
		render = tl.preview(args)
	}
	readOnly := tl.readOnly
	r.mu.Lock()
	if t.aborted || t.ctx.Err() != nil {
		r.mu.Unlock()
		return errTurnAborted
	}
	r.emitLocked(protocol.ToolCall{Header: protocol.Header{Type: protocol.TypeToolCall}, ToolCallID: c.id, Name: c.name, Args: args, Render: render, ReadOnly: &readOnly})
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
		ExitCode:   out.exitCode,
		DurationMs: &ms,
		Render:     out.render,
	})
	if out.exitCode != nil {
		r.meta.exitCodes[c.id] = *out.exitCode
	}
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
//
// An exact request the user allowed always (persisted in grants.jsonl) runs
// without asking, whatever the headless policy. Any other request is sent
// out and waits for an answer; under the daemon, a request nobody
// interactive can answer is answered by the daemon's headless path (deny,
// source "headless", for deny and allow_if_rule_matches; nothing for queue).
// When no answer comes within HeadlessTimeout the policy decides what the
// model is told: queue fails the tool with TIMEOUT, deny and
// allow_if_rule_matches deny it.
func (r *runtime) gate(t *turnState, tl tool, c toolCallReq) (*toolOutput, error) {
	key := grantKey(c)
	r.mu.Lock()
	if r.mode == modePlan {
		r.mu.Unlock()
		out := errorOutput("%s is not allowed: the agent is in plan mode, where tools that change files or run commands are refused; switch to build mode to run it", c.name)
		return &out, nil
	}
	if r.grants.has(key) { // every headless policy honours the user's own grants
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
	case res.by == byTimeout && r.opts.HeadlessPolicy == protocol.HeadlessQueue:
		out = errorOutput("permission request timed out (TIMEOUT): no answer within %s", r.opts.HeadlessTimeout)
	case res.by == byTimeout:
		out = errorOutput("permission denied: no answer within %s (headless policy %s)", r.opts.HeadlessTimeout, r.opts.HeadlessPolicy)
	case res.decision == protocol.DecisionAllow:
		return nil, nil
	case res.decision == protocol.DecisionAllowAlways:
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.grants.add(c, time.Now()); err != nil {
			r.log.Error("grant not persisted; it holds until the runtime stops", slog.Any("err", err))
		}
		return nil, nil
	case res.source == sourceHeadless:
		out = errorOutput("permission denied by the headless policy: no interactive client could answer")
	default:
		out = errorOutput("permission denied")
	}
	return &out, nil
}
