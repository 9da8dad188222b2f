package refagent

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
	"github.com/shard-dev/shard/runtime/provider"
)

// errHung ends the turn goroutine after `sim: hang` once Run's context is
// done.
var errHung = errors.New("agent: runtime hung")

// turnLoop is what the agent is doing or will do next: the turn in flight,
// the follow-up prompts queued behind it and the between-turn compaction
// running. At most one of cur and compacting is set; a prompt that comes
// while either runs is queued (or, mid-turn, steered in). It also
// remembers which dedupe-keyed prompts were accepted, so a repeat is
// acknowledged and not run twice.
//
// runtime.mu protects every field; the methods ending in Locked must be
// called with it held.
type turnLoop struct {
	cur        *turnState     // the turn in flight; nil when none
	followUps  []queuedPrompt // queued follow_up prompts, oldest first
	compacting *compactJob    // the between-turn compaction running; nil when none
	closing    bool           // shutdown began: no new turns
	// delivered: ids of dedupe-keyed prompts accepted (transcript + this
	// run).
	delivered map[string]bool
}

// queuedPrompt is a user message waiting for its turn (or its provider
// boundary); id is preset for dedupe-keyed prompts. images are the blocks
// of its images, stored already (images.Store).
type queuedPrompt struct {
	text, id string
	images   []protocol.ContentBlock
	// strict is the header of a strict steer (the daemon's subagent.steer,
	// docs/protocol.md §10.3), answered only once the message is in a
	// provider request (SteerData) or, when the turn ends first, with
	// CONFLICT. nil for every other message.
	strict *protocol.Header
}

// nextLocked takes the oldest queued follow-up when a turn may start now:
// not shutting down, no turn in flight, no compaction running.
func (l *turnLoop) nextLocked() (queuedPrompt, bool) {
	if l.closing || l.cur != nil || l.compacting != nil || len(l.followUps) == 0 {
		return queuedPrompt{}, false
	}
	next := l.followUps[0]
	l.followUps = l.followUps[1:]
	return next, true
}

// betweenTurnsLocked refuses a between-turn operation (compact, fork)
// while turn work is queued or in flight.
func (l *turnLoop) betweenTurnsLocked() error {
	switch {
	case l.closing:
		return protocol.Errorf(protocol.CodeConflict, "the runtime is shutting down")
	case l.cur != nil:
		return protocol.Errorf(protocol.CodeConflict, "a turn is in flight")
	case len(l.followUps) > 0:
		return protocol.Errorf(protocol.CodeConflict, "a turn is queued")
	case l.compacting != nil:
		return protocol.Errorf(protocol.CodeConflict, "a compaction is running")
	}
	return nil
}

// turnState is one turn: the prompt that started it and the provider calls
// and tool runs that follow until the model stops. Its methods are the
// turn's goroutine (run and what it calls): they take runtime.mu for each
// step that reads or changes the runtime's state and release it while the
// turn waits for the provider, a tool, an answer or the disk.
type turnState struct {
	// Set when the turn starts, not changed after.
	r        *runtime
	id       string
	promptID string          // id of the prompt's message in the live window
	ctx      context.Context // cancelled by abort, shutdown or Run's context
	cancel   context.CancelFunc
	// prompt is the transcript write of the prompt's message, set before
	// the turn goroutine starts; the goroutine waits for it to be durable
	// before anything else (so before any turn_end).
	prompt writeTicket

	// runtime.mu protects the following.
	steers []queuedPrompt // steer messages not yet delivered, oldest first
	// drained are the strict steers in the live window whose provider
	// request has not been built yet: providerCall answers them.
	drained []protocol.Header
	aborted bool
	sim     provider.Provider // the turn's own sim, made at its first sim call (runtime.providerLocked)

	// Owned by the turn goroutine.
	usage protocol.Usage
	prov  provider.Provider // what the current provider call goes to
	tools *toolbox          // what the current provider call offered
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

// toolCallReq is a tool call the model made. argsErr is set when its
// arguments were not a JSON object (args is then empty).
type toolCallReq struct {
	id      string
	name    string
	args    map[string]any
	argsErr error
}

// userMessage is a user message of text and images: the images first (as
// the Anthropic API advises), then the text; an images-only prompt has no
// text block.
func userMessage(id, text string, images ...protocol.ContentBlock) protocol.Message {
	content := make([]protocol.ContentBlock, 0, len(images)+1)
	content = append(content, images...)
	if text != "" || len(images) == 0 {
		content = append(content, protocol.ContentBlock{Type: protocol.BlockText, Text: text})
	}
	return protocol.Message{ID: id, Role: roleUser, Content: content}
}

// startTurnLocked opens a turn for a user message and starts its goroutine.
func (r *runtime) startTurnLocked(q queuedPrompt) {
	if q.id == "" {
		q.id = r.ids.next("msg")
	}
	text := q.text
	t := &turnState{r: r, id: r.ids.next("turn"), promptID: q.id, usage: protocol.Usage{Model: r.sel.active.Model}}
	t.ctx, t.cancel = context.WithCancel(r.runCtx)
	r.loop.cur = t
	r.status.setLocked(protocol.StatusStreaming)
	r.out.emit(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart}, TurnID: t.id})
	t.prompt = r.conv.appendLocked(userMessage(t.promptID, text, q.images...))
	r.work.Go(t.run)
}

