// Package events carries a cluster node's daemon-wide job and workspace
// events to the other nodes' clients (docs/protocol.md §13 "Events of
// other nodes", docs/cluster.md "Events of other nodes"). A node's
// workspace lifecycle events (workspace_created, workspace_attached,
// workspace_retired, workspace_conflict) are daemon broadcasts: every
// client of the daemon gets them. In a cluster a workspace is held by one
// node, but every node lists it, so every node's clients get its events:
// the Relay follows its node's broadcasts (an outbox in the hub, as a
// connection would), publishes its own node's on the subject
// shard.ev.<node>, and broadcasts the other nodes' to its own clients.
//
// Core NATS, at most once: an event published while a node is cut off
// from another is lost for that node's clients, whose next list (the
// gather) shows the truth. No client gets one twice: a connection one node
// opens to another's gateway to forward a client's commands gets no
// broadcasts there, so the client has the other node's events only from
// its own node's Relay.
//
// A parent's subagent_run_changed goes, on one node, to the connections
// that speak for the parent (docs/protocol.md §10.3). A client of another
// node speaks for it through its node, which forwards its subagent.*
// commands to the parent's node; that client is one of its node's
// Listeners. The parent's node publishes every run change (PublishRun) on
// the same subject and sends none on the connections other nodes opened
// to forward commands; each node delivers the run changes to its
// Listeners of that parent. So a client gets each once, and keeps getting
// them when its node's connection to the parent's node is lost and
// opened again.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// SubjectPrefix starts every subject the Relay publishes on: the node's
// name follows (Subject).
const SubjectPrefix = "shard.ev."

// Subject is the subject node publishes its events on.
func Subject(node string) string { return SubjectPrefix + node }

// Travels reports whether events of type typ go to the other nodes'
// clients: the workspace lifecycle events (docs/protocol.md §10.2).
func Travels(typ string) bool {
	switch typ {
	case protocol.TypeWorkspaceCreated, protocol.TypeWorkspaceAttached,
		protocol.TypeWorkspaceRetired, protocol.TypeWorkspaceConflict:
		return true
	}
	return false
}

// Origin reads an event that travels: its type and the node its
// projection names (WorkspaceInfo.node). ok is false for a record that is
// not an event that travels, or is not one JSON object of that shape: it
// is neither published nor delivered.
func Origin(rec []byte) (typ, node string, ok bool) {
	if len(rec) > protocol.DefaultMaxRecord {
		return "", "", false
	}
	typ = protocol.PeekType(rec)
	if !Travels(typ) {
		return "", "", false
	}
	var ev struct {
		Type      string `json:"type"`
		Workspace struct {
			WorkspaceID string `json:"workspace_id"`
			Node        string `json:"node"`
		} `json:"workspace"`
	}
	if err := json.Unmarshal(rec, &ev); err != nil || ev.Type != typ || ev.Workspace.WorkspaceID == "" {
		return "", "", false
	}
	return typ, ev.Workspace.Node, true
}

// Options are a Relay's collaborators.
type Options struct {
	// Node is this node's name; required.
	Node string
	// Hub is the daemon's broadcast hub: the Relay follows it for this
	// node's events and broadcasts the other nodes' into it; required.
	Hub *outbox.Hub
	// Listeners are this node's connections speaking for other nodes'
	// parents, which get those parents' run changes; nil delivers none.
	Listeners *Listeners
	// Logger; nil discards.
	Logger *slog.Logger
}

// Relay publishes this node's events that travel and delivers the other
// nodes' (see the package comment).
type Relay struct {
	o    Options
	done chan struct{}
	// runs queues this node's run changes for publication (PublishRun):
	// the jobs actor hands them over without waiting on the network.
	runs queue
	// nc is the NATS connection, set by Start.
	nc *nats.Conn
}

// NewRelay returns a Relay; it does nothing before Start.
func NewRelay(o Options) *Relay {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{o: o, done: make(chan struct{}), runs: queue{wake: make(chan struct{}, 1)}}
}

// PublishRun hands one of this node's subagent_run_changed records over
// for publication to the other nodes; it never blocks. Records handed
// over before Start are published once it starts.
func (r *Relay) PublishRun(rec []byte) {
	if !r.runs.push(rec) {
		r.o.Logger.Warn("events: too many run changes at once; one did not reach the other nodes")
	}
}

// subscribeTimeout bounds Start's wait for the server to confirm the
// subscription.
const subscribeTimeout = 10 * time.Second

