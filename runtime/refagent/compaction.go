package refagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
	"github.com/shard-dev/shard/runtime/provider"
)

// Compaction (docs/protocol.md §9.2 session_op compact, §9.4 compaction).
//
// One pipeline serves the three triggers: session_op compact (on demand,
// between turns), the reserve tier (between turns, when the context is above
// 80% of the window once a turn ended) and the emergency tier (mid-turn,
// before a provider call, when the context has reached the window). The
// pipeline keeps the most recent messages worth at least keep-recent tokens
// and replaces everything before them with a summary:
//
//   - the cut is the latest safe boundary that keeps enough: a message that
//     is not a tool-result message (a tool result never loses its call);
//     with none, or when the whole window is within the budget, nothing
//     happens (no_safe_cut);
//   - the summary is written by the active provider (the sim writes a
//     deterministic one: the first words of the prompts and the tools
//     called), prefixed with "[compaction N]" and the summarized range, and
//     takes the place of the summarized messages as a user message whose id
//     is the compaction's entry id;
//   - a compaction entry (session.go) is written under runtime.mu, synced
//     without it, then the window is replaced and the compaction event
//     emitted under it again.
//
// The conversation plans, writes and installs a compaction (its methods
// below); the runtime runs the between-turn ones in a goroutine of their
// own (turnLoop.compacting), and a turn runs the emergency tier itself.
//
// Token counts are estimates: bytes/4 of the window's content (the sim's
// own measure), or, for a real provider, the larger of that and the context
// the last provider call reported.

const (
	// compactionPrefix prefixes the ids of compaction entries, and so of
	// summary messages.
	compactionPrefix = "cmp"
	// reasonNoSafeCut is the reason of a compaction that did nothing.
	reasonNoSafeCut = "no_safe_cut"
	// maxDefaultKeep caps the default keep-recent budget (tokens).
	maxDefaultKeep = 20_000
	// summaryWords is how many words of each prompt the sim's summary
	// quotes.
	summaryWords = 6
)

// errNoGain ends an automatic compaction whose summary would not shrink
// the context (tiny windows): nothing is written or emitted.
var errNoGain = errors.New("agent: compaction would not shrink the context")

// isSummaryID reports whether a live-window message id is a compaction
// summary's.
func isSummaryID(id string) bool { return strings.HasPrefix(id, compactionPrefix+"-") }

// Response data of session_op compact.
type (
	compactedData struct {
		Compacted        bool      `json:"compacted"`
		Index            int       `json:"index"`
		TokensBefore     int64     `json:"tokens_before"`
		TokensAfter      int64     `json:"tokens_after"`
		FirstKeptEntryID string    `json:"first_kept_entry_id"`
		MessageRange     [2]string `json:"message_range"`
	}
	notCompactedData struct {
		Compacted bool   `json:"compacted"`
		Reason    string `json:"reason"`
	}
)

// summarizer writes the body of a compaction summary of span, the
// messages being summarized as the model sees them (an earlier summary
// first, if there is one).
type summarizer func(ctx context.Context, span []protocol.Message) (string, error)

// compactJob is one compaction: planned under runtime.mu, summarized
// without it, applied under it again. Its fields are set when it is
// planned and started, and not changed after.
type compactJob struct {
	h      *protocol.Header // the session_op to answer; nil when automatic
	cancel context.CancelFunc
	ctx    context.Context
	index  int   // the compaction's index (1 for a session's first)
	start  int   // first summarized message that is not an earlier summary
	cut    int   // first kept message
	size   int   // len(window) when planned
	before int64 // tokens before
	span   []protocol.Message
	write  summarizer
}

// keepTokensLocked is the default keep-recent budget: Options.KeepRecentTokens
// or a fifth of the window, at most maxDefaultKeep.
func (r *runtime) keepTokensLocked() int64 {
	if r.opts.KeepRecentTokens > 0 {
		return int64(r.opts.KeepRecentTokens)
	}
	return max(1, min(maxDefaultKeep, r.sel.windowLimitLocked()/5))
}

// overReserveLocked reports a context above the reserve threshold (80% of
// the window): time to compact between turns.
func (r *runtime) overReserveLocked() bool {
	if r.opts.NoAutoCompaction {
		return false
	}
	return r.conv.contextTokensLocked()*5 > r.sel.windowLimitLocked()*4
}

// atLimitLocked reports a context that has reached the window: time to
// compact before the next provider call (the emergency tier).
func (r *runtime) atLimitLocked() bool {
	if r.opts.NoAutoCompaction {
		return false
	}
	return r.conv.contextTokensLocked() >= r.sel.windowLimitLocked()
}

