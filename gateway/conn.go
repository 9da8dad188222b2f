package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/actorref"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// slowGrace is how long a dropped slow consumer's writer may still try to
// deliver the fatal error event before the transport is cut.
const slowGrace = time.Second

// drainFlush bounds how long a connection that half-closed, and whose
// commands have all been answered, waits for its writer to deliver what is
// queued before the transport is closed (a peer that half-closed and
// stopped reading too must not hold the connection).
const drainFlush = 10 * time.Second

// connMessage seals the connection actor's own messages (its reader
// goroutine's); the others it receives are agent.Routed and protoactor's
// system messages.
type connMessage interface{ connMessage() }

// Messages of the connection actor.
type (
	// inbound is one record the reader decoded (and admitted, see
	// inflight).
	inbound struct {
		rec []byte
		err error // a record-level problem (too long, binary frame)
		// cmd, h and decErr are protocol.DecodeCommand's of rec.
		cmd    protocol.Command
		h      protocol.Header
		decErr error
	}
	// readerDone: the reader has ended. drained: at the end of the
	// client's input (a half-close), after every command it had sent was
	// answered; what is queued is still to be written.
	readerDone struct {
		err     error
		drained bool
	}
)

func (*inbound) connMessage()    {}
func (*readerDone) connMessage() {}

var _ = []connMessage{(*inbound)(nil), (*readerDone)(nil)}

// connActor is the actor of one client connection.
type connActor struct {
	g      *Gateway
	id     uint64
	t      transport
	out    *outbox.Outbox
	client *agent.Client
	local  bool // unix socket: local trust (docs/protocol.md §4.2)
	// cred is what the connection was opened under; revoking it closes
	// the connection.
	cred credential
	// writerDone is closed when the writer goroutine has ended (outbox
	// drained or transport failed).
	writerDone chan struct{}
	// routes are this connection's routes to agents it attached, by agent
	// id (see route).
	routes map[string]*agentRoute
	// in accounts for the commands read and not yet answered.
	in *inflight
	// quit is closed when the actor stops or the gateway closes: a reader
	// waiting on in gives up. quitOnce closes it; unwatch ends the
	// gateway context's watch.
	quit     chan struct{}
	quitOnce sync.Once
	unwatch  func() bool
	// drained is set by a readerDone that drained: the transport is
	// closed once the writer has flushed.
	drained bool
	// forwarded is set on a connection another node opened for one of
	// its clients (ServeTunnel): it carries that client's identity, gets
	// no daemon-wide broadcasts (the client has them from its own node)
	// and never forwards again.
	forwarded *forwardIdent
	// upstreams are this connection's streams to other nodes, by node
	// (forward.go), and remote the agents whose commands go through one,
	// by agent id: once one did, every later command for it does, while
	// the upstream lasts, so they keep their order.
	upstreams map[string]*upstream
	remote    map[string]string
	// gathers counts the gathers this connection started (gather.go).
	gathers uint64
	// spoke is set once the connection spoke for another node's parent
	// (Cluster.SpeakFor): its end is told (Cluster.Forget).
	spoke bool
}

func (a *connActor) stopReading() { a.quitOnce.Do(func() { close(a.quit) }) }

// agentRoute is how the connection reaches one agent it attached: held
// while its agent.attach is on its way (pid nil), then directly (pid).
type agentRoute struct {
	pid  *actor.PID
	held []*registry.Command
}

