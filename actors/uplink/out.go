package uplink

import (
	"context"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
)

// out is the child's node's side of the link to one other node, where the
// ancestors live that its children's requests go to. It stands for those
// ancestors here: a child whose request was accepted there keeps this
// actor as its delegate (agent.DelegateResult.PID), so the child's
// resolution and its checks of answering clients come here and go over.
type out struct {
	deps Deps
	node string
	self *actor.PID
	// p is the link while it is up (nil: the next request dials); gen
	// tells its pump's messages from a lost one's.
	p   *pump
	gen int
	// reqs are the requests sent over and not resolved, by request id.
	reqs map[string]*outReq
	// checks are the client checks sent over and not answered, by number.
	checks map[uint64]outCheck
	seq    uint64
	// steers are the parent's steers sent over and not answered, by
	// correlation id.
	steers map[string]*registry.RemoteSteer
	// records are a person's steers sent over to be recorded and not
	// answered yet, by correlation id: whom to tell once they are.
	records map[string]*actor.PID
}

// outReq is one request sent over: whom to answer (the child, or an in
// link of this node for a request that came from a third node), and
// whether the other node accepted it.
type outReq struct {
	origin   *actor.PID
	accepted bool
}

// outCheck is a check of a client sent over: a child's CheckResponder
// (req) or an in link's CheckOrigin (seq), and whom to answer.
type outCheck struct {
	to  *actor.PID
	req *agent.Request
	seq uint64
}

func newOut(deps Deps, node string) *out {
	return &out{deps: deps, node: node, reqs: map[string]*outReq{}, checks: map[uint64]outCheck{}, steers: map[string]*registry.RemoteSteer{}, records: map[string]*actor.PID{}}
}

// Receive implements actor.Actor.
func (o *out) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		o.self = c.Self()
	case *registry.RemoteDelegate:
		o.reqs[m.Msg.RequestID] = &outReq{origin: m.Msg.Origin}
		from := m.Msg.Node
		if from == "" {
			from = o.deps.Node
		}
		o.send(c, frame{T: kindDelegate, RID: m.Msg.RequestID, Agent: m.AgentID, Rec: m.Msg.Rec, Node: from})
	case *registry.RemoteSteer:
		o.steers[m.Msg.CorrelationID] = m
		o.send(c, frame{T: kindSteer, RID: m.Msg.CorrelationID, Agent: m.AgentID, Run: m.Msg.RunID, Msg: m.Msg.Message})
	case *registry.RemoteSteered:
		s := m.Steered
		if o.records[s.Steer.CorrelationID] != nil {
			c.Send(m.ReplyTo, &agent.SteerRecorded{}) // one record per steer
			return
		}
		o.records[s.Steer.CorrelationID] = m.ReplyTo
		o.send(c, frame{T: kindRecord, RID: s.Steer.CorrelationID, Agent: s.AgentID, Run: s.RunID, Status: s.Steer.Status, Turn: s.Steer.TurnID})
	case *agent.DelegatedResolved:
		if _, ok := o.reqs[m.RequestID]; !ok {
			return // lost with the link: the other side resolved it
		}
		delete(o.reqs, m.RequestID)
		o.send(c, frame{T: kindResolved, RID: m.RequestID, Rec: m.Rec})
	case *agent.CheckResponder:
		rid := requestID(m.Req)
		if o.reqs[rid] == nil || m.Req.Client.Origin == "" {
			c.Respond(&agent.ResponderChecked{Req: m.Req})
			return
		}
		o.seq++
		o.checks[o.seq] = outCheck{to: c.Sender(), req: m.Req}
		o.send(c, frame{T: kindCheck, N: o.seq, RID: rid, Origin: m.Req.Client.Origin})
	case *agent.CheckOrigin:
		if o.reqs[m.RequestID] == nil || m.Origin == "" {
			c.Respond(&agent.OriginChecked{Seq: m.Seq})
			return
		}
		o.seq++
		o.checks[o.seq] = outCheck{to: c.Sender(), seq: m.Seq}
		o.send(c, frame{T: kindCheck, N: o.seq, RID: m.RequestID, Origin: m.Origin})
	case *inbound:
		if m.gen == o.gen && o.p != nil {
			o.onFrame(c, m.f)
		}
	case *lost:
		if m.gen == o.gen && o.p != nil {
			o.onLost(c, m.err)
		}
	case *actor.Stopping:
		if o.p != nil {
			o.p.close()
		}
	}
}

// send writes f over the link, dialing it first when it is down.
func (o *out) send(c actor.Context, f frame) {
	if o.p == nil {
		o.gen++
		node, dial := o.node, o.deps.Dial
		o.p = startPump(o.deps.Group.Go, c.ActorSystem(), o.self, o.gen, nil, func(ctx context.Context) (net.Conn, error) {
			return dial(ctx, node)
		})
		o.p.send(frame{T: kindHello, V: wireVersion, Node: o.node}.encode())
	}
	o.p.send(f.encode())
}