// safeCut reports whether the window may start at m after a summary: any
// message but a tool-result message, whose call would be summarized away.
func safeCut(m protocol.Message) bool {
	if m.Role == roleAssistant {
		return true
	}
	return !slices.ContainsFunc(m.Content, func(b protocol.ContentBlock) bool { return b.Type == protocol.BlockToolResult })
}

// planCut returns the first message to keep of w: the latest safe cut at or
// before the point where the messages after it hold keep tokens, and after
// start (at least one message not yet summarized goes). ok is false when
// there is no such cut.
func planCut(w []protocol.Message, start int, keep int64) (cut int, ok bool) {
	var acc int64
	for i := len(w) - 1; i > start; i-- {
		acc += int64(contentBytes(w[i].Content))
		if acc < keep*4 {
			continue
		}
		for c := i; c > start; c-- {
			if safeCut(w[c]) {
				return c, true
			}
		}
		return 0, false
	}
	return 0, false
}

// planCompactionLocked plans a compaction that keeps keep tokens, with the
// active provider's summarizer, or returns nil when there is no safe cut.
func (r *runtime) planCompactionLocked(keep int64) *compactJob {
	return r.conv.planLocked(keep, r.summarizerLocked())
}

// planLocked plans a compaction that keeps keep tokens and is summarized
// by write (nil: the sim's summary), or returns nil when there is no safe
// cut.
func (c *conversation) planLocked(keep int64, write summarizer) *compactJob {
	w := c.window
	start := 0
	if len(w) > 0 && c.summaryID != "" && w[0].ID == c.summaryID {
		start = 1
	}
	cut, ok := planCut(w, start, keep)
	if !ok {
		return nil
	}
	span := make([]protocol.Message, cut)
	for i := range cut {
		span[i] = c.forModelLocked(w[i])
	}
	return &compactJob{
		index:  c.compactionIndex + 1,
		start:  start,
		cut:    cut,
		size:   len(w),
		before: c.contextTokensLocked(),
		span:   span,
		write:  write,
	}
}

// summarizerLocked is the active real provider's summarizer; nil for the
// sim, whose summary is simSummary.
func (r *runtime) summarizerLocked() summarizer {
	real := r.sel.models.entry(r.sel.active).real
	if real == nil {
		return nil
	}
	p, model, sigs, tools := real, r.sel.active.Model, maps.Clone(r.conv.meta.sigs), r.currentTools().specs
	return func(ctx context.Context, span []protocol.Message) (string, error) {
		return providerSummary(ctx, p, provider.Request{Model: model, System: summarySystem, Tools: tools, Signatures: sigs}, span)
	}
}

// The prompts of a provider-written summary.
const (
	summarySystem = "You write summaries of conversations between a user and a coding agent, so that the agent " +
		"can carry on the work with less context. Do not call tools; answer with the summary only."
	summaryRequest = "Summarize the conversation above for yourself: what the user asked for, what was decided, " +
		"which files were read or changed, which commands ran and what they showed, and what is still to do. " +
		"Be concise and specific; plain text."
)

// providerSummary asks p for a summary of span and returns its text.
func providerSummary(ctx context.Context, p provider.Provider, req provider.Request, span []protocol.Message) (string, error) {
	// A summary is text: the images of the span are named, not sent.
	req.Messages = append(slices.Clone(images.TextOnly(span)), userMessage("msg-summary-request", summaryRequest))
	st, err := p.Stream(ctx, req)
	if err != nil {
		return "", err
	}
	defer st.Close()
	var sb strings.Builder
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return sb.String(), nil
		}
		if err != nil {
			return "", err
		}
		if ev.Kind == provider.EventText {
			sb.WriteString(ev.Text)
		}
	}
}

// simSummary is the sim's deterministic summary of span: the first words
// of each prompt, the tools called and how their results went. No line
// starts with "sim:", so a summary is never read as a script.
func simSummary(span []protocol.Message) string {
	var (
		prompts         []string
		calls           []string
		count           = map[string]int{}
		results, failed int
		earlier         bool
	)
	for _, m := range span {
		if isSummaryID(m.ID) {
			earlier = true
			continue
		}
		if text := userText(m); text != "" {
			prompts = append(prompts, strconv.Quote(firstWords(text, summaryWords)))
		}
		for _, b := range m.Content {
			switch b.Type {
			case protocol.BlockToolCall:
				if count[b.Name] == 0 {
					calls = append(calls, b.Name)
				}
				count[b.Name]++
			case protocol.BlockToolResult:
				results++
				if b.IsError {
					failed++
				}
			}
		}
	}
	var lines []string
	if earlier {
		lines = append(lines, "Includes the previous summary.")
	}
	if len(prompts) > 0 {
		lines = append(lines, "Prompts: "+strings.Join(prompts, "; ")+".")
	}
	if len(calls) > 0 {
		for i, name := range calls {
			if n := count[name]; n > 1 {
				calls[i] = fmt.Sprintf("%s ×%d", name, n)
			}
		}
		lines = append(lines, fmt.Sprintf("Tool calls: %s; %d results, %d failed.", strings.Join(calls, ", "), results, failed))
	}
	if len(lines) == 0 {
		lines = append(lines, "Replies only.")
	}
	return strings.Join(lines, "\n")
}

