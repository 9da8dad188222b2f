package refagent

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/shard-dev/shard/protocol"
)

// Sources of permission_resolved / ui_resolved besides the answering
// client's own.
const (
	sourceClient  = "client"
	sourceTimeout = "timeout"
	sourceAbort   = "abort"
	// sourceHeadless is the daemon's headless-policy answer
	// (docs/protocol.md §6.3).
	sourceHeadless = "headless"
	// sourceNotify closes a notify ui_request at once: it asks nothing
	// (ask.go).
	sourceNotify = "notify"
)

// requestKind tells permission requests from UI requests.
type requestKind int

const (
	kindPermission requestKind = iota
	kindUI
)

// pendingRequest is an open permission_request or ui_request.
type pendingRequest struct {
	id   string
	kind requestKind
	// raw is the event exactly as it was written; get_sync returns it.
	raw []byte
	// choices maps a permission choice id to its decision.
	choices map[string]string
	// done receives the one resolution; buffered so the resolver never
	// blocks.
	done chan resolution
}

// resolvedBy tells who closed a pending request.
type resolvedBy int

const (
	byAnswer resolvedBy = iota
	byTimeout
	byAbort
)

// resolution is how a pending request was closed.
type resolution struct {
	decision string          // permission: allow | allow_always | deny
	choiceID string          // permission: set when the answer used choice_id
	value    json.RawMessage // ui: the answer; nil means null
	source   string          // echoed in the resolved event
	reason   string          // permission: the person's reason, told the model with a refusal
	by       resolvedBy      // who closed it; decides what the turn does next
}

// requests are the open permission and UI requests. The turn in flight
// opens them and waits for each (turnState.await); an answer, the headless
// timeout, an abort or the turn's end closes it, exactly once. They exist
// only while a turn is in flight: a turn closes every one before it ends.
//
// runtime.mu protects open; the methods ending in Locked must be called
// with it held, so that a request's state and its events change together.
type requests struct {
	out    *output
	status *agentStatus
	open   []*pendingRequest // in the order they were opened
}

// findLocked returns the open request with id, or nil.
func (q *requests) findLocked(id string) *pendingRequest {
	for _, p := range q.open {
		if p.id == id {
			return p
		}
	}
	return nil
}

// openLocked registers p, writes its event and moves to the waiting status.
func (q *requests) openLocked(p *pendingRequest, waiting protocol.AgentStatus) {
	q.open = append(q.open, p)
	q.out.write(p.raw)
	q.status.setLocked(waiting)
}

// resolveLocked closes an open request: it writes the resolved event,
// returns the status to streaming once no request is left open (a turn is
// in flight: requests exist only then) and hands the resolution to the
// waiting turn. It runs at most once per request (p leaves open here).
func (q *requests) resolveLocked(p *pendingRequest, res resolution) {
	i := slices.Index(q.open, p)
	if i < 0 {
		return
	}
	q.open = slices.Delete(q.open, i, i+1)
	switch p.kind {
	case kindPermission:
		ev := protocol.PermissionResolved{Header: protocol.Header{Type: protocol.TypePermissionResolved}, RequestID: p.id, Source: res.source}
		if res.choiceID != "" {
			ev.ChoiceID = res.choiceID
		} else {
			ev.Decision = res.decision
		}
		q.out.emit(ev)
	case kindUI:
		q.out.emit(protocol.UIResolved{Header: protocol.Header{Type: protocol.TypeUIResolved}, RequestID: p.id, Value: res.value, Source: res.source})
	}
	if len(q.open) == 0 {
		q.status.setLocked(protocol.StatusStreaming)
	}
	p.done <- res
}

// abortAllLocked closes every open request with source "abort", oldest
// first.
func (q *requests) abortAllLocked() {
	for len(q.open) > 0 {
		q.resolveLocked(q.open[0], resolution{decision: protocol.DecisionDeny, source: sourceAbort, by: byAbort})
	}
}

// rawLocked returns the open requests as emitted (never nil).
func (q *requests) rawLocked() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(q.open))
	for _, p := range q.open {
		out = append(out, p.raw)
	}
	return out
}

// permissionResponseLocked handles permission_response.
func (q *requests) permissionResponseLocked(h protocol.Header, c *protocol.PermissionResponse) {
	p := q.findLocked(c.RequestID)
	if p == nil { // late or unknown: dropped silently (docs/protocol.md §6.3)
		q.out.respond(h, nil)
		return
	}
	if p.kind != kindPermission {
		q.out.respondErr(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "request_id": %s is a ui request`, c.RequestID))
		return
	}
	res := resolution{decision: c.Decision, source: cmp.Or(c.Source, sourceClient), reason: c.Reason}
	if c.ChoiceID != "" {
		dec, ok := p.choices[c.ChoiceID]
		if !ok { // the request stays open; another answer may win
			q.out.respondErr(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "choice_id": unknown choice %q for request %s`, c.ChoiceID, c.RequestID))
			return
		}
		res.decision, res.choiceID = dec, c.ChoiceID
	}
	q.resolveLocked(p, res)
	q.out.respond(h, nil)
}

// uiResponseLocked handles ui_response.
func (q *requests) uiResponseLocked(h protocol.Header, c *protocol.UIResponse) {
	p := q.findLocked(c.RequestID)
	if p == nil {
		q.out.respond(h, nil)
		return
	}
	if p.kind != kindUI {
		q.out.respondErr(h, protocol.Errorf(protocol.CodeInvalidRequest, `field "request_id": %s is a permission request`, c.RequestID))
		return
	}
	value := c.Value
	if string(value) == "null" {
		value = nil
	}
	q.resolveLocked(p, resolution{value: value, source: cmp.Or(c.Source, sourceClient)})
	q.out.respond(h, nil)
}
