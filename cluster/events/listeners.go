package events

import (
	"encoding/json"
	"sync"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// Listeners are this node's client connections that speak for another
// node's parents: they sent a subagent.* command naming that parent, which
// this node forwarded to the parent's node. On one node the jobs
// send a parent's subagent_run_changed to the connections that spoke for
// it (docs/protocol.md §10.3); across nodes the parent's node publishes
// them (Relay.PublishRun) and this node delivers them to these, while the
// parent's node sends none to the connection it got the forwarded
// commands on. A connection is kept until it ends (Forget), as on one
// node: a lost connection to the parent's node loses nothing. Safe for
// concurrent use.
type Listeners struct {
	mu sync.Mutex
	// by are the connections speaking for each parent; of the parents
	// each connection speaks for.
	by map[string]map[*outbox.Outbox]struct{}
	of map[*outbox.Outbox][]string
}

// NewListeners returns an empty set.
func NewListeners() *Listeners {
	return &Listeners{by: map[string]map[*outbox.Outbox]struct{}{}, of: map[*outbox.Outbox][]string{}}
}

// Listen records that out speaks for parent, another node's agent.
func (l *Listeners) Listen(parent string, out *outbox.Outbox) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.by[parent]
	if set == nil {
		set = map[*outbox.Outbox]struct{}{}
		l.by[parent] = set
	}
	if _, ok := set[out]; ok {
		return
	}
	set[out] = struct{}{}
	l.of[out] = append(l.of[out], parent)
}

// Forget drops out (its connection ended).
func (l *Listeners) Forget(out *outbox.Outbox) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, parent := range l.of[out] {
		delete(l.by[parent], out)
		if len(l.by[parent]) == 0 {
			delete(l.by, parent)
		}
	}
	delete(l.of, out)
}

// deliver pushes rec to every connection speaking for parent.
func (l *Listeners) deliver(parent string, rec []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for out := range l.by[parent] {
		out.Push(rec)
	}
}

// RunParent reads a subagent_run_changed: the parent it is about. ok is
// false for any other record, or one without a parent.
func RunParent(rec []byte) (parent string, ok bool) {
	if len(rec) > protocol.DefaultMaxRecord || protocol.PeekType(rec) != protocol.TypeSubagentRunChanged {
		return "", false
	}
	var ev struct {
		Type   string `json:"type"`
		Parent string `json:"parent_agent_id"`
		RunID  string `json:"run_id"`
	}
	if err := json.Unmarshal(rec, &ev); err != nil || ev.Type != protocol.TypeSubagentRunChanged || ev.Parent == "" || ev.RunID == "" {
		return "", false
	}
	return ev.Parent, true
}
