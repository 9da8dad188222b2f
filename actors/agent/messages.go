package agent

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// Client is a connection as the agent sees it: where to send records and
// which actor to watch for its end.
type Client struct {
	// ID is unique per daemon run.
	ID uint64
	// PID is the connection actor; its termination detaches the client.
	PID *actor.PID
	// Out receives every record for the connection.
	Out *outbox.Outbox
	// Source names the transport ("unix", "websocket"); it is echoed as the
	// `source` of a request this client resolves.
	Source string
}

// Send pushes one record to the client.
func (c *Client) Send(rec []byte) { c.Out.Push(rec) }

// hold queues rec for the client without starting to write it (see
// outbox.Outbox.Hold); a later Send or flush writes it, in order.
func (c *Client) hold(rec []byte) { c.Out.Hold(rec) }

// flush starts writing what is queued: by the agent itself when the
// connection is idle (direct, see outbox.Outbox.FlushDirect), or by the
// connection's writer goroutine.
func (c *Client) flush(direct bool) {
	if direct {
		c.Out.FlushDirect()
	} else {
		c.Out.Flush()
	}
}

// Request is a client command for this agent: a per-agent command to
// forward, or one of agent.create (start and report readiness),
// agent.attach, agent.detach, agent.terminate, agent.kill.
type Request struct {
	Client *Client
	Header protocol.Header
	Cmd    protocol.Command
	Raw    []byte
}

// Shutdown stops the agent's runtime for a daemon shutdown. Graceful lets an
// active turn finish; Force kills at once. The agent answers its parent with
// Drained once no runtime is left and starts no new one.
type Shutdown struct{ Force bool }

// InfoChanged is sent to the parent (the registry) whenever the agent's
// public projection changes.
type InfoChanged struct{ Info protocol.AgentInfo }

// Drained is sent to the parent when a Shutdown has completed.
type Drained struct{ AgentID string }

// Internal timer messages, tagged so stale ones are ignored.
type (
	startTimeout struct{ epoch int64 }
	idleTick     struct {
		epoch int64
		gen   int
	}
	escTimer struct {
		epoch int64
		gen   int
	}
)
