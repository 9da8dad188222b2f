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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/internal/clock"
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
	// Instance identifies the home the node runs from (instance.go): a
	// record of this name with another instance was written by another
	// process, not by this node's previous life.
	Instance string `json:"instance,omitempty"`
	// Addrs are where clients reach this node's daemon (SetAddrs), so a
	// client whose node dies can reconnect through another.
	Addrs Addrs `json:"addrs,omitzero"`
}

// Addrs are where a node's daemon takes clients: its unix socket (for
// clients on its machine) and the base URL of its web listener as
// browsers reach it. Either may be empty.
type Addrs struct {
	Socket string `json:"socket,omitempty"`
	Web    string `json:"web,omitempty"`
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
	// HealthDead: no change for longer than its lease while this
	// observer's view is current, or its incarnation was declared dead.
	// From a stale view (package doc) a silent node is at worst suspect.
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
	nc               *nats.Conn // reads from the stream leader
	hooks            Hooks
	log              *slog.Logger
	// declareFailed is Config.declareFailed (tests).
	declareFailed func(node string, incarnation uint64)
	// instance identifies this node's home (instance.go); set once in
	// Start before the goroutines start.
	instance string

	mu sync.Mutex
	// mu protects the following.
	seen  map[string]*observed  // by node name
	dead  map[string]DeadRecord // by deadKey
	fired map[string]bool       // deadKeys OnNodeDead ran for
	// incarnation is the current one: firstIncarnation, plus one each
	// time the others declared this node dead while it ran.
	incarnation uint64
	changed     chan struct{} // closed and replaced at each change

	// The echo: this node's own heartbeats coming back through its
	// watch say the watch is current (the package doc's "stale view").
	echoAt  time.Time // when the watch last brought a newer own record
	echoRev uint64    // that record's revision
	putRev  uint64    // the revision of the last acknowledged heartbeat
	// unechoedAt is when an acknowledged heartbeat newer than echoRev
	// was first known (zero when every acknowledged one came back).
	unechoedAt time.Time
	// freshAt is when this node's view last became current after being
	// stale (staleLocked). Silence is counted from then at the earliest
	// (silentLocked): while the view was stale the bucket's stream may
	// have had no leader, and then no node could heartbeat.
	freshAt time.Time
	// dupWarned: a record of this name from another instance was logged.
	dupWarned bool
	// replaying: the watch was (re)started and has not delivered all
	// its initial values yet, or it ended and is not restarted yet.
	replaying bool
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
// runs OnRejoin, writes the first heartbeat, starts heartbeating, loads
// the table and starts the watch goroutine.
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
		self: n.cfg.Node, lease: n.cfg.Lease, kv: kv, nc: n.nc, hooks: n.cfg.Hooks, log: n.log,
		declareFailed: n.cfg.declareFailed,
		seen:          map[string]*observed{}, dead: map[string]DeadRecord{}, fired: map[string]bool{}, changed: make(chan struct{}),
	}
	n.members = m
	n.startedAt = time.Now().UTC()
	m.replaying = true

	if m.instance, err = loadInstance(instanceDir(n.cfg)); err != nil {
		return err
	}
	var (
		prev Record
		rev  uint64 // prev's revision, 0 when there is none
	)
	err = retry(ctx, func(ctx context.Context) error {
		prev, rev = Record{}, 0
		e, err := kv.Get(ctx, nodeKey(n.cfg.Node))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rev = e.Revision()
		return json.Unmarshal(e.Value(), &prev)
	})
	if err != nil {
		return fmt.Errorf("%w: read this node's record: %w", ErrNotReady, err)
	}
	if err := m.checkName(ctx, prev, rev); err != nil {
		if errors.Is(err, ErrDuplicateNode) {
			return err
		}
		return fmt.Errorf("%w: check this node's name: %w", ErrNotReady, err)
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
	// The first heartbeat takes the name: a compare-and-set on the
	// revision checkName judged, so of two processes starting under one
	// name at once, one writes and the other finds the name taken.
	var taken error
	err = retry(ctx, func(ctx context.Context) error {
		taken = nil
		err := n.claimName(ctx, rev)
		if errors.Is(err, ErrDuplicateNode) {
			taken = err
			return nil
		}
		return err
	})
	if taken != nil {
		return taken
	}
	if err != nil {
		return fmt.Errorf("%w: first heartbeat: %w", ErrNotReady, err)
	}

	// The heartbeats and the watch live as long as the node, not as long
	// as Start. The heartbeats start at once: creating and loading the
	// watch can take longer than a lease while the cluster forms, and a
	// node silent that long would be declared dead.
	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.heartbeatLoop(runCtx)
	}()
	// While the cluster forms, creating the watch's consumer can time
	// out like any other request: it is retried.
	var w *watch
	err = retry(ctx, func(actx context.Context) error {
		dl, _ := actx.Deadline()
		var err error
		w, err = m.openWatch(runCtx, time.Until(dl))
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: watch %s: %w", ErrNotReady, NodesBucket, err)
	}
	// The initial values end with a nil entry: after it, Members shows
	// every node that was there when this one started.
	for loaded := false; !loaded; {
		select {
		case e := <-w.w.Updates():
			if e == nil {
				loaded = true
				m.loaded(time.Now())
				break
			}
			m.apply(e, time.Now())
		case <-ctx.Done():
			w.stop()
			return fmt.Errorf("%w: load %s: %w", ErrNotReady, NodesBucket, context.Cause(ctx))
		}
	}

	n.wg.Add(1)
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
		if !clock.Sleep(ctx, backoff) {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// record is this node's record as of now.
func (n *Node) record() ([]byte, error) {
	rec := Record{
		Node: n.cfg.Node, Incarnation: n.members.current(), StartedAt: n.startedAt,
		HeartbeatAt: time.Now().UTC(), LeaseMS: n.cfg.Lease.Milliseconds(),
		Capacity: n.cfg.Capacity, Version: n.cfg.Version, Instance: n.members.instance,
		Addrs: n.addrs(),
	}
	if n.cfg.Hooks.Load != nil {
		rec.Load = n.cfg.Hooks.Load()
	}
	return json.Marshal(rec)
}

// heartbeat writes this node's record once.
func (n *Node) heartbeat(ctx context.Context) error {
	b, err := n.record()
	if err != nil {
		return err
	}
	rev, err := n.members.kv.Put(ctx, nodeKey(n.cfg.Node), b)
	if err == nil {
		n.members.acked(rev, time.Now())
	}
	return err
}

// claimName writes this node's first heartbeat as a compare-and-set on
// rev, the revision of the record checkName judged (0: none). When the
// record changed meanwhile, it is read again: this node's own (an
// attempt whose acknowledgement was lost) is success, another's is
// ErrDuplicateNode.
func (n *Node) claimName(ctx context.Context, rev uint64) error {
	b, err := n.record()
	if err != nil {
		return err
	}
	key := nodeKey(n.cfg.Node)
	var got uint64
	if rev == 0 {
		got, err = n.members.kv.Create(ctx, key, b)
	} else {
		got, err = n.members.kv.Update(ctx, key, b, rev)
	}
	if err == nil {
		n.members.acked(got, time.Now())
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return err
	}
	e, err := n.members.kv.Get(ctx, key)
	if err != nil {
		return err
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return err
	}
	if rec.Instance == n.members.instance && rec.Incarnation == n.members.current() {
		n.members.acked(e.Revision(), time.Now())
		return nil
	}
	return duplicateError(n.cfg.Node, rec, "another process took it while this one started")
}

// heartbeatLoop heartbeats every lease/3, and at once when kicked (new
// addresses), until ctx ends; a heartbeat that fails is logged and the
// next one tries again.
func (n *Node) heartbeatLoop(ctx context.Context) {
	every := n.cfg.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
		hctx, cancel := context.WithTimeout(ctx, every)
		err := n.heartbeat(hctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			n.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// apply takes one update of the bucket into the table.
func (m *membership) apply(e jetstream.KeyValueEntry, now time.Time) {
	key := e.Key()
	switch {
	case strings.HasPrefix(key, "node."):
		m.applyNode(key, e.Operation() == jetstream.KeyValuePut, e.Value(), e.Revision(), now)
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

// applyNode takes a node record (put, or deleted) at revision rev into
// the table. Only a newer revision changes an observed record: a direct
// read may have brought one the watch has yet to deliver.
func (m *membership) applyNode(key string, put bool, value []byte, rev uint64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.notifyLocked()
	node := strings.TrimPrefix(key, "node.")
	if !put {
		delete(m.seen, node)
		return
	}
	var rec Record
	if err := json.Unmarshal(value, &rec); err != nil || rec.Node != node {
		m.log.Warn("membership: bad node record", "key", key, "err", err)
		return
	}
	if node == m.self {
		m.echoLocked(rev, now)
		if rec.Instance != "" && rec.Instance != m.instance && !m.dupWarned {
			// Start refuses a live duplicate; this is one that slipped
			// past (it found this node silent, e.g. cut off) or runs an
			// older build.
			m.dupWarned = true
			m.log.Error("membership: another process writes this node's record: two shardd run one cluster.node; stop one of them",
				"incarnation", rec.Incarnation)
		}
	}
	o := m.seen[node]
	if o == nil {
		// First sight: trust the record's clock only to make it older.
		since := now
		if rec.HeartbeatAt.Before(now) {
			since = rec.HeartbeatAt
		}
		m.seen[node] = &observed{rec: rec, rev: rev, since: since}
		return
	}
	if rev > o.rev {
		o.rec, o.rev, o.since = rec, rev, now
	}
}

// notifyLocked wakes whoever waits on a change. mu must be held.
func (m *membership) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// sweep declares dead every other node silent past its lease whose
// incarnation no one declared yet — when this node's view is current
// (staleLocked) and a read from the bucket's stream leader confirms the
// silence; otherwise the declaration is withheld until a later sweep.
// Without a quorum (this node on the minority side of a partition) its
// heartbeats do not come back, so it withholds too, and even a create
// would fail.
func (m *membership) sweep(ctx context.Context, now time.Time) {
	m.mu.Lock()
	stale := m.staleLocked(now)
	var due []observed
	for node, o := range m.seen {
		if node == m.self {
			continue
		}
		if _, declared := m.dead[deadKey(node, o.rec.Incarnation)]; declared {
			continue
		}
		if m.silentLocked(o, now) {
			due = append(due, *o)
		}
	}
	m.notifyLocked() // health moves with time
	m.mu.Unlock()

	for _, o := range due {
		rec := o.rec
		if stale {
			m.withhold(ctx, rec, "this node's view of the bucket is stale", nil)
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, m.lease/3)
		silent, err := m.confirmSilent(dctx, rec.Node, o.rev)
		if err != nil || !silent {
			cancel()
			m.withhold(ctx, rec, "the stream leader has a newer record, or cannot be read", err)
			continue
		}
		by, err := m.declare(dctx, rec.Node, rec.Incarnation)
		cancel()
		if err != nil {
			m.withhold(ctx, rec, "could not declare a silent node dead (no quorum?)", err)
			continue
		}
		m.fire(by)
	}
}

// withhold notes a declaration not made this sweep.
func (m *membership) withhold(ctx context.Context, rec Record, why string, err error) {
	if m.declareFailed != nil {
		m.declareFailed(rec.Node, rec.Incarnation)
	}
	if ctx.Err() == nil {
		m.log.Warn("membership: not declaring a silent node dead: "+why, "dead_node", rec.Node, "incarnation", rec.Incarnation, "err", err)
	}
}

// confirmSilent reads node's record from the bucket's stream leader
// (a direct get may be answered by a lagging replica) and says whether
// it is still the revision rev the watch last brought. A newer one is
// taken into the table, as seen now.
func (m *membership) confirmSilent(ctx context.Context, node string, rev uint64) (bool, error) {
	key := nodeKey(node)
	req, err := json.Marshal(msgGetRequest{LastBySubject: "$KV." + NodesBucket + "." + key})
	if err != nil {
		return false, err
	}
	resp, err := m.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+NodesBucket, req)
	if err != nil {
		return false, err
	}
	msg, err := decodeMsgGet(resp.Data)
	if err != nil {
		return false, err
	}
	if msg.Seq == rev {
		return true, nil
	}
	m.applyNode(key, true, msg.Data, msg.Seq, time.Now())
	return false, nil
}

// msgGetRequest is JetStream's STREAM.MSG.GET request for the last
// message of a subject.
type msgGetRequest struct {
	LastBySubject string `json:"last_by_subj"`
}

// storedMsg is the message of JetStream's STREAM.MSG.GET response.
type storedMsg struct {
	Subject string `json:"subject"`
	Seq     uint64 `json:"seq"`
	Data    []byte `json:"data,omitempty"`
}

// decodeMsgGet decodes JetStream's STREAM.MSG.GET response: the message,
// or the API error it carries.
func decodeMsgGet(b []byte) (storedMsg, error) {
	var resp struct {
		Message *storedMsg `json:"message"`
		Error   *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return storedMsg{}, fmt.Errorf("stream message get: %w", err)
	}
	switch {
	case resp.Error != nil:
		return storedMsg{}, fmt.Errorf("stream message get: %d (%d) %s", resp.Error.Code, resp.Error.ErrCode, resp.Error.Description)
	case resp.Message == nil || resp.Message.Seq == 0:
		return storedMsg{}, errors.New("stream message get: no message in the response")
	}
	return *resp.Message, nil
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
	stale := m.staleLocked(now)
	out := make([]Member, 0, len(m.seen))
	for _, o := range m.seen {
		mb := Member{Record: o.rec, Silence: now.Sub(o.since)}
		d, declared := m.dead[deadKey(o.rec.Node, o.rec.Incarnation)]
		switch {
		case declared:
			mb.Health, mb.DeclaredBy = HealthDead, d.By
		case m.silentLocked(o, now) && !stale:
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
