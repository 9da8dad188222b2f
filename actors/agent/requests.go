package agent

import (
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
)

// openRequest is a permission/UI request no response has won yet.
type openRequest struct {
	kind    string // permission_request | ui_request
	rec     []byte // the request event, to delegate it again (DelegateLost)
	options map[string]bool
	choices map[string]bool
	// delegating: sent up the hierarchy, no answer yet; delegate: the
	// ancestor actor whose interactive clients may answer it.
	delegating bool
	delegate   *actor.PID
	// parked are answers of clients not attached here that came while
	// the request was delegating: on another node an ancestor's client
	// may see the request, and answer, before its node's acceptance gets
	// back here. They are checked once the acceptance arrives.
	parked []*Request
}

// answer applies first-valid-response-wins (docs/protocol.md §6.3, §9.5).
func (a *Actor) answer(c actor.Context, r *Request, att *attachment) {
	var reqID string
	switch cmd := r.Cmd.(type) {
	case *protocol.PermissionResponse:
		reqID = cmd.RequestID
	case *protocol.UIResponse:
		reqID = cmd.RequestID
	}
	o := a.open[reqID]
	if o == nil || !a.ready {
		// Already answered, withdrawn or unknown: discarded silently
		// (docs/protocol.md §6.3).
		r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil))
		return
	}
	bad := func(format string, args ...any) {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type, protocol.Errorf(protocol.CodeInvalidRequest, format, args...)))
	}
	switch cmd := r.Cmd.(type) {
	case *protocol.PermissionResponse:
		if o.kind != protocol.TypePermissionRequest {
			bad("request %s is not a permission request", reqID)
			return
		}
		if cmd.ChoiceID != "" && !o.choices[cmd.ChoiceID] {
			bad("unknown choice_id %q for request %s", cmd.ChoiceID, reqID) // request stays open
			return
		}
		if cmd.Decision != "" && len(o.options) > 0 && !o.options[cmd.Decision] {
			bad("decision %q is not offered by request %s", cmd.Decision, reqID)
			return
		}
	case *protocol.UIResponse:
		if o.kind != protocol.TypeUIRequest {
			bad("request %s is not a UI request", reqID)
			return
		}
	}
	delete(a.open, reqID) // this response wins
	raw, err := protocol.SetMember(r.Raw, "source", protocol.MustMarshal(att.client.Source))
	if err != nil {
		bad("%v", err)
		return
	}
	a.send(r.Client, r.Header, raw, nil)
}

// onRequestEvent records an open permission/UI request and applies the
// headless policy when nobody can answer it.
func (a *Actor) onRequestEvent(c actor.Context, typ string, line []byte) {
	o := &openRequest{kind: typ, options: map[string]bool{}, choices: map[string]bool{}}
	var reqID string
	switch typ {
	case protocol.TypePermissionRequest:
		var ev protocol.PermissionRequest
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		reqID = ev.RequestID
		for _, opt := range ev.Options {
			o.options[opt] = true
		}
		for _, ch := range ev.Choices {
			o.choices[ch.ID] = true
		}
	case protocol.TypeUIRequest:
		var ev protocol.UIRequest
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		reqID = ev.RequestID
	default:
		return
	}
	if reqID == "" {
		return
	}
	o.rec = append([]byte(nil), line...)
	a.open[reqID] = o
	if a.hasResponder() {
		return
	}
	if a.m.ParentAgentID != "" {
		a.delegateUp(c, reqID, line) // the nearest ancestor with a responder
		return
	}
	a.headless(reqID, typ)
}

// headless applies the agent's headless policy to a request nobody can
// answer (docs/protocol.md §6.3 headless compatibility path).
func (a *Actor) headless(reqID, kind string) {
	policy := a.m.HeadlessPolicy
	if policy == "" {
		policy = a.deps.Runtime.HeadlessPolicy
	}
	if policy == protocol.HeadlessQueue {
		return // waits for an interactive client or the runtime's headless timeout
	}
	// deny, and allow_if_rule_matches (the runtime already applied its
	// rules before asking, so nothing matched): the headless path answers.
	delete(a.open, reqID)
	if kind == protocol.TypePermissionRequest {
		a.internal(protocol.TypePermissionResponse, map[string]any{"request_id": reqID, "decision": protocol.DecisionDeny, "source": "headless"})
	} else {
		a.internal(protocol.TypeUIResponse, map[string]any{"request_id": reqID, "value": json.RawMessage("null"), "source": "headless"})
	}
}

// hasResponder reports whether an interactive client is attached (or
// attaching: it will see open requests in its sync).
func (a *Actor) hasResponder() bool {
	for _, att := range a.attached {
		if att.role == protocol.RoleInteractive {
			return true
		}
	}
	return false
}
