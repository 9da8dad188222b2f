package agent

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// Message is a message of the agent actor family: every message the agent
// actor receives (and the replies it sends, which other actors receive) is
// one of the types in this file. The interface is sealed by its unexported
// method, so nothing outside the family can pass for one, and Route carries
// a Message instead of any. Receive logs anything else it is sent.
type Message interface{ agentMessage() }

func (Request) agentMessage()           {}
func (Shutdown) agentMessage()          {}
func (InfoChanged) agentMessage()       {}
func (Drained) agentMessage()           {}
func (Routed) agentMessage()            {}
func (Route) agentMessage()             {}
func (LeaseStart) agentMessage()        {}
func (LeaseStop) agentMessage()         {}
func (LeaseSteer) agentMessage()        {}
func (LeaseSteered) agentMessage()      {}
func (LeaseStarted) agentMessage()      {}
func (LeaseEnded) agentMessage()        {}
func (Inject) agentMessage()            {}
func (Injected) agentMessage()          {}
func (Delegate) agentMessage()          {}
func (DelegateResult) agentMessage()    {}
func (DelegatedResolved) agentMessage() {}
func (CheckResponder) agentMessage()    {}
func (ResponderChecked) agentMessage()  {}
func (CheckOrigin) agentMessage()       {}
func (OriginChecked) agentMessage()     {}
func (DelegateLost) agentMessage()      {}
func (startTimeout) agentMessage()      {}
func (idleTick) agentMessage()          {}
func (escTimer) agentMessage()          {}
func (titleSaved) agentMessage()        {}

// titleSaved reports the end of a title's commit (title.go) to the agent
// that started it.
type titleSaved struct{ err error }

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
	// Origin names the person's connection across a cluster: the node
	// and connection their commands come from, the same on every node
	// those commands are forwarded to ("" on a single shardd). A child's
	// node asks its ancestor's node by it whether an answering client is
	// one of the ancestor's interactive clients (CheckOrigin).
	Origin string
	// Forwarded is set on a connection another node opened to forward
	// its client's commands (docs/protocol.md §13 "Agents of other
	// nodes"). That node delivers its client the parents' run changes
	// itself (cluster/events), so the jobs send it none here.
	Forwarded bool
}

// Send pushes one record to the client, and writes it at once, from the
// sending goroutine, when the connection is idle (outbox.PushDirect): a
// response no longer waits for the connection's writer goroutine to be
// woken and scheduled. On a loaded daemon that hop was the tail of a
// subagent.create's ack (the jobs benchmark's target, BENCHMARKS.md).
// Broadcasts (outbox.Hub) still wake the writers: one actor writing to
// every connection itself was slower.
func (c *Client) Send(rec []byte) { c.Out.PushDirect(rec) }

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
type InfoChanged struct {
	Info protocol.AgentInfo
	// Attachments is how many connections are attached (or attaching):
	// not part of the wire projection, but what the workspace actor asks
	// the registry before it retires a worktree an agent is watched in.
	Attachments int
	// Idle: nothing of the agent is in flight, and the registry may
	// passivate it (passivate.go). InfoChanged is also sent when only this
	// changed.
	Idle bool
	// Epoch is the current runtime generation (-1 before the first): a
	// passivated agent's next actor continues from it (PropsAfter).
	Epoch int64
}

// Drained is sent to the parent when a Shutdown has completed.
type Drained struct{ AgentID string }

// Routed tells a connection actor where its commands for AgentID go from
// now on (see gateway's direct routing): the agent actor sends it, before
// anything else, when it handles the connection's agent.attach, with PID
// itself; the registry sends it with a nil PID when it answers an
// agent.attach with NOT_FOUND. Either way it is the first thing the
// connection hears about that attach, so the connection may hold its
// later commands for AgentID until it arrives and then send them on in
// order.
type Routed struct {
	AgentID string
	PID     *actor.PID
}

// LeaseStart asks the agent to run one task for a subagent run: once its
// runtime is ready and idle the task is sent as a prompt, and the holder
// hears LeaseStarted, then exactly one LeaseEnded. While the lease is held a
// client's direct prompt or steer gets CONFLICT (docs/protocol.md §10.3 lease
// guard).
type LeaseStart struct {
	RunID  string
	Task   string
	Holder *actor.PID
}

// LeaseStop cancels the leased run's turn by escalation (abort, then
// graceful, then kill); the holder hears LeaseEnded with Cancelled set.
type LeaseStop struct {
	RunID string
	Force bool
}

// LeaseSteer delivers a parent's message into the leased run's active turn
// (subagent.steer, strict: never queued for a later turn). The agent answers
// the client itself with SubagentSteerData: injected, or conflict when no
// turn of the run is in flight.
type LeaseSteer struct {
	RunID, Message, CorrelationID string
	Client                        *Client
	Header                        protocol.Header
	// ReplyTo, when set, takes the outcome instead of Client, as a
	// SteerAnswer: the steer came from the parent's node over the cluster
	// (docs/protocol.md §13 "Runs on other nodes"), where the parent's
	// client is answered once the parent's node recorded it.
	ReplyTo *actor.PID
}

