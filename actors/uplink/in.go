package uplink

import (
	"encoding/json"
	"net"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
)

// SourceNodeLost is the `source` of a request's resolution that the
// ancestor's node writes for its clients when the link to the child's node
// is lost (the node died, or is cut off): nobody here can answer it any
// more (docs/protocol.md §13 "Runs on other nodes").
const SourceNodeLost = "node_lost"

// in is the ancestor's node's side of one link from a child's node. It
// stands for that node's children here: it delegates each request to the
// ancestor through the registry, as a child would (agent.Delegate with
// itself as the origin), and relays what comes back.
type in struct {
	deps Deps
	conn net.Conn
	self *actor.PID
	p    *pump
	// node is the child's node, from its hello ("" before it).
	node string
	reqs map[string]*inReq
	// steers are the parent's steers handed to children here and not
	// answered yet, by correlation id.
	steers map[string]bool
	// gone: the link is lost; the actor stops once no request waits for
	// its ancestor's result.
	gone bool
}

// inReq is one request of the other node surfaced here.
type inReq struct {
	agent string // the ancestor it was delegated to
	rec   []byte // the request event, the child's agent_id in it
	node  string // the node hosting the child
	// holder is the ancestor actor that accepted it; nil while waiting.
	holder *actor.PID
	// waiting for the ancestor's result; resolved (with its event, which
	// may be nil) when the request closed meanwhile.
	waiting  bool
	resolved bool
	closing  []byte
}

// recorded: a person's steer sent over (frame record) is committed to
// its run, or could not be.
type recorded struct{ rid string }

func newIn(deps Deps, conn net.Conn) *in {
	return &in{deps: deps, conn: conn, reqs: map[string]*inReq{}, steers: map[string]bool{}}
}

// Receive implements actor.Actor.
func (l *in) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		l.self = c.Self()
		l.p = startPump(l.deps.Group.Go, c.ActorSystem(), l.self, 1, l.conn, nil)
	case *inbound:
		if !l.gone {
			l.onFrame(c, m.f)
		}
	case *lost:
		l.onLost(c, m.err)
	case *agent.DelegateResult:
		l.onResult(c, m)
	case *agent.SteerAnswer:
		if l.steers[m.CorrelationID] {
			delete(l.steers, m.CorrelationID)
			if !l.gone {
				l.p.send(frame{T: kindSteered, RID: m.CorrelationID, Status: m.Status, Turn: m.TurnID}.encode())
			}
		}
	case *recorded:
		if !l.gone {
			l.p.send(frame{T: kindRecorded, RID: m.rid}.encode())
		}
	case *agent.OriginChecked:
		if !l.gone {
			l.p.send(frame{T: kindChecked, N: m.Seq, OK: m.OK}.encode())
		}
	case *agent.DelegateLost:
		// A request that went on to a third node lost that link: it goes
		// up again from its ancestor here.
		if r := l.reqs[m.RequestID]; r != nil && !l.gone && r.holder != nil {
			r.holder, r.waiting = nil, true
			c.Send(l.deps.Registry, &agent.Route{AgentID: r.agent, Msg: &agent.Delegate{RequestID: m.RequestID, Rec: r.rec, Origin: l.self, Node: r.node}})
		}
	case *actor.Stopping:
		l.p.close()
	}
}

func (l *in) onFrame(c actor.Context, f frame) {
	if l.node == "" && f.T != kindHello {
		l.onLost(c, errFrame)
		return
	}
	switch f.T {
	case kindHello:
		l.node = f.Node
	case kindDelegate:
		if l.reqs[f.RID] != nil {
			return // sent once per request
		}
		// The child's node: the one that sent it, or the one it names
		// (a request of a third node's child, relayed).
		from := f.Node
		if from == "" {
			from = l.node
		}
		l.reqs[f.RID] = &inReq{agent: f.Agent, rec: f.Rec, waiting: true, node: from}
		if l.deps.Located != nil {
			l.deps.Located(agentIDOf(f.Rec), from)
		}
		c.Send(l.deps.Registry, &agent.Route{AgentID: f.Agent, Msg: &agent.Delegate{RequestID: f.RID, Rec: f.Rec, Origin: l.self, Node: from}})
	case kindResolved:
		r := l.reqs[f.RID]
		if r == nil {
			return
		}
		if r.waiting {
			r.resolved, r.closing = true, f.Rec
			return
		}
		delete(l.reqs, f.RID)
		c.Send(r.holder, &agent.DelegatedResolved{RequestID: f.RID, Rec: f.Rec})
	case kindSteer:
		// The child answers here (agent.SteerAnswer) once its runtime
		// took the message into the turn, or conflict; its lease's holder
		// on this node keeps no record: the parent's node does.
		if l.steers[f.RID] {
			return // sent once per steer
		}
		l.steers[f.RID] = true
		c.Send(l.deps.Registry, &agent.Route{AgentID: f.Agent, Msg: &agent.LeaseSteer{RunID: f.Run, Message: f.Msg,
			CorrelationID: f.RID, ReplyTo: l.self}})
	case kindRecord:
		// A person's steer of a child there, leased a run of a job
		// here: recorded by the run's job actor (through the registry
		// and the jobs coordinator), then acknowledged, so the child's
		// node answers the person once it is committed.
		steered := &agent.LeaseSteered{RunID: f.Run, AgentID: f.Agent, Steer: protocol.RunSteer{
			CorrelationID: f.RID, Source: protocol.SteerSourceClient, Status: f.Status, TurnID: f.Turn}}
		fut := c.RequestFuture(l.deps.Registry, &registry.RecordSteer{Steered: steered}, steerRecordWait)
		sys, self, rid := c.ActorSystem(), l.self, f.RID
		if !l.deps.Group.Go(func() {
			_, _ = fut.Result() // recorded, no such job or timed out: acknowledge either way
			sys.Root.Send(self, &recorded{rid: rid})
		}) {
			l.p.send(frame{T: kindRecorded, RID: rid}.encode())
		}
	case kindCheck:
		r := l.reqs[f.RID]
		if r == nil || r.holder == nil {
			l.p.send(frame{T: kindChecked, N: f.N}.encode())
			return
		}
		c.Request(r.holder, &agent.CheckOrigin{Seq: f.N, RequestID: f.RID, Origin: f.Origin})
	default:
		l.onLost(c, errFrame)
	}
}

