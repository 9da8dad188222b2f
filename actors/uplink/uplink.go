// Package uplink carries a child agent's permission and UI requests to an
// ancestor on another node of a cluster, and the ancestor's clients'
// standing back (docs/protocol.md §13 "Runs on other nodes"). On one node
// a child with no interactive client sends a request up (agent.Delegate)
// to the nearest ancestor that has one; when the child runs on a node
// that claimed its run and the ancestor lives on the parent's node, the
// registry hands the Delegate here (registry.RemoteDelegate), and this
// package plays each side's part for the other:
//
//   - On the child's node a link actor per ancestor's node (out.go) dials
//     that node, sends the request, and stands for the ancestor: the
//     child's DelegatedResolved and CheckResponder go through it.
//   - On the ancestor's node a link actor per accepted connection (in.go)
//     stands for the child: it delegates the request to the ancestor
//     through the registry, as a child would, relays the acceptance, the
//     resolution and the ancestor's word on an answering client (by the
//     client's origin, agent.CheckOrigin).
//
// The link is a byte stream (a cluster/tunnel connection, dialed and
// accepted by the daemon) of JSON lines (wire.go): ordered, and lost as a
// whole when either node goes. A lost link leaves no request open: the
// child's node delegates its requests again or applies the headless
// policy (agent.DelegateLost), the ancestor's node resolves them for its
// clients with source "node_lost".
//
// The other way, a parent's subagent.steer of a run another node claimed
// goes over the parent's node's out link to that node (a registry.RemoteSteer;
// frames steer and steered): there the in link hands it to the child as
// its lease's holder would (agent.LeaseSteer), strict as on one node, and
// sends the runtime's outcome back; the parent's node records it against
// the run (agent.LeaseSteered to the job actor) and only then answers the
// parent's client. A link lost before the outcome answers NODE_UNAVAILABLE.
//
// First answer wins as on one node: the child's actor, the one holder of
// its open requests, decides; an answer from the ancestor's node reaches
// it as a forwarded command (the gateway forwards a command for another
// node's agent), and an answer on its own node directly.
package uplink

import (
	"context"
	"log/slog"
	"net"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/supervisor"
)

// Deps are what the links need of the daemon.
type Deps struct {
	// Registry delivers a delegated request to the ancestor (agent.Route).
	Registry *actor.PID
	// Node is this node's name: the requester's node of a request its
	// own children send over.
	Node string
	// Located, when set, is told that node hosts agentID, a child whose
	// request came over: the ancestor's clients answer it with a command
	// for the child, which this node forwards there even before its
	// agent directory lists the child. It must not block.
	Located func(agentID, node string)
	// Dial opens a byte stream to node's uplink listener (served there by
	// Serve). ctx bounds the open.
	Dial func(ctx context.Context, node string) (net.Conn, error)
	// Group owns the links' goroutines; required.
	Group *xsync.Group
	// Logger; nil discards.
	Logger *slog.Logger
	// Dispatcher runs the links' mailboxes; nil is protoactor's default.
	Dispatcher actor.Dispatcher
}

// accepted is a connection another node opened to this node's listener.
type accepted struct{ conn net.Conn }

// root owns the links: one out link per node the child's requests go to,
// and one in link per connection accepted.
type root struct {
	deps Deps
	outs map[string]*actor.PID
}

// Props returns the props of the uplink's root actor, to which the
// registry sends registry.RemoteDelegate (registry.AttachUplink).
func Props(deps Deps) *actor.Props {
	if deps.Group == nil {
		panic("uplink: Deps.Group is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return actor.PropsFromProducer(func() actor.Actor { return &root{deps: deps, outs: map[string]*actor.PID{}} },
		actor.WithSupervisor(supervisor.StopOnFailure()), actor.WithDispatcher(dispatcher(deps)))
}

// dispatcher is the links' dispatcher: Deps.Dispatcher or protoactor's.
func dispatcher(deps Deps) actor.Dispatcher {
	if deps.Dispatcher != nil {
		return deps.Dispatcher
	}
	return actor.NewDefaultDispatcher(300)
}

// Receive implements actor.Actor.
func (r *root) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *registry.RemoteDelegate:
		c.Send(r.out(c, m.Node), m)
	case *registry.RemoteSteer:
		c.Send(r.out(c, m.Node), m)
	case *registry.RemoteSteered:
		c.Send(r.out(c, m.Node), m)
	case *accepted:
		conn := m.conn
		c.Spawn(actor.PropsFromProducer(func() actor.Actor { return newIn(r.deps, conn) },
			actor.WithSupervisor(supervisor.StopOnFailure()), actor.WithDispatcher(dispatcher(r.deps))))
	}
}

// out is the link actor to node, spawned at its first use.
func (r *root) out(c actor.Context, node string) *actor.PID {
	pid := r.outs[node]
	if pid == nil {
		pid = c.Spawn(actor.PropsFromProducer(func() actor.Actor { return newOut(r.deps, node) },
			actor.WithSupervisor(supervisor.StopOnFailure()), actor.WithDispatcher(dispatcher(r.deps))))
		r.outs[node] = pid
	}
	return pid
}

// Serve hands the connections ln accepts to the uplink's root actor pid,
// each a link from a child's node. It returns at once; the accept loop
// ends when ln is closed.
func Serve(sys *actor.ActorSystem, pid *actor.PID, ln net.Listener, group *xsync.Group, log *slog.Logger) {
	group.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if log != nil {
					log.Debug("uplink: listener closed", "err", err)
				}
				return
			}
			sys.Root.Send(pid, &accepted{conn: c})
		}
	})
}