// run plays the turn: provider calls, each followed by its tool calls,
// until a call makes no tool call and no steer is waiting.
func (t *turnState) run() {
	r := t.r
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("turn panicked", slog.Any("panic", p))
			t.end(outcome{kind: outFailed, err: protocol.Errorf(protocol.CodeInternal, "internal error in the agent runtime")})
		}
	}()
	// The prompt was written under mu by startTurnLocked; its fsync runs
	// here, outside mu, so the command that started the turn is not held up.
	r.awaitDurable(t.prompt)
	for {
		if t.ctx.Err() != nil {
			t.end(outcome{kind: outAborted})
			return
		}
		t.deliverSteers()
		if end := t.compactBeforeCall(); end != nil {
			t.end(*end)
			return
		}
		t.deliverSteers() // any that came while compacting
		calls, end := t.providerCall()
		if end != nil {
			t.end(*end)
			return
		}
		if len(calls) > 0 {
			if end := t.runTools(calls); end != nil {
				t.end(*end)
				return
			}
			continue
		}
		if t.end(outcome{kind: outDone}) {
			return
		}
	}
}

// deliverSteers moves waiting steer messages into the live window, where
// the next provider call sees them.
func (t *turnState) deliverSteers() {
	r := t.r
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
		last = r.conv.appendLocked(userMessage(id, s.text, s.images...))
		if s.strict != nil {
			t.drained = append(t.drained, *s.strict)
		}
	}
	t.steers = nil
	r.mu.Unlock()
	r.awaitDurable(last) // one fsync covers them all
}

// answerDrainedLocked answers the strict steers whose messages are in the
// provider request just built: they joined the turn (docs/protocol.md
// §10.3 "injected"). The request is sent right after, outside mu.
func (t *turnState) answerDrainedLocked() {
	for _, h := range t.drained {
		t.r.out.respond(h, protocol.SteerData{TurnID: t.id})
	}
	t.drained = nil
}

// refuseStrictLocked answers CONFLICT to every strict steer of the turn
// not yet in a provider request: the turn ended (or was aborted) first,
// and a strict steer is never kept for a later turn. It returns the
// steers that are not strict.
func (t *turnState) refuseStrictLocked(why string) []queuedPrompt {
	var rest []queuedPrompt
	for _, s := range t.steers {
		if s.strict == nil {
			rest = append(rest, s)
			continue
		}
		t.r.out.respondErr(*s.strict, protocol.Errorf(protocol.CodeConflict, "%s before the steer reached the model", why))
	}
	for _, h := range t.drained {
		t.r.out.respondErr(h, protocol.Errorf(protocol.CodeConflict, "%s before the steer reached the model", why))
	}
	t.steers, t.drained = nil, nil
	return rest
}