// firstWords returns the first n words of text, with "…" when it goes on.
func firstWords(text string, n int) string {
	words := strings.Fields(text)
	if len(words) <= n {
		return strings.Join(words, " ")
	}
	return strings.Join(words[:n], " ") + "…"
}

// summarize runs the job's summarizer (the sim's when there is no real
// provider).
func (j *compactJob) summarize(ctx context.Context) (string, error) {
	if j.write == nil {
		return simSummary(j.span), nil
	}
	return j.write(ctx, j.span)
}

// pendingCompaction is a compaction whose entry is written but not yet
// durable: commitCompaction installs it.
type pendingCompaction struct {
	d       compactedData
	window  []protocol.Message // the live window after it
	dropped []protocol.Message // the summarized messages, whose meta goes
	id      string             // the compaction's entry id (and summary's)
	index   int
	written writeTicket
}

// writeCompactionLocked builds the summary that replaces the summarized
// messages and writes the compaction entry (not yet fsynced; see session).
// It fails, leaving window and transcript as they were, for an empty
// summary or a failed write, and for an automatic compaction that would not
// make the window smaller (errNoGain). Until commitCompaction installed it
// the live window must not change: the caller is the turn goroutine
// (emergency tier) or holds turnLoop.compacting (between turns), which
// keeps prompts queued.
func (c *conversation) writeCompactionLocked(j *compactJob, body string) (*pendingCompaction, error) {
	body = strings.TrimSpace(body)
	if body == "" {
		return nil, protocol.Errorf(protocol.CodeInternal, "compaction produced an empty summary")
	}
	if len(c.window) != j.size {
		return nil, protocol.Errorf(protocol.CodeInternal, "the live window changed during compaction")
	}
	w := c.window
	first, last := w[j.start].ID, w[j.cut-1].ID
	id := c.ids.next(compactionPrefix)
	text := fmt.Sprintf("[compaction %d] Summary of %d earlier messages (%s … %s):\n%s", j.index, j.cut-j.start, first, last, body)
	nw := make([]protocol.Message, 0, 1+len(w)-j.cut)
	nw = append(nw, summaryMessage(id, text))
	nw = append(nw, w[j.cut:]...)
	d := compactedData{
		Compacted:        true,
		Index:            j.index,
		TokensBefore:     j.before,
		TokensAfter:      tokens(windowBytes(nw)),
		FirstKeptEntryID: w[j.cut].ID,
		MessageRange:     [2]string{first, last},
	}
	if j.h == nil && d.TokensAfter >= tokens(windowBytes(w)) {
		return nil, errNoGain
	}
	rng := d.MessageRange
	e := entry{Type: entryCompaction, ID: id, TS: time.Now().UnixMilli(), compactionFields: compactionFields{
		Index: d.Index, Summary: text, FirstKeptEntryID: d.FirstKeptEntryID, MessageRange: &rng,
		TokensBefore: d.TokensBefore, TokensAfter: d.TokensAfter,
	}}
	written, err := c.store.write(e)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "write the compaction entry: %w", err)
	}
	return &pendingCompaction{d: d, window: nw, dropped: w[:j.cut], id: id, index: j.index, written: written}, nil
}

