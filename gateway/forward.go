package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// Cluster is what the gateway needs of the cluster its daemon is a node
// of, to forward a client's commands for another node's agents to that
// node (docs/protocol.md §13 "Agents of other nodes"). The daemon
// implements it over its cluster node and agent directory; nil on a
// single shardd, where nothing is forwarded. Every method returns at once
// but Dial, which the gateway calls off every mailbox.
type Cluster interface {
	// Node is this node's name.
	Node() string
	// AgentNode names the node hosting agentID when that is another node
	// (the agent directory, or where this node learned it lives); ok is
	// false for this node's agents and for ids no node has.
	AgentNode(agentID string) (node string, ok bool)
	// NodeHealth is a node's health as this node sees it ("alive",
	// "suspect", "dead"); known is false for a name that is no member.
	NodeHealth(node string) (health string, known bool)
	// Dial opens a byte stream to node's gateway (a cluster/tunnel
	// connection, served there by ServeTunnel). ctx bounds the open.
	Dial(ctx context.Context, node string) (net.Conn, error)
	// Nodes names every member of the cluster but this node, whatever
	// its health: the nodes a cluster-wide list asks (gather.go).
	Nodes() []string
	// SpeakFor records that the connection whose outbox is out speaks for
	// parent, another node's agent (it sent a subagent.* command naming
	// the parent, forwarded to its node): this node delivers it the
	// parent's subagent_run_changed (docs/protocol.md §13 "Events of other
	// nodes"), until Forget.
	SpeakFor(parent string, out *outbox.Outbox)
	// Forget drops the connection whose outbox is out: it ended.
	Forget(out *outbox.Outbox)
}

// HealthDead is the Cluster.NodeHealth of a node declared dead: commands
// for it are refused without a dial.
const HealthDead = "dead"

// forwardVersion is the version of the forward preamble.
const forwardVersion = 1

// forwardIdent is the preamble a node sends first on a stream to another
// node's gateway, before the wire protocol starts: who the person is whose
// commands it carries, so that the remote gateway applies the same rules
// (docs/protocol.md §13 "Agents of other nodes"): `source` is the transport
// the person used ("unix", "websocket"), echoed as the `source` of a
// permission or UI answer given through it; principal is the principal
// their connection was opened under ("" for local trust, the unix socket
// or a ticket minted over it); origin names their connection across the
// cluster (agent.Client.Origin: node, gateway run, connection id), so a
// child's node can ask an ancestor's node whether they are one of its
// interactive clients. One JSON object on one line.
type forwardIdent struct {
	V         int    `json:"v"`
	Node      string `json:"node"`
	Source    string `json:"source"`
	Principal string `json:"principal,omitempty"`
	Origin    string `json:"origin,omitempty"`
}

// maxForwardIdent bounds the preamble's line.
const maxForwardIdent = 4 << 10

// encode is the preamble's line, newline included.
func (f forwardIdent) encode() []byte {
	b, _ := json.Marshal(f) // strings and an int
	return append(b, '\n')
}

// decodeForwardIdent reads a preamble's line (without its newline). It
// refuses anything but one object of the known version naming a node and
// a known source.
func decodeForwardIdent(line []byte) (forwardIdent, error) {
	var f forwardIdent
	if len(line) > maxForwardIdent {
		return f, fmt.Errorf("%w: %d bytes", errForwardIdent, len(line))
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return forwardIdent{}, fmt.Errorf("%w: %w", errForwardIdent, err)
	}
	if dec.More() {
		return forwardIdent{}, fmt.Errorf("%w: trailing data", errForwardIdent)
	}
	switch {
	case f.V != forwardVersion:
		return forwardIdent{}, fmt.Errorf("%w: version %d", errForwardIdent, f.V)
	case f.Node == "" || len(f.Node) > 64:
		return forwardIdent{}, fmt.Errorf("%w: node %q", errForwardIdent, f.Node)
	case f.Source != "unix" && f.Source != "websocket":
		return forwardIdent{}, fmt.Errorf("%w: source %q", errForwardIdent, f.Source)
	case len(f.Principal) > 128:
		return forwardIdent{}, fmt.Errorf("%w: principal of %d bytes", errForwardIdent, len(f.Principal))
	case len(f.Origin) > 128:
		return forwardIdent{}, fmt.Errorf("%w: origin of %d bytes", errForwardIdent, len(f.Origin))
	}
	return f, nil
}

