package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NodesBucket is the replicated KV bucket of membership: node.<name>
// holds a node's Record, dead.<name>.<incarnation> a DeadRecord.
const NodesBucket = "shard_nodes"

// Load is what a node is busy with, reported by Hooks.Load at each
// heartbeat so that placement can prefer idle nodes.
type Load struct {
	// Agents is every agent the node hosts, live or at rest.
	Agents int `json:"agents,omitempty"`
	// ActiveAgents is the agents whose runtime process is up.
	ActiveAgents int `json:"active_agents"`
	// ActiveRuns is the subagent runs starting or active (what
	// Capacity.MaxActiveRuns caps).
	ActiveRuns int `json:"active_runs"`
}

// Capacity is what a node can host (its jobs.max_active and the like).
type Capacity struct {
	MaxActiveRuns int `json:"max_active_runs,omitempty"`
	MaxAgents     int `json:"max_agents,omitempty"`
}

// Record is one node's entry in the membership bucket, rewritten at
// every heartbeat.
type Record struct {
	Node        string    `json:"node"`
	Incarnation uint64    `json:"incarnation"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// LeaseMS is how long this heartbeat is valid, in milliseconds: each
	// node's own lease, so the others judge it by its own setting.
	LeaseMS  int64    `json:"lease_ms"`
	Load     Load     `json:"load"`
	Capacity Capacity `json:"capacity"`
	Version  string   `json:"version,omitempty"`
}

// Lease is r's lease as a duration.
func (r Record) Lease() time.Duration { return time.Duration(r.LeaseMS) * time.Millisecond }

// DeadRecord is the value of dead.<node>.<incarnation>: who declared it.
// A node declares its own previous incarnation when it starts again
// before any survivor did.
type DeadRecord struct {
	Node        string `json:"node"`
	Incarnation uint64 `json:"incarnation"`
	By          string `json:"by"`
	// ByIncarnation is the declarer's incarnation: only that run of the
	// declarer runs OnNodeDead for it.
	ByIncarnation uint64    `json:"by_incarnation"`
	At            time.Time `json:"at"`
}

// Health is a member's state as one observer sees it.
type Health string

// The health of a member.
const (
	// HealthAlive: its record changed within half its lease.
	HealthAlive Health = "alive"
	// HealthSuspect: no change for more than half its lease; it may be
	// slow or gone.
	HealthSuspect Health = "suspect"
	// HealthDead: no change for longer than its lease, or its
	// incarnation was declared dead.
	HealthDead Health = "dead"
)

// Member is one node as this node sees it.
type Member struct {
	Record
	Health Health
	// Silence is how long this observer has not seen the record change.
	Silence time.Duration
	// DeclaredBy is the node that declared this incarnation dead ("" if
	// none yet).
	DeclaredBy string
}

// Rejoin tells Hooks.OnRejoin about this node's previous incarnation.
type Rejoin struct {
	Previous    uint64 // the previous incarnation
	Incarnation uint64 // this one
	// DeclaredBy is who declared Previous dead: another node, or this
	// node itself when it came back before any survivor declared it.
	DeclaredBy string
}

// membership keeps the membership table of one node: it heartbeats and
// watches the bucket, and declares dead the nodes that stop.
type membership struct {
	self string
	// firstIncarnation is the incarnation this process started as, set
	// once in Start before the goroutines start.
	firstIncarnation uint64
	lease            time.Duration
	kv               jetstream.KeyValue
	hooks            Hooks
	log              *slog.Logger
	// declareFailed is Config.declareFailed (tests).
	declareFailed func(node string, incarnation uint64)

	mu sync.Mutex
	// mu protects the following.
	seen  map[string]*observed  // by node name
	dead  map[string]DeadRecord // by deadKey
	fired map[string]bool       // deadKeys OnNodeDead ran for
	// incarnation is the current one: firstIncarnation, plus one each
	// time the others declared this node dead while it ran.
	incarnation uint64
	changed     chan struct{} // closed and replaced at each change
}

// observed is one record and when this observer last saw it change:
// health is judged on the observer's clock (a node's own heartbeat_at
// only bounds the first sight), so clocks need not agree.
type observed struct {
	rec   Record
	rev   uint64
	since time.Time
}

func nodeKey(node string) string { return "node." + node }

func deadKey(node string, inc uint64) string {
	return "dead." + node + "." + strconv.FormatUint(inc, 10)
}

// bucketReplicas is how many copies the membership bucket gets: the
// configured replicas, fewer when the configured routes name fewer
// servers (a bucket cannot have more replicas than servers).
func bucketReplicas(cfg Config, self *net.TCPAddr) int {
	if cfg.URL != "" {
		return cfg.Replicas
	}
	others := map[string]bool{}
	for _, r := range cfg.Routes {
		u, err := url.Parse(r)
		if err != nil {
			continue
		}
		if self != nil && isLoopback(u.Hostname()) && u.Port() == strconv.Itoa(self.Port) {
			continue
		}
		if u.Host == cfg.Listen {
			continue
		}
		others[strings.ToLower(u.Host)] = true
	}
	return min(cfg.Replicas, len(others)+1)
}

// startMembership opens the bucket, takes this node's next incarnation,
// runs OnRejoin, writes the first heartbeat, loads the table and starts
// the heartbeat and watch goroutines.
func (n *Node) startMembership(ctx context.Context) error {
	kv, err := openBucket(ctx, n.js, jetstream.KeyValueConfig{
		Bucket:      NodesBucket,
		Description: "shard cluster membership: node records and dead declarations",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    bucketReplicas(n.cfg, n.RouteAddr()),
	})
	if err != nil {
		return err
	}
	m := &membership{
		self: n.cfg.Node, lease: n.cfg.Lease, kv: kv, hooks: n.cfg.Hooks, log: n.log,
		declareFailed: n.cfg.declareFailed,
		seen:          map[string]*observed{}, dead: map[string]DeadRecord{}, fired: map[string]bool{}, changed: make(chan struct{}),
	}
	n.members = m
	n.startedAt = time.Now().UTC()

	var prev Record
	err = retry(ctx, func(ctx context.Context) error {
		e, err := kv.Get(ctx, nodeKey(n.cfg.Node))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(e.Value(), &prev)
	})
	if err != nil {
		return fmt.Errorf("%w: read this node's record: %w", ErrNotReady, err)
	}
	n.incarnation = prev.Incarnation + 1
	m.incarnation, m.firstIncarnation = n.incarnation, n.incarnation
	if prev.Incarnation > 0 {
		var d DeadRecord
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			d, err = m.declare(ctx, n.cfg.Node, prev.Incarnation)
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: settle incarnation %d: %w", ErrNotReady, prev.Incarnation, err)
		}
		if n.cfg.Hooks.OnRejoin != nil {
			n.cfg.Hooks.OnRejoin(Rejoin{Previous: prev.Incarnation, Incarnation: n.incarnation, DeclaredBy: d.By})
		}
	}
	if err := retry(ctx, func(ctx context.Context) error { return n.heartbeat(ctx) }); err != nil {
		return fmt.Errorf("%w: first heartbeat: %w", ErrNotReady, err)
	}

	// The watch lives as long as the node, not as long as Start.
	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	w, err := kv.WatchAll(runCtx)
	if err != nil {
		return fmt.Errorf("%w: watch %s: %w", ErrNotReady, NodesBucket, err)
	}
	// The initial values end with a nil entry: after it, Members shows
	// every node that was there when this one started.
	for loaded := false; !loaded; {
		select {
		case e := <-w.Updates():
			if e == nil {
				loaded = true
				break
			}
			m.apply(e, time.Now())
		case <-ctx.Done():
			_ = w.Stop()
			return fmt.Errorf("%w: load %s: %w", ErrNotReady, NodesBucket, context.Cause(ctx))
		}
	}

	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		n.heartbeatLoop(runCtx)
	}()
	go func() {
		defer n.wg.Done()
		m.watchLoop(runCtx, w)
	}()
	return nil
}

// openBucket opens the bucket, creating it if no node did yet. While the
// servers of a forming cluster join, a replicated create can fail for
// want of peers: it is retried until ctx ends.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		kv, err = js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, cfg)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s (R%d): %w", ErrNotReady, cfg.Bucket, cfg.Replicas, err)
	}
	return kv, nil
}

// retry runs op until it succeeds or ctx ends, each attempt bounded to a
// few seconds: JetStream answers "no responders" or times out while a
// stream's leader is being elected. It returns op's last error.
func retry(ctx context.Context, op func(context.Context) error) error {
	const attempt = 5 * time.Second
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := op(actx)
		cancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// heartbeat writes this node's record once.
func (n *Node) heartbeat(ctx context.Context) error {
	rec := Record{
		Node: n.cfg.Node, Incarnation: n.members.current(), StartedAt: n.startedAt,
		HeartbeatAt: time.Now().UTC(), LeaseMS: n.cfg.Lease.Milliseconds(),
		Capacity: n.cfg.Capacity, Version: n.cfg.Version,
	}
	if n.cfg.Hooks.Load != nil {
		rec.Load = n.cfg.Hooks.Load()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = n.members.kv.Put(ctx, nodeKey(n.cfg.Node), b)
	return err
}

// heartbeatLoop heartbeats every lease/3 until ctx ends; a heartbeat
// that fails is logged and the next one tries again.
func (n *Node) heartbeatLoop(ctx context.Context) {
	every := n.cfg.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, every)
		err := n.heartbeat(hctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			n.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// watchLoop follows the bucket and, every lease/3, declares dead the
// nodes silent past their lease.
func (m *membership) watchLoop(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	t := time.NewTicker(m.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				m.apply(e, time.Now())
			}
		case now := <-t.C:
			m.sweep(ctx, now)
		}
	}
}

// apply takes one update of the bucket into the table.
func (m *membership) apply(e jetstream.KeyValueEntry, now time.Time) {
	key := e.Key()
	switch {
	case strings.HasPrefix(key, "node."):
		m.applyNode(e, key, now)
	case strings.HasPrefix(key, "dead."):
		var d DeadRecord
		if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &d) != nil {
			return
		}
		m.mu.Lock()
		m.dead[deadKey(d.Node, d.Incarnation)] = d
		m.notifyLocked()
		m.mu.Unlock()
		// A create that timed out here but was applied shows up now.
		m.fire(d)
		m.fence(d)
	}
}

// fence handles this node's current incarnation declared dead while it
// runs (it was slow or cut off past its lease): the others now treat
// its work as interrupted, so it must not carry on as if nothing
// happened. It moves to the next incarnation, which heartbeats from now
// on, and runs OnRejoin, the same reconcile as after a restart.
func (m *membership) fence(d DeadRecord) {
	m.mu.Lock()
	if d.Node != m.self || d.Incarnation != m.incarnation {
		m.mu.Unlock()
		return
	}
	m.incarnation++
	r := Rejoin{Previous: d.Incarnation, Incarnation: m.incarnation, DeclaredBy: d.By}
	m.notifyLocked()
	m.mu.Unlock()
	m.log.Warn("membership: this node was declared dead while running; rejoining as a new incarnation", "incarnation", r.Incarnation, "declared_by", d.By)
	if m.hooks.OnRejoin != nil {
		m.hooks.OnRejoin(r)
	}
}

// current is this node's incarnation now.
func (m *membership) current() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.incarnation
}

// applyNode takes a node record into the table.
func (m *membership) applyNode(e jetstream.KeyValueEntry, key string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.notifyLocked()
	node := strings.TrimPrefix(key, "node.")
	if e.Operation() != jetstream.KeyValuePut {
		delete(m.seen, node)
		return
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Node != node {
		m.log.Warn("membership: bad node record", "key", key, "err", err)
		return
	}
	o := m.seen[node]
	if o == nil {
		// First sight: trust the record's clock only to make it older.
		since := now
		if rec.HeartbeatAt.Before(now) {
			since = rec.HeartbeatAt
		}
		m.seen[node] = &observed{rec: rec, rev: e.Revision(), since: since}
		return
	}
	if e.Revision() != o.rev {
		o.rec, o.rev, o.since = rec, e.Revision(), now
	}
}

// notifyLocked wakes whoever waits on a change. mu must be held.
func (m *membership) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// sweep declares dead every other node silent past its lease whose
// incarnation no one declared yet. Without a quorum (this node on the
// minority side of a partition) the create fails and nothing fires.
func (m *membership) sweep(ctx context.Context, now time.Time) {
	m.mu.Lock()
	var due []Record
	for node, o := range m.seen {
		if node == m.self {
			continue
		}
		if _, declared := m.dead[deadKey(node, o.rec.Incarnation)]; declared {
			continue
		}
		if now.Sub(o.since) > o.rec.Lease() {
			due = append(due, o.rec)
		}
	}
	m.notifyLocked() // health moves with time
	m.mu.Unlock()

	for _, rec := range due {
		dctx, cancel := context.WithTimeout(ctx, m.lease/3)
		by, err := m.declare(dctx, rec.Node, rec.Incarnation)
		cancel()
		switch {
		case err != nil:
			if m.declareFailed != nil {
				m.declareFailed(rec.Node, rec.Incarnation)
			}
			if ctx.Err() == nil {
				m.log.Warn("membership: could not declare a silent node dead (no quorum?)", "dead_node", rec.Node, "incarnation", rec.Incarnation, "err", err)
			}
		default:
			m.fire(by)
		}
	}
}

// fire runs OnNodeDead when this run of this node declared d, once: a
// declaration comes back through the watch after the create returned,
// and a create that timed out but was applied is only seen there.
// A node's claim of its own previous incarnation fires nothing: it
// reconciles through OnRejoin.
func (m *membership) fire(d DeadRecord) {
	if d.By != m.self || d.ByIncarnation < m.firstIncarnation || d.Node == m.self {
		return
	}
	m.mu.Lock()
	k := deadKey(d.Node, d.Incarnation)
	done := m.fired[k]
	m.fired[k] = true
	m.mu.Unlock()
	if done {
		return
	}
	m.log.Info("membership: declared node dead", "dead_node", d.Node, "incarnation", d.Incarnation)
	if m.hooks.OnNodeDead != nil {
		m.hooks.OnNodeDead(d.Node, d.Incarnation)
	}
}

// declare creates dead.<node>.<inc> in this node's name, or finds who
// created it first; it returns the declarer. The create is the
// compare-and-set: it succeeds for one node only.
func (m *membership) declare(ctx context.Context, node string, inc uint64) (DeadRecord, error) {
	d := DeadRecord{Node: node, Incarnation: inc, By: m.self, ByIncarnation: m.current(), At: time.Now().UTC()}
	b, err := json.Marshal(d)
	if err != nil {
		return DeadRecord{}, err
	}
	_, err = m.kv.Create(ctx, deadKey(node, inc), b)
	if err == nil {
		m.mu.Lock()
		m.dead[deadKey(node, inc)] = d
		m.notifyLocked()
		m.mu.Unlock()
		return d, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return DeadRecord{}, err
	}
	e, err := m.kv.Get(ctx, deadKey(node, inc))
	if err != nil {
		return DeadRecord{}, err
	}
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return DeadRecord{}, err
	}
	return d, nil
}

// Members lists the cluster's nodes as this node sees them, by name.
func (n *Node) Members() []Member {
	return n.members.list(time.Now())
}

func (m *membership) list(now time.Time) []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.seen))
	for _, o := range m.seen {
		mb := Member{Record: o.rec, Silence: now.Sub(o.since)}
		d, declared := m.dead[deadKey(o.rec.Node, o.rec.Incarnation)]
		switch {
		case declared:
			mb.Health, mb.DeclaredBy = HealthDead, d.By
		case mb.Silence > o.rec.Lease():
			mb.Health = HealthDead
		case mb.Silence > o.rec.Lease()/2:
			mb.Health = HealthSuspect
		default:
			mb.Health = HealthAlive
		}
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// changes is closed at the next change of the table (or tick of time):
// tests wait on it instead of sleeping.
func (m *membership) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}
