package agentdir

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
)

// Watcher is the directory bucket as the View follows it
// (*records.Table[records.AgentEntry]).
type Watcher interface {
	Watch(ctx context.Context, prefix string) (<-chan records.Change[records.AgentEntry], error)
}

// View is this node's copy of the other nodes' agents, followed from the
// directory by a watch. Its readers (the registry's agent.list and its
// routing) take a snapshot under a read lock: they never wait on the
// cluster. Entries stay while their node is dead: the directory says
// where an agent lives, cluster.status says whether that node is up.
type View struct {
	self  string
	table Watcher
	log   *slog.Logger
	retry time.Duration

	// mu protects entries and synced.
	mu      sync.RWMutex
	entries map[string]records.AgentEntry
	synced  bool

	// applied, when set, is told after each change the copy took (tests
	// wait on it instead of polling).
	applied func()
	// notify, when set (Notify), is told each change of another node's
	// agent, on the watch's goroutine.
	notify func(Event)
}

// EventKind says how another node's agent changed in the copy.
type EventKind int

// The kinds of Event.
const (
	// Added: an agent the copy did not hold (created on its node, or
	// first seen).
	Added EventKind = iota + 1
	// Updated: its node published new fields.
	Updated
	// Removed: its node deleted its entry (the agent was removed).
	Removed
)

// Event is one change of another node's agent in the copy: the daemon
// tells its clients as it tells them of its own agents' changes.
type Event struct {
	Kind EventKind
	Info protocol.AgentInfo
}

// Notify sets f to be told each change of another node's agent (after a
// replay, what differs from the copy before it). Call it before Run; f
// must not block.
func (v *View) Notify(f func(Event)) { v.notify = f }

// emit tells notify how the entry of key went from old to cur (either
// absent: ok false).
func (v *View) emit(old records.AgentEntry, hadOld bool, cur records.AgentEntry, hasCur bool) {
	if v.notify == nil {
		return
	}
	hadOld = hadOld && old.Node != v.self && old.State == records.AgentLive
	hasCur = hasCur && cur.Node != v.self && cur.State == records.AgentLive
	switch {
	case hasCur && !hadOld:
		v.notify(Event{Kind: Added, Info: InfoOf(cur)})
	case hasCur && old != cur:
		v.notify(Event{Kind: Updated, Info: InfoOf(cur)})
	case hadOld && !hasCur:
		v.notify(Event{Kind: Removed, Info: InfoOf(old)})
	}
}

// NewView returns a View of every node's agents but self's; Run fills it.
func NewView(self string, table Watcher, log *slog.Logger) *View {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &View{self: self, table: table, log: log, retry: DefaultRetry, entries: map[string]records.AgentEntry{}}
}

// Run follows the directory until ctx ends. A watch that ends (the
// connection lost) is started again after a wait; its replay replaces the
// copy once it is synced, so an entry deleted meanwhile goes.
func (v *View) Run(ctx context.Context) {
	wait := v.retry
	for ctx.Err() == nil {
		ch, err := v.table.Watch(ctx, "")
		if err == nil {
			wait = v.retry
			v.follow(ch)
		}
		if ctx.Err() != nil {
			return
		}
		v.log.Warn("cluster: agent directory watch ended; watching again", "retry_in", wait.String(), "err", err)
		if !clock.Sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, DefaultMaxRetry)
	}
}

// follow applies one watch's changes until its channel closes.
func (v *View) follow(ch <-chan records.Change[records.AgentEntry]) {
	replay := map[string]records.AgentEntry{}
	synced := false
	for c := range ch {
		switch {
		case c.Synced:
			v.mu.Lock()
			old := v.entries
			v.entries, v.synced = replay, true
			v.mu.Unlock()
			synced = true
			for k, e := range replay {
				o, ok := old[k]
				v.emit(o, ok, e, true)
			}
			for k, o := range old {
				if _, ok := replay[k]; !ok {
					v.emit(o, true, records.AgentEntry{}, false)
				}
			}
			v.tell()
		case c.Err != nil:
			v.log.Warn("cluster: agent directory entry not understood", "key", c.Key, "err", c.Err)
		case !synced:
			if c.Deleted {
				delete(replay, c.Key)
			} else {
				replay[c.Key] = c.Value
			}
		default:
			v.mu.Lock()
			old, had := v.entries[c.Key]
			if c.Deleted {
				delete(v.entries, c.Key)
			} else {
				v.entries[c.Key] = c.Value
			}
			v.mu.Unlock()
			v.emit(old, had, c.Value, !c.Deleted)
			v.tell()
		}
	}
}

func (v *View) tell() {
	if v.applied != nil {
		v.applied()
	}
}

// Remote returns the other nodes' agents, oldest first (created_at, then
// agent_id: agent.list's order), each with its node set.
func (v *View) Remote() []protocol.AgentInfo {
	v.mu.RLock()
	out := make([]protocol.AgentInfo, 0, len(v.entries))
	for _, e := range v.entries {
		if e.Node != v.self && e.State == records.AgentLive {
			out = append(out, InfoOf(e))
		}
	}
	v.mu.RUnlock()
	slices.SortFunc(out, func(a, b protocol.AgentInfo) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.AgentID, b.AgentID))
	})
	return out
}

// Lookup returns agentID's AgentInfo (its node set) when it is another
// node's agent in the directory.
func (v *View) Lookup(agentID string) (protocol.AgentInfo, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e, ok := v.entries[agentID]
	if !ok || e.Node == v.self || e.State != records.AgentLive {
		return protocol.AgentInfo{}, false
	}
	return InfoOf(e), true
}

// Synced reports whether the copy holds the whole directory as of some
// moment (its first watch replayed it).
func (v *View) Synced() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.synced
}