// Start subscribes to the other nodes' events and starts following this
// node's broadcasts, on a goroutine of its own, until ctx ends (Done).
// When it returns nil, every broadcast from then on is published and
// every event another node publishes from then on is delivered. It waits
// (within ctx, at most 10 s) for the server to confirm the subscription;
// an error means neither happens.
func (r *Relay) Start(ctx context.Context, nc *nats.Conn) error {
	r.nc = nc
	sub, err := nc.Subscribe(SubjectPrefix+"*", r.deliver)
	if err == nil {
		fctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
		err = nc.FlushWithContext(fctx)
		cancel()
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		r.runs.stop()
		close(r.done)
		return fmt.Errorf("events: subscribe: %w", err)
	}
	out := r.join()
	published := make(chan struct{})
	go func() {
		defer close(published)
		defer r.runs.stop()
		r.publishRuns(ctx)
	}()
	go func() {
		defer close(r.done)
		defer func() { _ = sub.Unsubscribe() }()
		r.follow(ctx, out)
		<-published
	}()
	return nil
}

// Done is closed once the Relay stopped (its context ended, or Start
// failed).
func (r *Relay) Done() <-chan struct{} { return r.done }

// join adds a follower's outbox to the hub.
func (r *Relay) join() *outbox.Outbox {
	out := outbox.New(outbox.Limits{})
	r.o.Hub.Add(out)
	return out
}

// deliver broadcasts another node's event to this node's clients. Only
// an event that travels, sent by the node its projection names, is
// delivered: this node's own come back on the wildcard and are dropped.
func (r *Relay) deliver(m *nats.Msg) {
	from := strings.TrimPrefix(m.Subject, SubjectPrefix)
	if from == r.o.Node {
		return
	}
	if parent, ok := RunParent(m.Data); ok {
		if r.o.Listeners != nil {
			r.o.Listeners.deliver(parent, m.Data)
		}
		return
	}
	if _, node, ok := Origin(m.Data); !ok || node != from {
		r.o.Logger.Warn("events: dropped a malformed event of another node", "from", from, "bytes", len(m.Data))
		return
	}
	r.o.Hub.Broadcast(m.Data)
}

// follow reads the hub as a connection would and publishes each of this
// node's events that travel (its projection names this node: the other
// nodes' ones it delivered name theirs). A follower that fell behind (its
// outbox overflowed) joins again; what it missed is lost to the other
// nodes' clients until they list again.
func (r *Relay) follow(ctx context.Context, out *outbox.Outbox) {
	subject := Subject(r.o.Node)
	for {
		for {
			recs, ok := out.Next(ctx)
			if !ok {
				break
			}
			for _, rec := range recs {
				if _, node, ok := Origin(rec); !ok || node != r.o.Node {
					continue
				}
				// Publish copies rec into the connection's buffer; a
				// node cut off loses it (at most once).
				if err := r.nc.Publish(subject, rec); err != nil {
					r.o.Logger.Warn("events: publish failed", "err", err)
				}
			}
		}
		r.o.Hub.Remove(out)
		out.Close()
		if ctx.Err() != nil {
			return
		}
		r.o.Logger.Warn("events: fell behind the broadcasts; some events did not reach the other nodes")
		out = r.join()
	}
}

// publishRuns publishes the run changes handed over (PublishRun) until
// ctx ends.
func (r *Relay) publishRuns(ctx context.Context) {
	subject := Subject(r.o.Node)
	for {
		recs, ok := r.runs.next(ctx)
		if !ok {
			return
		}
		for _, rec := range recs {
			if err := r.nc.Publish(subject, rec); err != nil {
				r.o.Logger.Warn("events: publish failed", "err", err)
			}
		}
	}
}

// maxQueued bounds the run changes waiting for publication: past it a
// burst's are dropped (lost to the other nodes, whose lists correct the
// view) rather than grow without bound while NATS is away.
const maxQueued = 4096

// queue is a bounded FIFO of records with one reader.
type queue struct {
	mu   sync.Mutex
	recs [][]byte
	wake chan struct{}
	// stopped: nobody reads any more (the relay ended or never started);
	// pushes are dropped quietly.
	stopped bool
}

// stop ends the queue: what it holds and what comes later is dropped.
func (q *queue) stop() {
	q.mu.Lock()
	q.stopped, q.recs = true, nil
	q.mu.Unlock()
}

// push queues rec; false when the queue is full (rec dropped). A stopped
// queue drops rec quietly (true).
func (q *queue) push(rec []byte) bool {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return true
	}
	if len(q.recs) >= maxQueued {
		q.mu.Unlock()
		return false
	}
	q.recs = append(q.recs, rec)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// next waits for records and takes them all; false once ctx ended.
func (q *queue) next(ctx context.Context) ([][]byte, bool) {
	for {
		q.mu.Lock()
		recs := q.recs
		q.recs = nil
		q.mu.Unlock()
		if len(recs) > 0 {
			return recs, true
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}