// SteerAnswer is the outcome of a LeaseSteer with ReplyTo: injected (the
// runtime took the message into a provider request of the run's turn, in
// TurnID) or conflict.
type SteerAnswer struct {
	CorrelationID, Status, TurnID string
}

// LeaseSteered tells the holder how a steer of the leased run resolved, so
// that the job records it against the run (docs/protocol.md §10.3): the
// parent's subagent.steer and a person's direct steer alike. It reaches
// the holder before the LeaseEnded of the turn it joined or missed.
//
// It is sent as a request: the holder answers SteerRecorded once the record
// is committed (or when it has no such run), and only then is the steer
// answered to whoever sent it.
type LeaseSteered struct {
	RunID   string
	AgentID string
	Steer   protocol.RunSteer
}

// SteerRecorded answers a LeaseSteered: the steer is in the run's record.
type SteerRecorded struct{}

// LeaseStarted tells the holder the child accepted the task: the run is active.
type LeaseStarted struct {
	RunID   string
	AgentID string
}

// LeaseEnded tells the holder how the run's turn ended.
type LeaseEnded struct {
	RunID   string
	AgentID string
	// Completed: the turn ended normally; FinalText is the last assistant text.
	Completed bool
	// Cancelled: the turn ended because of LeaseStop or a client's abort.
	Cancelled bool
	FinalText string
	Usage     protocol.RunUsage
	// Error says why a run that did not complete ended.
	Error string
	// StopStage is the last escalation stage used ("abort", "term", "kill").
	StopStage string
	// ExitStatus describes the runtime's exit when it ended the run.
	ExitStatus string
}

// LeaseStopping tells the holder that a stop of the leased run's runtime
// entered an escalation stage ("abort", "term", "kill"), while the run is
// still live: the holder records it so the run shows its stage (and can be
// seen stuck) during the escalation, not only once it ended.
type LeaseStopping struct {
	RunID   string
	AgentID string
	Stage   string
}

// Inject delivers a completion report into a parent agent: steered into
// its active turn, or as a prompt (restoring a stopped runtime) when idle.
// The sender hears Injected once the runtime accepted it.
type Inject struct {
	Key  string // echoed in Injected (the run id)
	Text string
}

// Injected acknowledges an Inject.
type Injected struct {
	Key string
	Err error
}

// Route asks the registry to deliver Msg to the agent actor AgentID,
// keeping the sender. Agents use it to reach their parent; the jobs
// subsystem to reach children.
type Route struct {
	AgentID string
	Msg     Message
}

// Delegate asks an ancestor to surface a child's permission/UI request to its
// interactive clients (docs/protocol.md §6.3): a child with no interactive
// responder of its own routes the request to the nearest ancestor that has
// one. Rec is the request event with the child's agent_id; Origin is the
// child actor.
type Delegate struct {
	RequestID string
	Rec       []byte
	Origin    *actor.PID
	// Node is the node hosting the child whose request it is, when the
	// request came over from another node ("": this node's own child).
	// The uplink carries it up a chain of nodes, so the ancestor's node
	// learns where to forward its clients' answers.
	Node string
}

// DelegateResult answers a Delegate: Accepted by the ancestor actor PID, or
// not accepted (no responder anywhere up the hierarchy).
type DelegateResult struct {
	RequestID string
	Accepted  bool
	PID       *actor.PID
}

// DelegatedResolved tells the ancestor that a delegated request closed; Rec
// is the resolved event (child agent_id) its clients receive.
type DelegatedResolved struct {
	RequestID string
	Rec       []byte
}

// CheckResponder asks the ancestor whether a client that answered a
// delegated request is one of its interactive attachments.
type CheckResponder struct{ Req *Request }

// ResponderChecked answers CheckResponder.
type ResponderChecked struct {
	OK  bool
	Req *Request
}

// CheckOrigin asks an ancestor, for a child on another node, whether the
// connection Origin (Client.Origin) is one of its interactive attachments:
// a CheckResponder that crossed nodes, where the answering connection is
// known by its origin only. Answered OriginChecked with the same Seq.
type CheckOrigin struct {
	Seq       uint64
	RequestID string
	Origin    string
}

// OriginChecked answers CheckOrigin.
type OriginChecked struct {
	Seq uint64
	OK  bool
}

// DelegateLost tells a child that the ancestor its request was delegated
// to can no longer be reached (its node was lost): the request is
// delegated again, or falls to the headless policy, as a new one would.
type DelegateLost struct{ RequestID string }

// Timer messages the actor sends itself (see after), tagged with the
// generation they were armed for so that stale ones are ignored.
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