// errForwardIdent marks a preamble the gateway refused.
var errForwardIdent = errors.New("gateway: bad forward preamble")

// Bounds of a forwarded connection.
const (
	// forwardDialTimeout bounds opening the stream to another node and
	// reading its hello; past it the commands waiting for it are answered
	// NODE_UNAVAILABLE.
	forwardDialTimeout = 15 * time.Second
	// forwardIdentTimeout bounds how long an accepted tunnel connection
	// may take to send its preamble.
	forwardIdentTimeout = 10 * time.Second
)

// nodeUnavailable is the error of a command this node could not carry to
// node (docs/protocol.md §13 "Agents of other nodes").
func nodeUnavailable(node, why string) *protocol.Error {
	e := protocol.Errorf(protocol.CodeNodeUnavailable, "node %s is unavailable: %s", node, why)
	e.Data = map[string]string{"node": node}
	return e
}

// Messages an upstream sends its connection actor.
type (
	// upstreamGone: the upstream ended (its node was lost or could not be
	// reached); every command it carried has been answered. Commands
	// after it dial again.
	upstreamGone struct{ u *upstream }
	// upstreamLearned: an agent.create forwarded through u made agentID,
	// on u's node; sent before the client sees the response, so its next
	// command for the agent takes u even before the directory lists it.
	upstreamLearned struct {
		u       *upstream
		agentID string
	}
)

func (*upstreamGone) connMessage()    {}
func (*upstreamLearned) connMessage() {}

// upstream is one client connection's stream to another node's gateway:
// every command of that client for that node's agents goes through it, in
// the order the connection actor hands them over, and whatever the other
// gateway answers (responses, which carry the client's own ids, and the
// events of the agents attached through it) is queued as it is on the
// client's outbox. It is opened lazily, by its first command, and closed
// when the client's connection ends: the other node's connection ends
// with it, and so do the attachments made through it.
//
// The actor calls send and close; a goroutine dials and writes, another
// reads; neither blocks the actor.
type upstream struct {
	node   string
	ident  forwardIdent
	out    *outbox.Outbox
	owner  *actor.PID
	sys    *actor.ActorSystem
	dial   func(ctx context.Context, node string) (net.Conn, error)
	ctx    context.Context
	cancel context.CancelFunc
	// wake has room for one signal: records are queued.
	wake chan struct{}

	// mu protects the following.
	mu sync.Mutex
	// queue is what waits for the writer.
	queue [][]byte
	// pending are the commands sent and not answered yet: their types by
	// id, oldest first (ids may repeat).
	pending map[string][]string
	// attached are the agents an agent.attach was sent for and no detach
	// since: told when the upstream is lost.
	attached map[string]bool
	// captures are the commands a gather sent through it (gather.go), by
	// the id it gave them: their answers go to the gather, never to the
	// client.
	captures map[string]chan<- gathered
	// failed is why the upstream ended; nil while it serves.
	failed error
}

// newUpstream starts the upstream of a connection to node; go_ runs its
// goroutine (the gateway's group).
func newUpstream(parent context.Context, node string, ident forwardIdent, out *outbox.Outbox, sys *actor.ActorSystem, owner *actor.PID,
	dial func(context.Context, string) (net.Conn, error), go_ func(func()) bool) *upstream {
	ctx, cancel := context.WithCancel(parent)
	u := &upstream{node: node, ident: ident, out: out, owner: owner, sys: sys, dial: dial, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), pending: map[string][]string{}, attached: map[string]bool{}, captures: map[string]chan<- gathered{}}
	if !go_(u.run) {
		cancel()
		u.failed = nodeUnavailable(node, "this node is shutting down")
	}
	return u
}