// onResult relays the ancestor's answer to a delegation; a request that
// closed meanwhile, or whose link is gone, is closed at the ancestor at
// once.
func (l *in) onResult(c actor.Context, m *agent.DelegateResult) {
	r := l.reqs[m.RequestID]
	if r == nil {
		if m.Accepted {
			c.Send(m.PID, &agent.DelegatedResolved{RequestID: m.RequestID})
		}
		return
	}
	r.waiting = false
	switch {
	case !m.Accepted:
		delete(l.reqs, m.RequestID)
		if !l.gone && !r.resolved {
			l.p.send(frame{T: kindResult, RID: m.RequestID}.encode())
		}
	case r.resolved:
		delete(l.reqs, m.RequestID)
		c.Send(m.PID, &agent.DelegatedResolved{RequestID: m.RequestID, Rec: r.closing})
	case l.gone:
		delete(l.reqs, m.RequestID)
		c.Send(m.PID, &agent.DelegatedResolved{RequestID: m.RequestID, Rec: lostResolution(r.rec)})
	default:
		r.holder = m.PID
		l.p.send(frame{T: kindResult, RID: m.RequestID, OK: true}.encode())
	}
	l.stopIfDone(c)
}

// onLost: the child's node is out of reach. Each request accepted here is
// resolved for the ancestor's clients (source node_lost); one still
// waiting for its ancestor is when the ancestor answers.
func (l *in) onLost(c actor.Context, err error) {
	if l.gone {
		return
	}
	l.gone = true
	l.p.close()
	if len(l.reqs) > 0 {
		l.deps.Logger.Warn("uplink: link from a child's node lost; its requests are resolved here", "node", l.node, "requests", len(l.reqs), "err", err)
	}
	for rid, r := range l.reqs {
		if r.holder != nil {
			c.Send(r.holder, &agent.DelegatedResolved{RequestID: rid, Rec: lostResolution(r.rec)})
			delete(l.reqs, rid)
		}
	}
	l.stopIfDone(c)
}

func (l *in) stopIfDone(c actor.Context) {
	if l.gone && len(l.reqs) == 0 {
		c.Stop(l.self)
	}
}

// agentIDOf is the agent_id of request event rec ("" if it has none).
func agentIDOf(rec []byte) string {
	var ev struct {
		AgentID string `json:"agent_id"`
	}
	_ = json.Unmarshal(rec, &ev)
	return ev.AgentID
}

// lostResolution is the resolution event of request event rec, with its
// agent_id, when the child's node is lost: a permission denied, a
// question dismissed, as a runtime's exit closes them.
func lostResolution(rec []byte) []byte {
	var ev struct {
		Type      string `json:"type"`
		AgentID   string `json:"agent_id"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(rec, &ev) != nil {
		return nil
	}
	var out []byte
	if ev.Type == protocol.TypePermissionRequest {
		out = protocol.MustMarshal(protocol.PermissionResolved{Header: protocol.Header{Type: protocol.TypePermissionResolved},
			RequestID: ev.RequestID, Decision: protocol.DecisionDeny, Source: SourceNodeLost})
	} else {
		out = protocol.MustMarshal(protocol.UIResolved{Header: protocol.Header{Type: protocol.TypeUIResolved},
			RequestID: ev.RequestID, Value: []byte("null"), Source: SourceNodeLost})
	}
	return protocol.WithAgentID(out, ev.AgentID)
}