// commitCompaction waits, without mu, until the compaction entry is
// durable, then installs it under mu. mu must not be held. A failed sync
// fails the compaction with the window as it was (the entry stays in the
// file, as a failed sync always left it).
func (r *runtime) commitCompaction(pc *pendingCompaction) (compactedData, error) {
	if err := r.conv.store.durable(pc.written); err != nil {
		return compactedData{}, protocol.Errorf(protocol.CodeInternal, "write the compaction entry: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conv.installLocked(pc), nil
}

// installLocked replaces the live window with the one after the durable
// compaction pc and emits the compaction event.
func (c *conversation) installLocked(pc *pendingCompaction) compactedData {
	c.meta.forget(pc.dropped)
	c.window, c.summaryID, c.compactionIndex, c.lastContext = pc.window, pc.id, pc.index, 0
	d := pc.d
	c.out.emit(protocol.Compaction{
		Header:           protocol.Header{Type: protocol.TypeCompaction},
		Index:            d.Index,
		TokensBefore:     d.TokensBefore,
		TokensAfter:      d.TokensAfter,
		FirstKeptEntryID: d.FirstKeptEntryID,
		MessageRange:     d.MessageRange,
	})
	return d
}

// compactLocked handles session_op compact: status compacting, then (once
// summarized, in a goroutine of its own) the compaction event, the response
// and status idle. A window without a safe cut is answered at once with
// compacted:false.
func (r *runtime) compactLocked(h protocol.Header, args *protocol.SessionOpArgs) {
	if err := r.loop.betweenTurnsLocked(); err != nil {
		r.out.respondErr(h, err)
		return
	}
	keep := r.keepTokensLocked()
	if args != nil && args.KeepRecentTokens != nil {
		keep = *args.KeepRecentTokens // positive: checked by protocol.SessionOp.Validate
	}
	r.status.setLocked(protocol.StatusCompacting)
	j := r.planCompactionLocked(keep)
	if j == nil {
		r.out.respond(h, notCompactedData{Compacted: false, Reason: reasonNoSafeCut})
		r.status.setLocked(protocol.StatusIdle)
		return
	}
	j.h = &h
	r.startCompactionLocked(j)
}

// startCompactionLocked runs a between-turn compaction in its own
// goroutine; status is already compacting. Until it is done, prompts are
// queued and compact and fork are refused.
func (r *runtime) startCompactionLocked(j *compactJob) {
	j.ctx, j.cancel = context.WithCancel(r.runCtx)
	r.loop.compacting = j
	r.work.Go(func() { r.runCompaction(j) })
}

// runCompaction summarizes and applies a between-turn compaction, answers
// its session_op (if any), returns to idle and starts a queued prompt. An
// automatic compaction that fails is reported with a non-fatal error event.
func (r *runtime) runCompaction(j *compactJob) {
	body, err := j.summarize(j.ctx)
	// An abort is honoured up to the write of the entry; once written, the
	// compaction is installed (file and window agree). loop.compacting
	// stays set until then, so the window does not change meanwhile.
	r.mu.Lock()
	aborted := j.ctx.Err() != nil
	var pc *pendingCompaction
	switch {
	case aborted:
		err = protocol.Errorf(protocol.CodeInternal, "compaction aborted")
	case err != nil:
		err = protocol.Errorf(protocol.CodeInternal, "compaction failed: %s", protocol.AsError(err).Message)
	default:
		pc, err = r.conv.writeCompactionLocked(j, body)
	}
	r.mu.Unlock()
	var d compactedData
	if pc != nil {
		d, err = r.commitCompaction(pc)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	j.cancel()
	r.loop.compacting = nil
	switch {
	case j.h != nil && err != nil:
		r.out.respondErr(*j.h, err)
	case j.h != nil:
		r.out.respond(*j.h, d)
	case errors.Is(err, errNoGain):
		r.log.Info("automatic compaction skipped", slog.Any("err", err))
	case err != nil && !aborted:
		r.log.Warn("automatic compaction failed", slog.Any("err", err))
		r.out.emit(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeInternal, Message: "automatic " + protocol.AsError(err).Message})
	}
	r.status.setLocked(protocol.StatusIdle)
	r.nextFollowUpLocked()
}

// compactBeforeCall is the emergency tier: before a provider call of turn
// t, a context that has reached the window is compacted (status compacting,
// then back to streaming). Without a safe cut, or when the summary fails,
// the call goes ahead as it is. It returns an outcome only when the turn was
// aborted meanwhile.
func (t *turnState) compactBeforeCall() *outcome {
	r := t.r
	r.mu.Lock()
	if t.aborted || !r.atLimitLocked() {
		r.mu.Unlock()
		return nil
	}
	j := r.planCompactionLocked(r.keepTokensLocked())
	if j == nil {
		r.mu.Unlock()
		return nil
	}
	r.status.setLocked(protocol.StatusCompacting)
	r.mu.Unlock()

	body, err := j.summarize(t.ctx)

	r.mu.Lock()
	if t.aborted || t.ctx.Err() != nil {
		r.mu.Unlock()
		return &outcome{kind: outAborted}
	}
	var pc *pendingCompaction
	if err == nil {
		pc, err = r.conv.writeCompactionLocked(j, body)
	}
	r.mu.Unlock()
	if pc != nil {
		_, err = r.commitCompaction(pc)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.log.Warn("emergency compaction did not run", slog.Any("err", err))
	}
	r.status.setLocked(protocol.StatusStreaming)
	return nil
}