// send queues one command (its raw record) for the other node. An upstream
// that ended answers it at once.
func (u *upstream) send(h protocol.Header, rec []byte) {
	u.mu.Lock()
	if err := u.failed; err != nil {
		u.mu.Unlock()
		u.out.Push(protocol.NewErrorResponse(h.ID, h.Type, err))
		return
	}
	u.pending[h.ID] = append(u.pending[h.ID], h.Type)
	switch h.Type {
	case protocol.TypeAgentAttach:
		u.attached[h.AgentID] = true
	case protocol.TypeAgentDetach:
		delete(u.attached, h.AgentID)
	}
	u.queue = append(u.queue, rec)
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// capture queues one command of a gather (its raw record, under the
// gather's own id): its answer, or the upstream's failure, goes to ch,
// which must have room for it.
func (u *upstream) capture(id string, rec []byte, ch chan<- gathered) {
	u.mu.Lock()
	if err := u.failed; err != nil {
		u.mu.Unlock()
		ch <- gathered{node: u.node, err: protocol.AsError(err)}
		return
	}
	u.captures[id] = ch
	u.queue = append(u.queue, rec)
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// release forgets a gather's command whose answer nobody waits for any
// more; an answer that still comes is dropped.
func (u *upstream) release(id string) {
	u.mu.Lock()
	delete(u.captures, id) // nil once failed: a no-op
	u.mu.Unlock()
}

// close ends the upstream for good (its client's connection ended):
// nothing is answered or told any more.
func (u *upstream) close() { u.cancel() }

// run dials, then writes what is queued until the upstream ends.
func (u *upstream) run() {
	dctx, cancel := context.WithTimeout(u.ctx, forwardDialTimeout)
	nc, rd, err := u.open(dctx)
	cancel()
	if err != nil {
		u.fail(nodeUnavailable(u.node, err.Error()))
		return
	}
	relayed := make(chan struct{})
	go func() { // its end is run's: run waits for it below
		defer close(relayed)
		u.relay(rd)
	}()
	defer func() {
		_ = nc.Close()
		<-relayed
		u.fail(nodeUnavailable(u.node, "the connection to it was lost"))
	}()
	var buf []byte
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-relayed:
			return
		case <-u.wake:
		}
		u.mu.Lock()
		recs := u.queue
		u.queue = nil
		u.mu.Unlock()
		// What was queued together goes in one write.
		buf = buf[:0]
		for _, rec := range recs {
			buf = append(append(buf, rec...), '\n')
		}
		if _, err := nc.Write(buf); err != nil {
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil // a burst's buffer is not kept
		}
	}
}

// open dials the node, sends the preamble and reads the other gateway's
// hello; ctx bounds all of it.
func (u *upstream) open(ctx context.Context) (net.Conn, *protocol.Reader, error) {
	nc, err := u.dial(ctx, u.node)
	if err != nil {
		return nil, nil, err
	}
	// ctx ending (the bound, or the client gone) ends the open.
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	failed := func(err error) (net.Conn, *protocol.Reader, error) {
		stop()
		_ = nc.Close()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, nil, err
	}
	if _, err := nc.Write(u.ident.encode()); err != nil {
		return failed(fmt.Errorf("send preamble: %w", err))
	}
	rd := protocol.NewReader(nc, protocol.DefaultMaxRecord)
	rec, err := rd.Next()
	if err != nil {
		return failed(fmt.Errorf("read hello: %w", err))
	}
	msg, err := protocol.DecodeEvent(rec)
	if err != nil {
		return failed(fmt.Errorf("decode hello: %w", err))
	}
	switch m := msg.(type) {
	case *protocol.Hello:
		if versionMajor(m.ProtocolVersion) != versionMajor(protocol.Version) {
			return failed(fmt.Errorf("it speaks protocol %s, this node %s", m.ProtocolVersion, protocol.Version))
		}
	case *protocol.ErrorEvent:
		return failed(fmt.Errorf("it refused the connection: %s", m.Message))
	default:
		return failed(fmt.Errorf("it sent %q before hello", msg.Head().Type))
	}
	if !stop() {
		return failed(fmt.Errorf("no hello in time"))
	}
	return nc, rd, nil
}