func (a *connActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *inbound:
		a.onInbound(c, m)
	case *agent.Routed:
		a.onRouted(c, m)
	case *actor.Terminated:
		a.onAgentGone(c, m)
	case *readerDone:
		a.drained = m.drained
		c.Stop(c.Self())
	case *upstreamGone:
		a.onUpstreamGone(m)
	case *upstreamLearned:
		if a.upstreams[m.u.node] == m.u {
			a.remote[m.agentID] = m.u.node
		}
	case *actor.Stopping:
		// Protoactor keeps a watcher's PID in the watched actor until
		// either ends, and a PID caches its process: an agent that lives
		// on would keep this actor, its transport and buffers for every
		// connection that ever attached it (a leak the soak once found).
		for _, r := range a.routes {
			if r.pid != nil {
				c.Unwatch(r.pid)
			}
		}
		for _, u := range a.upstreams {
			u.close() // the other nodes' connections end, and their attachments
		}
		if a.spoke {
			a.g.cfg.Cluster.Forget(a.out)
		}
		a.out.Close()
		a.g.hub.Remove(a.out)
		if a.unwatch != nil {
			a.unwatch()
		}
		a.stopReading()
		// Off the mailbox: it may block on a WebSocket close handshake, or
		// on the writer's flush. Refused once the gateway is closing, which
		// closes every transport itself.
		if a.drained {
			a.g.goTracked(func() {
				t := time.NewTimer(drainFlush) // wall time, as closeFlush
				defer t.Stop()
				select {
				case <-a.writerDone:
				case <-t.C:
				}
				a.t.Close("connection closed", false)
			})
			return
		}
		a.g.goTracked(func() { a.t.Close("connection closed", false) })
	case *actor.Stopped:
		actorref.Release(c) // agents and the jobs coordinator hold our PID
		a.g.forget(a.id)
	case *actor.Restarting:
	default:
		a.g.log.Warn("connection actor: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *connActor) start(c actor.Context) {
	sys, self := c.ActorSystem(), c.Self()
	a.client = &agent.Client{ID: a.id, PID: self, Out: a.out, Source: a.t.Kind()}
	caps := []string{a.t.Kind(), "streaming-deltas", "orchestrator"}
	if a.local {
		caps = append(caps, "ws-ticket", "web-security")
	}
	if a.forwarded != nil {
		a.client.Source = a.forwarded.Source
		a.client.Origin = a.forwarded.Origin
		a.client.Forwarded = true
	} else if a.g.cfg.Cluster != nil {
		// Who this connection is on every node its commands reach
		// (docs/protocol.md §13 "Runs on other nodes").
		a.client.Origin = fmt.Sprintf("%s/%s/%d", a.g.cfg.Cluster.Node(), a.g.run, a.id)
	}
	a.out.Push(protocol.MustMarshal(protocol.Hello{
		Header:          protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version,
		ServerVersion:   a.g.cfg.ServerVersion,
		Capabilities:    caps,
	}))
	if a.forwarded == nil {
		a.g.hub.Add(a.out)
	}

	ctx := a.g.ctx
	writerDone := a.writerDone
	a.unwatch = context.AfterFunc(ctx, a.stopReading)
	a.g.goTracked(func() { a.read(sys, self, ctx) })
	a.g.goTracked(func() { // writer
		defer close(writerDone)
		for {
			recs, ok := a.out.Next(ctx)
			if !ok {
				break
			}
			if err := a.t.Write(ctx, recs); err != nil {
				break
			}
		}
		a.t.Close("connection closed", a.out.Overflowed())
	})
	a.g.goTracked(func() { // slow-consumer watchdog
		select {
		case <-a.out.Slow():
			a.g.log.Warn("dropping slow consumer", "conn", a.id, "transport", a.t.Kind())
			t := time.NewTimer(slowGrace)
			defer t.Stop()
			select {
			case <-writerDone:
			case <-t.C:
				a.t.Close("slow consumer", true)
			}
		case <-writerDone:
		}
	})
}

// read is the connection's reader goroutine: it decodes each record,
// admits it to the connection's inflight account (waiting, and so not
// reading the socket, while the bound is reached) and hands it to the
// actor. At the end of the input (a client's shutdown(SHUT_WR), as
// `printf … | socat -` does) it stops reading, waits until every command
// already read has been answered, and only then reports the end: the
// actor stops, the writer flushes, the transport closes, and a client
// that half-closed its socket still gets every answer.
func (a *connActor) read(sys *actor.ActorSystem, self *actor.PID, ctx context.Context) {
	h := a.g.cfg.hooks
	pause := func() {
		a.g.cfg.Metrics.InboundPaused(a.t.Kind())
		if h != nil && h.paused != nil {
			h.paused(a.id)
		}
	}
	for {
		// Room first: the next record (up to the record limit) is not
		// read while the bound is reached.
		if !a.in.waitRoom(a.quit, pause) {
			return
		}
		rec, err := a.t.Read(ctx)
		var m *inbound
		switch {
		case errors.Is(err, protocol.ErrRecordTooLong), errors.Is(err, errBinaryFrame):
			m = &inbound{err: err}
		case errors.Is(err, io.EOF):
			if h != nil && h.readEOF != nil {
				h.readEOF(a.id)
			}
			drained := a.in.waitIdle(a.quit, a.writerDone)
			sys.Root.Send(self, &readerDone{err: err, drained: drained})
			return
		case err != nil:
			sys.Root.Send(self, &readerDone{err: err})
			return
		default:
			m = &inbound{rec: rec}
			m.cmd, m.h, m.decErr = protocol.DecodeCommand(rec)
		}
		n := len(m.rec)
		if m.decErr != nil {
			// Only the error is answered: the record is not kept while
			// it waits (an over-limit id is not in m.h either).
			m.rec = nil
		}
		// A record-level error is answered without an id: it is in flight
		// under "" (inflight).
		if !a.in.admit(m.h.ID, n, a.quit, pause) {
			return // stopping: nobody is left to answer it
		}
		sys.Root.Send(self, m)
	}
}

func (a *connActor) onInbound(c actor.Context, m *inbound) {
	if m.err != nil {
		a.out.Push(protocol.NewErrorResponse("", "", protocol.Errorf(protocol.CodeInvalidRequest, "%w", m.err)))
		return
	}
	cmd, h, err := m.cmd, m.h, m.decErr
	if err != nil {
		a.out.Push(protocol.NewErrorResponse(h.ID, h.Type, err))
		return
	}
	switch h.Type {
	case protocol.TypeWSTicket, protocol.TypeWebEnroll, protocol.TypeWebSessionsList, protocol.TypeWebSessionsRevoke,
		protocol.TypeTokenCreate, protocol.TypeTokenList, protocol.TypeTokenRevoke:
		a.localCommand(h, cmd)
		return
	}
	a.route(c, &registry.Command{Client: a.client, Header: h, Cmd: cmd, Raw: m.rec})
}

// Direct routing. Every command used to take the registry's mailbox on its
// way to an agent (registry.Command, forwarded as agent.Request). A
// connection that attached an agent sends that agent's commands to the
// agent actor itself instead, and its commands must still reach the agent
// in the order it read them. The argument:
//
//   - The registry forwards in order, so everything this connection sent
//     it for agent X before an agent.attach for X reaches X before that
//     attach.
//   - X answers the attach, before anything else, with agent.Routed (the
//     registry, when there is no X, with a nil PID). When Routed arrives,
//     X has handled the attach, hence everything before it.
//   - From sending the attach until Routed arrives, later commands for X
//     are held here, in order; then they go to X directly, in order, and
//     so do later ones. Nothing sent directly can overtake what went
//     through the registry: switching from the registry to direct is the
//     unsafe direction, and it waits for the proof.
//   - Switching back (agent.detach sent directly, or X's actor gone) is
//     safe without waiting: whatever was sent to X directly is in X's
//     mailbox before anything this connection sends the registry next,
//     which the registry can only forward later.
//   - X's actor does not stop under a route for a passivation: an agent
//     counts every connection it answered with Routed as keeping it busy
//     until that connection detaches or stops (actors/agent/passivate.go),
//     so only a failure ends it while a connection routes to it.
//
// Held commands are the ones that would otherwise wait in the registry's
// and the agent's mailboxes: holding them adds no bound of its own beyond
// what the inbound path already accepts. Commands for an agent not
// attached, and orchestrator commands, go to the registry as before.

// route sends cmd on its way: to the registry, or to an attached agent
// directly, or holds it behind an agent.attach (see above).
func (a *connActor) route(c actor.Context, cmd *registry.Command) {
	if a.g.cfg.Cluster != nil && a.forwarded == nil {
		if kind := gatherKindOf(cmd); kind != gatherNone {
			a.gather(c, kind, cmd)
			return
		}
	}
	if node, err := a.remoteNode(cmd); err != nil || node != "" {
		a.forward(c, node, cmd, err)
		return
	}
	id := cmd.Header.AgentID
	if !perAgent(cmd.Header) {
		c.Send(a.g.registry, cmd)
		return
	}
	r := a.routes[id]
	switch {
	case r == nil:
		c.Send(a.g.registry, cmd)
		if cmd.Header.Type == protocol.TypeAgentAttach {
			if a.routes == nil {
				a.routes = make(map[string]*agentRoute)
			}
			a.routes[id] = &agentRoute{} // held until Routed
		}
	case r.pid == nil:
		r.held = append(r.held, cmd)
	default:
		c.Send(r.pid, &agent.Request{Client: cmd.Client, Header: cmd.Header, Cmd: cmd.Cmd, Raw: cmd.Raw})
		if cmd.Header.Type == protocol.TypeAgentDetach {
			c.Unwatch(r.pid)
			delete(a.routes, id) // back to the registry: the safe direction
		}
	}
}

// perAgent reports whether the registry would forward a command with this
// header to its agent's actor as it is: a per-agent command naming its
// agent, or agent.attach/detach/terminate/kill/update. (get_sync is internal to
// the daemon: the registry refuses it.)
func perAgent(h protocol.Header) bool {
	if h.AgentID == "" || h.Type == protocol.TypeGetSync {
		return false
	}
	switch h.Type {
	case protocol.TypeAgentAttach, protocol.TypeAgentDetach, protocol.TypeAgentTerminate, protocol.TypeAgentKill, protocol.TypeAgentUpdate:
		return true
	}
	return protocol.CommandScope(h.Type) == protocol.ScopeAgent
}

// onRouted ends the hold behind an agent.attach: the held commands go on,
// in order, directly to the agent, or through the registry when it has no
// such agent. Each takes the routing path again (a held detach or attach
// changes the route for those behind it). A Routed for a route already
// gone (detached meanwhile) or already direct changes nothing.
func (a *connActor) onRouted(c actor.Context, m *agent.Routed) {
	r := a.routes[m.AgentID]
	if r == nil || r.pid != nil {
		return
	}
	held := r.held
	if m.PID == nil {
		delete(a.routes, m.AgentID)
	} else {
		r.pid, r.held = m.PID, nil
		c.Watch(m.PID)
	}
	for _, cmd := range held {
		a.route(c, cmd)
	}
}

// onAgentGone forgets the route to an agent actor that stopped: later
// commands for it take the registry, which serves its respawned actor.
func (a *connActor) onAgentGone(_ actor.Context, m *actor.Terminated) {
	for id, r := range a.routes {
		if r.pid != nil && r.pid.Equal(m.Who) {
			delete(a.routes, id)
		}
	}
}

// localCommand answers the commands only a local (unix socket) client may
// send, since the socket's file permissions are their authentication:
// ws.ticket and the security commands (security.go in protocol). Over a
// WebSocket they are PERMISSION_DENIED, so that a browser session can never
// mint tokens, enroll browsers or revoke anything.
func (a *connActor) localCommand(h protocol.Header, cmd protocol.Command) {
	if !a.local {
		a.out.Push(protocol.NewErrorResponse(h.ID, h.Type,
			protocol.Errorf(protocol.CodePermissionDenied, "%s is only available on the unix socket", h.Type)))
		return
	}
	data, err := a.g.security(cmd)
	if err != nil {
		a.out.Push(protocol.NewErrorResponse(h.ID, h.Type, err))
		return
	}
	a.out.Push(protocol.NewResponse(h.ID, h.Type, data))
}

var _ actor.Actor = (*connActor)(nil)

// Forwarding (docs/protocol.md §13 "Agents of other nodes"). In a cluster
// a command naming another node's agent (by the agent directory), and an
// agent.create naming another node, go to that node's gateway through
// this connection's one upstream to it (forward.go), as the client wrote
// them; the answers and the attached agents' events come back the same
// way. Order: a command for such an agent never takes the registry or a
// direct route, and once one took an upstream, every later one for that
// agent takes it too (remote) until the upstream ends; an upstream writes
// in the order it was handed the commands and the other gateway keeps
// that order as for any client. So the commands for one agent keep one
// ordered path, as direct routing requires (see route).

// remoteNode names the node cmd goes to, or "" for this one; err refuses
// cmd here (an agent.create for a node that is no member).
func (a *connActor) remoteNode(cmd *registry.Command) (string, error) {
	cl := a.g.cfg.Cluster
	if cl == nil || a.forwarded != nil {
		return "", nil // a forwarded command is never forwarded again: no loops
	}
	h := cmd.Header
	if h.Type == protocol.TypeAgentCreate {
		m, _ := cmd.Cmd.(*protocol.AgentCreate)
		if m == nil || m.Node == "" || m.Node == cl.Node() {
			return "", nil
		}
		if _, known := cl.NodeHealth(m.Node); !known {
			return "", protocol.Errorf(protocol.CodeInvalidRequest, "agent.create: node %q is not a node of this cluster", m.Node)
		}
		return m.Node, nil
	}
	if h.Type == protocol.TypeAgentRemove {
		// Forwarded whole when every id is one other node's; otherwise
		// the registry answers, each other node's id refused UNSUPPORTED.
		m, _ := cmd.Cmd.(*protocol.AgentRemove)
		node := ""
		for _, id := range m.AgentIDs {
			n := a.nodeOf(id)
			if n == "" || node != "" && n != node {
				return "", nil
			}
			node = n
		}
		return node, nil
	}
	if parent := protocol.SubagentParent(cmd.Cmd); parent != "" {
		// A parent's jobs are held by its node (docs/protocol.md §13
		// "Jobs and workspaces of other nodes").
		return a.nodeOf(parent), nil
	}
	if !perAgent(h) {
		return "", nil
	}
	return a.nodeOf(h.AgentID), nil
}

// nodeOf names the other node hosting agent id, or "" when it is this
// node's (or nobody's).
func (a *connActor) nodeOf(id string) string {
	if _, local := a.routes[id]; local {
		return ""
	}
	if node, ok := a.remote[id]; ok {
		return node
	}
	if node, ok := a.g.cfg.Cluster.AgentNode(id); ok {
		return node
	}
	return ""
}

// forward hands cmd to the upstream to node, opening it first; a node
// declared dead is refused at once (err, when set, refuses cmd).
func (a *connActor) forward(c actor.Context, node string, cmd *registry.Command, err error) {
	h := cmd.Header
	if err == nil {
		if health, _ := a.g.cfg.Cluster.NodeHealth(node); health == HealthDead {
			err = nodeUnavailable(node, "it is dead (its lease ran out)")
		}
	}
	if err != nil {
		a.out.Push(protocol.NewErrorResponse(h.ID, h.Type, err))
		return
	}
	u := a.upstreamTo(c, node)
	if perAgent(h) {
		a.remote[h.AgentID] = node
	}
	if parent := protocol.SubagentParent(cmd.Cmd); parent != "" {
		// It speaks for the parent, as on one node (docs/protocol.md
		// §10.3): its run changes come from this node (§13 "Events of
		// other nodes"), not through the upstream.
		a.g.cfg.Cluster.SpeakFor(parent, a.out)
		a.spoke = true
	}
	u.send(h, cmd.Raw)
}

// onUpstreamGone forgets an upstream that ended: the next command for its
// node's agents dials again.
func (a *connActor) onUpstreamGone(m *upstreamGone) {
	node := m.u.node
	if a.upstreams[node] != m.u {
		return
	}
	delete(a.upstreams, node)
	for id, n := range a.remote {
		if n == node {
			delete(a.remote, id)
		}
	}
}