// endTurn writes the end of a turn and starts the next queued follow-up. A
// turn that finished normally while a steer is waiting does not end: it
// returns false and the caller makes another provider call. When the
// context is above the reserve threshold after a turn that did not fail,
// the agent compacts (status compacting instead of idle) before any
// follow-up runs.
func (t *turnState) end(out outcome) bool {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.loop
	if l.cur != t {
		return true // already ended (a panic inside endTurn)
	}
	if out.kind == outDone && len(t.steers) > 0 && !t.aborted {
		return false
	}
	t.cancel()
	why := "the turn ended"
	if out.kind == outFailed {
		why = "the turn failed"
	}
	rest := t.refuseStrictLocked(why)
	if out.kind == outFailed && len(rest) > 0 { // keep them: run after
		l.followUps = append(slices.Clone(rest), l.followUps...)
	}
	r.reqs.abortAllLocked() // only after a panic: never leave a request open
	l.cur = nil
	if out.kind == outHung {
		return true
	}
	status := protocol.StatusIdle
	if out.kind == outFailed {
		status = protocol.StatusError
		r.out.emit(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: out.err.Code, Message: out.err.Message})
	}
	usage := t.usage
	r.out.emit(protocol.TurnEnd{Header: protocol.Header{Type: protocol.TypeTurnEnd}, TurnID: t.id, Usage: &usage})
	if out.kind != outFailed && !l.closing && r.overReserveLocked() {
		if j := r.planCompactionLocked(r.keepTokensLocked()); j != nil {
			r.status.setLocked(protocol.StatusCompacting)
			r.startCompactionLocked(j)
			return true
		}
	}
	r.status.setLocked(status)
	r.nextFollowUpLocked()
	return true
}

// nextFollowUpLocked starts the oldest queued follow-up, if one may start.
func (r *runtime) nextFollowUpLocked() {
	if next, ok := r.loop.nextLocked(); ok {
		r.startTurnLocked(next)
	}
}

// ---- the sim's runtime-level directives (simHost) ----

// simHang makes the runtime unresponsive (escalation tests): nothing is
// written or answered again, SIGTERM is ignored (unless onlyAbort), and the
// turn goroutine blocks without spinning until Run's context is done.
func (t *turnState) simHang(onlyAbort bool) error {
	r := t.r
	r.log.Warn("sim: hang: ignoring input and abort", "sigterm_ignored", !onlyAbort)
	r.mu.Lock() // a command being handled is answered whole, or not at all
	r.out.hang()
	r.mu.Unlock()
	if !onlyAbort {
		r.opts.IgnoreSignals()
	}
	<-r.runCtx.Done()
	return errHung
}

// simExit exits the process.
func (t *turnState) simExit(code int) {
	t.r.log.Warn("sim: exit", "code", code)
	t.r.opts.Exit(code)
}

// simAsk opens a ui_request, waits for it, and returns the model's reply
// quoting the answer; a notify is announced and resolved at once, as the
// ask tool's is (notify), and the reply says so.
func (t *turnState) simAsk(d directive) (string, error) {
	if d.ui.Kind == protocol.UINotify {
		if err := t.notify(d.ui); err != nil {
			return "", err
		}
		return "notified: " + d.ui.Title, nil
	}
	res, err := t.askUI(d.ui)
	if err != nil {
		return "", err
	}
	if res.by == byTimeout {
		return fmt.Sprintf("answer: null (TIMEOUT: no answer within %s)", t.r.opts.HeadlessTimeout), nil
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
func (t *turnState) open(p *pendingRequest, waiting protocol.AgentStatus) error {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.aborted || t.ctx.Err() != nil {
		return errTurnAborted
	}
	r.reqs.openLocked(p, waiting)
	return nil
}

// await waits for p's resolution: an answer, the headless timeout, or the
// turn's end.
func (t *turnState) await(p *pendingRequest) resolution {
	timer := time.NewTimer(t.r.opts.HeadlessTimeout)
	defer timer.Stop()
	select {
	case res := <-p.done:
		return res
	case <-timer.C:
		t.resolveIfOpen(p, resolution{decision: protocol.DecisionDeny, source: sourceTimeout, by: byTimeout})
	case <-t.ctx.Done():
		t.resolveIfOpen(p, resolution{decision: protocol.DecisionDeny, source: sourceAbort, by: byAbort})
	}
	return <-p.done // whichever resolution won
}

// resolveIfOpen resolves p unless an answer already won.
func (t *turnState) resolveIfOpen(p *pendingRequest, res resolution) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.r.reqs.resolveLocked(p, res)
}
