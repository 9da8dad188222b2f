package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// slowGrace is how long a dropped slow consumer's writer may still try to
// deliver the fatal error event before the transport is cut.
const slowGrace = time.Second

// Messages of the connection actor.
type (
	inbound struct {
		rec []byte
		err error // a record-level problem (too long, binary frame)
	}
	readerDone struct{ err error }
)

// connActor is the actor of one client connection.
type connActor struct {
	g      *Gateway
	id     uint64
	t      transport
	out    *outbox.Outbox
	client *agent.Client
	local  bool // unix socket: local trust (spec §4.2)
	// cred is what the connection was opened under; revoking it closes
	// the connection.
	cred credential
	// writerDone is closed when the writer goroutine has ended (outbox
	// drained or transport failed).
	writerDone chan struct{}
}

func (a *connActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *inbound:
		a.onInbound(c, m)
	case *readerDone:
		c.Stop(c.Self())
	case *actor.Stopping:
		a.out.Close()
		a.g.hub.Remove(a.out)
		go a.t.Close("connection closed", false) // may block on a WS handshake
	case *actor.Stopped:
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
	a.out.Push(protocol.MustMarshal(protocol.Hello{
		Header:          protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version,
		ServerVersion:   a.g.cfg.ServerVersion,
		Capabilities:    caps,
	}))
	a.g.hub.Add(a.out)

	ctx := a.g.ctx
	writerDone := a.writerDone
	a.g.goTracked(func() { // reader
		for {
			rec, err := a.t.Read(ctx)
			switch {
			case errors.Is(err, protocol.ErrRecordTooLong), errors.Is(err, errBinaryFrame):
				sys.Root.Send(self, &inbound{err: err})
				continue
			case err != nil:
				sys.Root.Send(self, &readerDone{err: err})
				return
			}
			sys.Root.Send(self, &inbound{rec: rec})
		}
	})
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

func (a *connActor) onInbound(c actor.Context, m *inbound) {
	if m.err != nil {
		a.out.Push(protocol.NewErrorResponse("", "", protocol.Errorf(protocol.CodeInvalidRequest, "%v", m.err)))
		return
	}
	cmd, h, err := protocol.DecodeCommand(m.rec)
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
	c.Send(a.g.registry, &registry.Command{Client: a.client, Header: h, Cmd: cmd, Raw: m.rec})
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
