package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// pending is an open permission_request.
type pending struct {
	id      string
	raw     []byte            // the event as written; get_sync returns it
	options map[string]Option // by choice id (the agent's option id)
	order   []Option
	done    chan Answer // buffered: the resolver never blocks
}

func (h *Host) pendingRawLocked() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(h.pending))
	for _, p := range h.pending {
		out = append(out, p.raw)
	}
	return out
}

// intentOf maps an agent's option kind to a choice intent.
func intentOf(kind string) string {
	switch kind {
	case AllowAlways:
		return "persist"
	case RejectOnce, RejectAlways:
		return protocol.DecisionDeny
	}
	return protocol.DecisionAllow
}

// decisionOf maps an agent's option kind to the legacy decision.
func decisionOf(kind string) string {
	switch kind {
	case AllowAlways:
		return protocol.DecisionAllowAlways
	case RejectOnce, RejectAlways:
		return protocol.DecisionDeny
	}
	return protocol.DecisionAllow
}

// Ask implements Events: the agent's request becomes a permission_request
// with the agent's own options as choices; the daemon fans it out, applies
// first-response-wins, the headless policy and delegation exactly as for
// the reference runtime. An abort (or ctx) answers Cancelled; past
// HeadlessTimeout the request is denied.
func (h *Host) Ask(ctx context.Context, a Ask) Answer {
	h.mu.Lock()
	if h.closing || (h.started && h.turn == nil) {
		h.mu.Unlock()
		return Answer{Cancelled: true}
	}
	p := &pending{id: h.nextIDLocked("perm"), options: map[string]Option{}, done: make(chan Answer, 1)}
	ev := protocol.PermissionRequest{Header: protocol.Header{Type: protocol.TypePermissionRequest}, RequestID: p.id,
		ToolName: cmp.Or(a.Tool.Name, "tool"), Input: argsOrEmpty(a.Tool.Args), Prompt: cmp.Or(a.Tool.Title, a.Tool.Name)}
	legacy := map[string]bool{}
	for _, o := range a.Options {
		p.options[o.ID] = o
		p.order = append(p.order, o)
		ev.Choices = append(ev.Choices, protocol.PermissionChoice{ID: o.ID, Label: cmp.Or(o.Name, o.ID), Intent: intentOf(o.Kind)})
		legacy[decisionOf(o.Kind)] = true
	}
	for _, d := range []string{protocol.DecisionAllow, protocol.DecisionAllowAlways, protocol.DecisionDeny} {
		if legacy[d] || d == protocol.DecisionDeny {
			ev.Options = append(ev.Options, d)
		}
	}
	if a.Tool.Title != "" {
		ev.Details = append(ev.Details, protocol.PermissionDetail{Label: "call", Value: a.Tool.Title})
	}
	for _, d := range a.Tool.Diffs {
		ev.Details = append(ev.Details, protocol.PermissionDetail{Label: "file", Value: d.Path, Format: "path"})
	}
	raw, err := protocol.Marshal(ev)
	if err != nil {
		h.mu.Unlock()
		return Answer{Cancelled: true}
	}
	p.raw = raw
	h.pending = append(h.pending, p)
	h.writeLocked(raw)
	h.setStatusLocked(protocol.StatusWaitingForPermission)
	h.mu.Unlock()

	var timeout <-chan time.Time
	if h.opts.HeadlessTimeout > 0 {
		tm := time.NewTimer(h.opts.HeadlessTimeout)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case ans := <-p.done:
		return ans
	case <-timeout:
		h.mu.Lock()
		h.resolveLocked(p, h.pickLocked(p, protocol.DecisionDeny), protocol.DecisionDeny, "timeout")
		h.mu.Unlock()
	case <-ctx.Done():
		h.mu.Lock()
		h.resolveLocked(p, Answer{Cancelled: true}, protocol.DecisionDeny, "abort")
		h.mu.Unlock()
	}
	return <-p.done
}

// pickLocked is the agent's option for a legacy decision: the first of the
// matching kind (allow_always falls back to allow_once); none fits →
// Cancelled.
func (h *Host) pickLocked(p *pending, decision string) Answer {
	want := map[string][]string{
		protocol.DecisionAllow:       {AllowOnce, AllowAlways},
		protocol.DecisionAllowAlways: {AllowAlways, AllowOnce},
		protocol.DecisionDeny:        {RejectOnce, RejectAlways},
	}[decision]
	for _, k := range want {
		for _, o := range p.order {
			if o.Kind == k {
				return Answer{OptionID: o.ID}
			}
		}
	}
	return Answer{Cancelled: true}
}

// resolveLocked closes p once: permission_resolved is written, the status
// returns to streaming when nothing else is open, and the answer goes to
// the waiting Ask.
func (h *Host) resolveLocked(p *pending, ans Answer, decision, source string) {
	i := -1
	for j, q := range h.pending {
		if q == p {
			i = j
		}
	}
	if i < 0 {
		return
	}
	h.pending = append(h.pending[:i], h.pending[i+1:]...)
	ev := protocol.PermissionResolved{Header: protocol.Header{Type: protocol.TypePermissionResolved}, RequestID: p.id, Source: source}
	if o, ok := p.options[ans.OptionID]; ok && !ans.Cancelled && decision == "" {
		ev.ChoiceID = o.ID
	} else {
		ev.Decision = cmp.Or(decision, protocol.DecisionDeny)
	}
	h.emitLocked(ev)
	if h.turn != nil && len(h.pending) == 0 {
		h.setStatusLocked(protocol.StatusStreaming)
	}
	p.done <- ans
}

func (h *Host) permissionResponseLocked(hd protocol.Header, c *protocol.PermissionResponse) {
	var p *pending
	for _, q := range h.pending {
		if q.id == c.RequestID {
			p = q
		}
	}
	if p == nil { // late or unknown: dropped silently (docs/protocol.md §6.3)
		h.respondLocked(hd, nil)
		return
	}
	source := cmp.Or(c.Source, "client")
	if c.ChoiceID != "" {
		if _, ok := p.options[c.ChoiceID]; !ok { // stays open; another answer may win
			h.respondErrLocked(hd, protocol.Errorf(protocol.CodeInvalidRequest, `field "choice_id": unknown choice %q for request %s`, c.ChoiceID, c.RequestID))
			return
		}
		h.resolveLocked(p, Answer{OptionID: c.ChoiceID, Reason: c.Reason}, "", source)
		h.respondLocked(hd, nil)
		return
	}
	ans := h.pickLocked(p, c.Decision)
	ans.Reason = c.Reason
	h.resolveLocked(p, ans, c.Decision, source)
	h.respondLocked(hd, nil)
}