func (o *out) onFrame(c actor.Context, f frame) {
	switch f.T {
	case kindResult:
		r := o.reqs[f.RID]
		if r == nil {
			return // resolved here meanwhile
		}
		if f.OK {
			r.accepted = true
			c.Send(r.origin, &agent.DelegateResult{RequestID: f.RID, Accepted: true, PID: o.self})
			return
		}
		delete(o.reqs, f.RID)
		c.Send(r.origin, &agent.DelegateResult{RequestID: f.RID})
	case kindSteered:
		if s := o.steers[f.RID]; s != nil {
			delete(o.steers, f.RID)
			o.steered(c, s, f.Status, f.Turn)
		}
	case kindRecorded:
		if to := o.records[f.RID]; to != nil {
			delete(o.records, f.RID)
			c.Send(to, &agent.SteerRecorded{})
		}
	case kindChecked:
		ch, ok := o.checks[f.N]
		if !ok {
			return
		}
		delete(o.checks, f.N)
		o.answer(c, ch, f.OK)
	default:
		o.onLost(c, errFrame)
	}
}

// answer tells whoever asked check ch the other node's word.
func (o *out) answer(c actor.Context, ch outCheck, ok bool) {
	if ch.req != nil {
		c.Send(ch.to, &agent.ResponderChecked{OK: ok, Req: ch.req})
		return
	}
	c.Send(ch.to, &agent.OriginChecked{Seq: ch.seq, OK: ok})
}

// onLost ends the link: each request sent over is delegated again or
// falls to its headless policy (not accepted yet: as if refused), each
// check is answered no. The next request dials again.
func (o *out) onLost(c actor.Context, err error) {
	o.p.close()
	o.p = nil
	if len(o.reqs) > 0 || len(o.checks) > 0 {
		o.deps.Logger.Warn("uplink: link to the ancestors' node lost", "node", o.node, "requests", len(o.reqs), "err", err)
	}
	for rid, r := range o.reqs {
		if r.accepted {
			c.Send(r.origin, &agent.DelegateLost{RequestID: rid})
		} else {
			c.Send(r.origin, &agent.DelegateResult{RequestID: rid})
		}
	}
	clear(o.reqs)
	for n, ch := range o.checks {
		o.answer(c, ch, false)
		delete(o.checks, n)
	}
	// A person's steer sent to be recorded may or may not be: its answer
	// waits no longer (the parent's node is out of reach).
	for id, to := range o.records {
		c.Send(to, &agent.SteerRecorded{})
		delete(o.records, id)
	}
	// A steer whose outcome did not come back may or may not be in the
	// run's turn: nothing is recorded, and the parent hears the node is
	// out of reach.
	for id, s := range o.steers {
		s.Msg.Client.Send(protocol.NewErrorResponse(s.Msg.Header.ID, s.Msg.Header.Type,
			protocol.Errorf(protocol.CodeNodeUnavailable, "node %s is out of reach: the outcome of steer %s of run %s is unknown", o.node, id, s.Msg.RunID)))
		delete(o.steers, id)
	}
}

// steerRecordWait bounds how long a steer's answer waits for the run's
// job actor to commit its record (one store write), as on one node.
const steerRecordWait = 10 * time.Second

// steered records a steer's outcome at the run's job actor
// (agent.LeaseSteered) and, once it is committed, answers the parent's
// client: persist before acknowledging (docs/protocol.md §10.3). The wait
// happens in a goroutine, off the mailbox.
func (o *out) steered(c actor.Context, s *registry.RemoteSteer, status, turnID string) {
	m := s.Msg
	rec := protocol.NewResponse(m.Header.ID, m.Header.Type, protocol.SubagentSteerData{
		Status: status, RunID: m.RunID, TurnID: turnID, CorrelationID: m.CorrelationID})
	if s.Holder == nil {
		m.Client.Send(rec)
		return
	}
	fut := c.RequestFuture(s.Holder, &agent.LeaseSteered{RunID: m.RunID, AgentID: s.AgentID, Steer: protocol.RunSteer{
		CorrelationID: m.CorrelationID, Source: protocol.SteerSourceParent, Status: status, TurnID: turnID}}, steerRecordWait)
	if !o.deps.Group.Go(func() {
		_, _ = fut.Result() // recorded, the job gone or timed out: answer either way
		m.Client.Send(rec)
	}) {
		m.Client.Send(rec)
	}
}

// requestID is the request a permission or UI answer names.
func requestID(r *agent.Request) string {
	switch cmd := r.Cmd.(type) {
	case *protocol.PermissionResponse:
		return cmd.RequestID
	case *protocol.UIResponse:
		return cmd.RequestID
	}
	return ""
}
