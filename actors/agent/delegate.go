package agent

import (
	"encoding/json"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
)

// foreignRequest is a descendant's request surfaced through this agent.
type foreignRequest struct {
	child *actor.PID
	rec   []byte
}

// delegateUp sends an open request without a responder up the hierarchy.
func (a *Actor) delegateUp(c actor.Context, reqID string, line []byte) {
	o := a.open[reqID]
	o.delegating = true
	c.Send(c.Parent(), &Route{AgentID: a.m.ParentAgentID, Msg: &Delegate{
		RequestID: reqID, Rec: protocol.WithAgentID(line, a.m.AgentID), Origin: a.self,
	}})
}

// onDelegate: surface the request here if an interactive client is
// attached, else pass it further up, else refuse.
func (a *Actor) onDelegate(c actor.Context, m *Delegate) {
	switch {
	case a.hasResponder():
		a.foreign[m.RequestID] = &foreignRequest{child: m.Origin, rec: m.Rec}
		// The child hears of the delegation before any client sees the
		// request: a client's answer reaches the child's mailbox after it
		// (the client answers only once the record was written, and the
		// answer comes through the registry), so the child always knows
		// whom to ask about the answering client. Told after the records,
		// an answer written back at once could beat it and be refused
		// NOT_ATTACHED.
		c.Send(m.Origin, &DelegateResult{RequestID: m.RequestID, Accepted: true, PID: a.self})
		for _, att := range a.attached {
			if att.live {
				att.client.Send(m.Rec)
			}
		}
	case a.m.ParentAgentID != "":
		c.Send(c.Parent(), &Route{AgentID: a.m.ParentAgentID, Msg: m})
	default:
		c.Send(m.Origin, &DelegateResult{RequestID: m.RequestID})
	}
}

// onDelegateResult: delegated, or no responder anywhere → headless path.
func (a *Actor) onDelegateResult(c actor.Context, m *DelegateResult) {
	o := a.open[m.RequestID]
	if o == nil {
		if m.Accepted { // resolved meanwhile: tell the ancestor to drop it
			c.Send(m.PID, &DelegatedResolved{RequestID: m.RequestID})
		}
		return
	}
	o.delegating = false
	parked := o.parked
	o.parked = nil
	if m.Accepted {
		o.delegate = m.PID
		a.delegated[m.RequestID] = m.PID
		for _, r := range parked {
			c.Request(m.PID, &CheckResponder{Req: r})
		}
		return
	}
	for _, r := range parked {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type,
			protocol.Errorf(protocol.CodeNotAttached, "connection is not attached to agent %s", a.m.AgentID)))
	}
	a.headless(m.RequestID, o.kind)
}

// onDelegateLost: the ancestor holding a request is out of reach (its
// node was lost). The request goes up again, as a new one would: to a
// responder attached here meanwhile (it has the request already), to the
// ancestor again once its node is back, else to the headless policy.
func (a *Actor) onDelegateLost(c actor.Context, m *DelegateLost) {
	delete(a.delegated, m.RequestID)
	o := a.open[m.RequestID]
	if o == nil || o.delegate == nil {
		return
	}
	o.delegate = nil
	switch {
	case a.hasResponder():
	case a.m.ParentAgentID != "":
		a.delegateUp(c, m.RequestID, o.rec)
	default:
		a.headless(m.RequestID, o.kind)
	}
}

// onDelegatedResolved: a descendant's request closed.
func (a *Actor) onDelegatedResolved(m *DelegatedResolved) {
	if _, ok := a.foreign[m.RequestID]; !ok {
		return
	}
	delete(a.foreign, m.RequestID)
	if m.Rec == nil {
		return
	}
	for _, att := range a.attached {
		if att.live {
			att.client.Send(m.Rec)
		}
	}
}

// onCheckResponder: is the client one of this agent's interactive clients?
func (a *Actor) onCheckResponder(c actor.Context, m *CheckResponder) {
	att := a.attached[m.Req.Client.ID]
	c.Respond(&ResponderChecked{OK: att != nil && att.role == protocol.RoleInteractive, Req: m.Req})
}

// answerDelegated handles a response to a delegated request from a client
// that is not attached here: the ancestor vouches for it first.
func (a *Actor) answerDelegated(c actor.Context, r *Request) bool {
	var reqID string
	switch cmd := r.Cmd.(type) {
	case *protocol.PermissionResponse:
		reqID = cmd.RequestID
	case *protocol.UIResponse:
		reqID = cmd.RequestID
	default:
		return false
	}
	o := a.open[reqID]
	if o == nil {
		if slices.Contains(a.closed, reqID) {
			// A late answer of an ancestor's client (it saw the request;
			// another answer won): discarded silently, as on one node
			// for an attached client (docs/protocol.md §6.3). Who
			// answers is not checked: nothing is done either way.
			r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil))
			return true
		}
		return false
	}
	if o.delegating {
		o.parked = append(o.parked, r) // checked once the ancestor accepted
		return true
	}
	if o.delegate == nil {
		return false
	}
	c.Request(o.delegate, &CheckResponder{Req: r})
	return true
}

// onCheckOrigin: is the connection of that origin one of this agent's
// interactive clients? (A child's node asks, for a client that answered
// there: docs/protocol.md §13 "Runs on other nodes".)
func (a *Actor) onCheckOrigin(c actor.Context, m *CheckOrigin) {
	ok := false
	for _, att := range a.attached {
		if m.Origin != "" && att.client.Origin == m.Origin && att.role == protocol.RoleInteractive {
			ok = true
			break
		}
	}
	c.Respond(&OriginChecked{Seq: m.Seq, OK: ok})
}

func (a *Actor) onResponderChecked(c actor.Context, m *ResponderChecked) {
	if !m.OK {
		m.Req.Client.Send(protocol.NewErrorResponse(m.Req.Header.ID, m.Req.Header.Type,
			protocol.Errorf(protocol.CodeNotAttached, "connection is not an interactive client of agent %s or of the ancestor it delegated to", a.m.AgentID)))
		return
	}
	a.answer(c, m.Req, &attachment{client: m.Req.Client, role: protocol.RoleInteractive, live: true})
}

// resolvedFor notifies the ancestor holding a delegated request that it
// closed, with the event its clients should see. (The open entry may be
// gone already: a winning answer removes it before the runtime resolves.)
func (a *Actor) resolvedFor(c actor.Context, reqID string, line []byte) {
	pid := a.delegated[reqID]
	if pid == nil {
		return
	}
	delete(a.delegated, reqID)
	a.closedDelegated(reqID)
	c.Send(pid, &DelegatedResolved{RequestID: reqID, Rec: protocol.WithAgentID(line, a.m.AgentID)})
}

// maxClosedDelegated bounds the delegated requests an agent remembers
// as closed, for late answers.
const maxClosedDelegated = 64

// closedDelegated remembers a delegated request that closed.
func (a *Actor) closedDelegated(reqID string) {
	if len(a.closed) == maxClosedDelegated {
		a.closed = a.closed[1:]
	}
	a.closed = append(a.closed, reqID)
}

// foreignPending lists descendants' requests surfaced here, for sync.
func (a *Actor) foreignPending() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(a.foreign))
	for _, f := range a.foreign {
		out = append(out, f.rec)
	}
	return out
}
