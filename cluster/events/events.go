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
// subagent_run_changed does not travel here: it goes to the connections
// that speak for the parent (subagent.*), and a client of another node
// speaks for it through its connection to the parent's node (its
// subagent.* commands are forwarded there), which delivers them.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
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
	// Conn is the node's NATS connection; required.
	Conn *nats.Conn
	// Hub is the daemon's broadcast hub: the Relay follows it for this
	// node's events and broadcasts the other nodes' into it; required.
	Hub *outbox.Hub
	// Logger; nil discards.
	Logger *slog.Logger
}

// Relay publishes this node's events that travel and delivers the other
// nodes' (see the package comment).
type Relay struct {
	o    Options
	done chan struct{}
}

// NewRelay returns a Relay; it does nothing before Start.
func NewRelay(o Options) *Relay {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{o: o, done: make(chan struct{})}
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
func (r *Relay) Start(ctx context.Context) error {
	sub, err := r.o.Conn.Subscribe(SubjectPrefix+"*", r.deliver)
	if err == nil {
		fctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
		err = r.o.Conn.FlushWithContext(fctx)
		cancel()
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		close(r.done)
		return fmt.Errorf("events: subscribe: %w", err)
	}
	out := r.join()
	go func() {
		defer close(r.done)
		defer func() { _ = sub.Unsubscribe() }()
		r.follow(ctx, out)
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
				if err := r.o.Conn.Publish(subject, rec); err != nil {
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
