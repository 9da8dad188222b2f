package refagent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
	"github.com/shard-dev/shard/runtime/provider"
)

// providerLocked returns the provider of the active model, which the next
// call of turn t goes to, and its prices: a real provider, shared by all
// turns, or a sim of the turn's own (it keeps the turn's script between
// calls). It is read per call, with the request, so a set_model to another
// provider applies from the next provider call on; the conversation learns
// whether that provider reports its context (conversation.reported).
func (r *runtime) providerLocked(t *turnState) (provider.Provider, map[string]Price) {
	e := r.sel.models.entry(r.sel.active)
	r.conv.reported = e.real != nil
	if e.real != nil {
		return e.real, e.prices
	}
	if t.sim == nil {
		t.sim = newSimTurn(t, t.promptID, r.ids, r.sel.models.window)
	}
	return t.sim, e.prices
}

// requestLocked assembles the next provider call from the live window, the
// current selection and tb, the tools it offers: the model and reasoning
// level are read here, once per call, so set_model and set_reasoning_level
// never affect a call in flight, nor a new tool list of an MCP server
// (docs/protocol.md §10.1).
func (r *runtime) requestLocked(tb *toolbox) provider.Request {
	msgs, sigs := r.conv.modelViewLocked()
	return provider.Request{
		Model:      r.sel.active.Model,
		System:     r.prompt.system(systemPrompt(r.opts.Cwd, r.sel.mode)),
		Messages:   msgs,
		Tools:      tb.specs,
		Reasoning:  r.sel.reasoning,
		Signatures: sigs,
	}
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
	model   string           // the model asked for
	prices  map[string]Price // its provider's prices
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
func (t *turnState) providerCall() ([]toolCallReq, *outcome) {
	r := t.r
	// An MCP server's tool-list change that arrived before this call is
	// in it. Its listing is bounded (mcpStartTimeout, as the first one);
	// the wait is bounded the same way, and an abort ends it.
	if settled := r.opts.mcpSettled; settled != nil {
		bound := time.NewTimer(r.opts.mcpStartTimeout)
		select {
		case <-settled():
		case <-t.ctx.Done():
		case <-bound.C:
		}
		bound.Stop()
	}
	r.mu.Lock()
	// The call's tool calls run against the tools it offered (runTool).
	t.tools = r.currentTools()
	req := r.requestLocked(t.tools)
	prov, prices := r.providerLocked(t)
	t.prov = prov
	takesImages, real := r.sel.imagesLocked(), r.conv.reported
	if !t.aborted {
		t.answerDrainedLocked() // their messages are in req
	}
	r.mu.Unlock()
	// The window names images; a real model gets their bytes, read for
	// this call only, or, when it takes none, a line of text for each.
	switch {
	case !takesImages:
		req.Messages = images.TextOnly(req.Messages)
	case real:
		req.Messages = r.images.Inline(req.Messages)
	}

	st, err := prov.Stream(provider.WithRetryNotice(t.ctx, t.retrying), req)
	if err != nil {
		return nil, t.callFailed(err)
	}
	defer st.Close()
	a := &reply{msgID: r.ids.next("msg"), model: req.Model, prices: prices}
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
		t.apply(a, ev)
	}
	if errors.Is(end, errHung) {
		return nil, &outcome{kind: outHung}
	}
	calls := t.complete(a)
	if end == nil && a.stopped {
		return calls, nil
	}
	if end == nil { // io.EOF without EventStop: a provider bug
		end = protocol.Errorf(protocol.CodeProviderError, "%s: stream ended without a stop", t.prov.Name())
	}
	return nil, t.callFailed(end)
}

// retrying announces that the provider retries a failed request of the
// turn (called by the provider, on this turn's goroutine).
func (t *turnState) retrying() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.aborted || t.ctx.Err() != nil {
		return
	}
	t.r.log.Info("provider request failed; retrying", "provider", t.prov.Name())
	r.status.retryingLocked()
}

// callFailed is the outcome of a provider call that failed with err.
func (t *turnState) callFailed(err error) *outcome {
	if t.ctx.Err() != nil {
		return &outcome{kind: outAborted}
	}
	// The message says what went wrong without secrets, but may quote the
	// service: only the status goes to stderr.
	t.r.log.Warn("provider call failed", "provider", t.prov.Name(), "http_status", provider.HTTPStatus(err))
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return &outcome{kind: outFailed, err: pe}
	}
	return &outcome{kind: outFailed, err: protocol.Errorf(protocol.CodeProviderError, "%w", err)}
}

// apply folds one event into the answer and streams it as a message_delta.
// After an abort nothing more reaches the wire or the message, except the
// usage; the answer stays incomplete.
func (t *turnState) apply(a *reply, ev provider.Event) {
	switch ev.Kind {
	case provider.EventUsage:
		a.usage = ev.Usage
		return
	}
	r := t.r
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
	r.out.emit(d)
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
func (t *turnState) complete(a *reply) []toolCallReq {
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
	r := t.r
	if len(content) > 0 {
		r.mu.Lock()
		written := r.conv.writeAnswerLocked(msg, sigs)
		r.mu.Unlock()
		r.awaitDurable(written)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(content) > 0 {
		r.conv.addLocked(msg)
		r.out.emit(protocol.MessageComplete{Header: protocol.Header{Type: protocol.TypeMessageComplete}, MessageID: a.msgID, Message: msg})
	}
	if u != nil {
		usage := *u
		usage.Model = cmp.Or(usage.Model, a.model)
		usage = priced(a.prices, usage, a.model)
		t.usage.Input += usage.Input
		t.usage.Output += usage.Output
		t.usage.CacheRead += usage.CacheRead
		t.usage.CacheWrite += usage.CacheWrite
		t.usage.Cost += usage.Cost
		t.usage.ContextTokens = usage.ContextTokens
		t.usage.Model = usage.Model
		r.conv.reportContextLocked(usage.ContextTokens)
		r.out.emit(protocol.UsageEvent{Header: protocol.Header{Type: protocol.TypeUsage}, Usage: usage})
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