// versionMajor is a protocol version's major part ("0" of "0.1.0").
func versionMajor(v string) string {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// relay queues what the other gateway sends on the client's outbox, as it
// is, until the stream ends. Records are not decoded: only a response's
// envelope is read, to know which command it answers.
func (u *upstream) relay(rd *protocol.Reader) {
	for {
		rec, err := rd.Next()
		if errors.Is(err, protocol.ErrRecordTooLong) {
			continue // consumed whole: the stream is intact, nothing to relay
		}
		if err != nil {
			return
		}
		if !rd.Owned() {
			rec = bytes.Clone(rec)
		}
		if protocol.PeekType(rec) == protocol.TypeResponse && u.answered(rec) {
			continue // a gather's: not the client's
		}
		u.out.Push(rec)
	}
}

// answered takes a response's command off the pending ones; a successful
// agent.create teaches the connection where its agent lives first. It
// reports whether the response answered a gather's command (handed to the
// gather instead).
func (u *upstream) answered(rec []byte) bool {
	var r struct {
		ID      string          `json:"id"`
		Command string          `json:"command"`
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(rec, &r) != nil {
		return false
	}
	u.mu.Lock()
	if ch, ok := u.captures[r.ID]; ok {
		delete(u.captures, r.ID)
		u.mu.Unlock()
		ch <- gathered{node: u.node, rec: rec}
		return true
	}
	if strings.HasPrefix(r.ID, gatherIDPrefix) {
		// A gather's that was released (its node answered past the
		// bound): the client never sent it. Ids with the prefix are the
		// gathers' on a connection to another node.
		u.mu.Unlock()
		return true
	}
	if p := u.pending[r.ID]; len(p) > 0 {
		if len(p) == 1 {
			delete(u.pending, r.ID)
		} else {
			u.pending[r.ID] = p[1:]
		}
	}
	u.mu.Unlock()
	if r.Command == protocol.TypeAgentCreate && r.Success {
		var data protocol.AgentCreateData
		if json.Unmarshal(r.Data, &data) == nil && data.AgentID != "" {
			u.sys.Root.Send(u.owner, &upstreamLearned{u: u, agentID: data.AgentID})
		}
	}
	return false
}

// fail ends the upstream with err: each command not answered is answered
// err, each agent attached through it gets an error event saying the
// attachment ended, and the connection actor is told. Nothing of that
// happens after close.
func (u *upstream) fail(err *protocol.Error) {
	u.mu.Lock()
	if u.failed != nil {
		u.mu.Unlock()
		return
	}
	u.failed = err
	pending, attached, captures := u.pending, u.attached, u.captures
	u.pending, u.attached, u.queue, u.captures = nil, nil, nil, nil
	u.mu.Unlock()
	for _, ch := range captures {
		ch <- gathered{node: u.node, err: err} // a gather waits even for a client gone
	}
	if u.ctx.Err() != nil {
		return // the client is gone: nobody to tell
	}
	for id, types := range pending {
		for _, typ := range types {
			u.out.Push(protocol.NewErrorResponse(id, typ, err))
		}
	}
	for id := range attached {
		u.out.Push(protocol.MustMarshal(protocol.ErrorEvent{
			Header: protocol.Header{Type: protocol.TypeError, AgentID: id},
			Code:   err.Code,
			Message: fmt.Sprintf("%s; the attachment to agent %s through it ended (attach again once the node is back)",
				err.Message, id),
		}))
	}
	u.sys.Root.Send(u.owner, &upstreamGone{u: u})
}
