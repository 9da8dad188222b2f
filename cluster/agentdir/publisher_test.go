package agentdir

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/protocol"
)

// bound is how long a wait may take before a test fails; a passing test
// never waits it out.
const bound = 60 * time.Second

// openDirectory starts one JetStream server on loopback (random port,
// sync always, store in t.TempDir) and opens the records over it.
func openDirectory(t *testing.T) *records.Records {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		ServerName: "S-1", Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), SyncAlways: true, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(bound) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	rec, err := records.Open(ctx, js, records.Options{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// agents is a Source over a map: a registry as the publisher sees it.
// gate, when set, holds One until it is closed (a slow registry).
type agents struct {
	mu    sync.Mutex
	m     map[string]protocol.AgentInfo
	gate  chan struct{}
	asked chan string
	// fail is how many reads fail before they succeed (an unavailable
	// registry or cluster).
	fail int
}

func (a *agents) set(in protocol.AgentInfo) {
	a.mu.Lock()
	a.m[in.AgentID] = in
	a.mu.Unlock()
}

func (a *agents) All(context.Context) ([]protocol.AgentInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail > 0 {
		a.fail--
		return nil, records.ErrUnavailable
	}
	out := []protocol.AgentInfo{}
	for _, in := range a.m {
		out = append(out, in)
	}
	return out, nil
}

func (a *agents) One(ctx context.Context, id string) (protocol.AgentInfo, bool, error) {
	a.mu.Lock()
	gate, asked := a.gate, a.asked
	a.mu.Unlock()
	if asked != nil {
		asked <- id
	}
	if gate != nil {
		<-gate
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, ok := a.m[id]
	return in, ok, nil
}

// write is one entry the publisher wrote (e nil: deleted).
type write struct {
	id string
	e  *records.AgentEntry
}

func info(id, title string) protocol.AgentInfo {
	return protocol.AgentInfo{AgentID: id, Cwd: "/w/" + id, Title: title, CreatedAt: 1,
		Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeStopped}
}

// run starts p until the test ends.
func run(t *testing.T, p *Publisher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func next(t *testing.T, ch <-chan write) write {
	t.Helper()
	select {
	case w := <-ch:
		return w
	case <-time.After(bound):
		t.Fatal("no write")
		return write{}
	}
}

// TestPublisherReconcile: on start, this node's entries are made to match
// its registry — a missing one created, a changed one updated, one of an
// agent it no longer has deleted — and another node's entry is left as
// it is.
func TestPublisherReconcile(t *testing.T) {
	rec := openDirectory(t)
	ctx := context.Background()
	put := func(e records.AgentEntry) {
		if _, err := rec.Agents.Create(ctx, e.AgentID, e); err != nil {
			t.Fatal(err)
		}
	}
	put(EntryOf("n1", info("agent-gone", "")))
	put(EntryOf("n1", info("agent-changed", "old")))
	put(EntryOf("n1", info("agent-same", "same")))
	put(EntryOf("n2", info("agent-other", "theirs")))

	src := &agents{m: map[string]protocol.AgentInfo{}}
	src.set(info("agent-changed", "new"))
	src.set(info("agent-same", "same"))
	src.set(info("agent-new", "fresh"))
	writes := make(chan write, 16)
	p := NewPublisher(PublisherOptions{Node: "n1", Table: rec.Agents, Source: src,
		Written: func(id string, e *records.AgentEntry) { writes <- write{id, e} }})
	run(t, p)
	got := map[string]*records.AgentEntry{}
	for range 3 {
		w := next(t, writes)
		got[w.id] = w.e
	}
	if e, ok := got["agent-gone"]; !ok || e != nil {
		t.Errorf("agent-gone: %+v, want deleted", e)
	}
	if e := got["agent-changed"]; e == nil || e.Title != "new" || e.Node != "n1" {
		t.Errorf("agent-changed: %+v", e)
	}
	if e := got["agent-new"]; e == nil || e.Title != "fresh" {
		t.Errorf("agent-new: %+v", e)
	}
	all, err := rec.Agents.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"agent-changed": "n1/new", "agent-same": "n1/same", "agent-new": "n1/fresh", "agent-other": "n2/theirs"}
	if len(all) != len(want) {
		t.Fatalf("directory after reconcile: %+v", all)
	}
	for _, e := range all {
		if want[e.Key] != e.Value.Node+"/"+e.Value.Title {
			t.Errorf("%s: %s/%s, want %s", e.Key, e.Value.Node, e.Value.Title, want[e.Key])
		}
	}
	// A removal marked later deletes the entry.
	src.mu.Lock()
	delete(src.m, "agent-new")
	src.mu.Unlock()
	p.Changed("agent-new")
	if w := next(t, writes); w.id != "agent-new" || w.e != nil {
		t.Fatalf("after the removal: %+v", w)
	}
	if _, err := rec.Agents.Get(ctx, "agent-new"); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("agent-new after its removal: %v", err)
	}
}

// TestPublisherCoalesces: an agent marked changed a hundred times while
// the registry is slow to answer is read and written once more after the
// pass under way, not a hundred times.
func TestPublisherCoalesces(t *testing.T) {
	rec := openDirectory(t)
	src := &agents{m: map[string]protocol.AgentInfo{}}
	src.set(info("agent-a", "v1"))
	writes := make(chan write, 16)
	p := NewPublisher(PublisherOptions{Node: "n1", Table: rec.Agents, Source: src,
		Written: func(id string, e *records.AgentEntry) { writes <- write{id, e} }})
	run(t, p)
	if w := next(t, writes); w.id != "agent-a" || w.e.Title != "v1" { // the start's reconciliation
		t.Fatalf("first write: %+v", w)
	}
	gate, asked := make(chan struct{}), make(chan string, 1)
	src.mu.Lock()
	src.gate, src.asked = gate, asked
	src.mu.Unlock()
	src.set(info("agent-a", "v2"))
	p.Changed("agent-a")
	<-asked // the pass under way reads agent-a and waits
	for i := range 100 {
		src.set(info("agent-a", "v"+string(rune('3'+i%5))))
		p.Changed("agent-a")
	}
	src.set(info("agent-a", "last"))
	src.mu.Lock()
	src.gate, src.asked = nil, nil
	src.mu.Unlock()
	close(gate)
	if w := next(t, writes); w.id != "agent-a" || w.e.Title != "last" {
		t.Fatalf("the pass under way: %+v", w)
	}
	// That pass read "last"; the coalesced marks make one more pass,
	// which finds the entry as it should be and writes nothing. A write
	// of another agent after it shows every pass of agent-a is over.
	src.set(info("agent-b", "b"))
	p.Changed("agent-b")
	if w := next(t, writes); w.id != "agent-b" {
		t.Fatalf("write after the burst: %+v (agent-a written more than once)", w)
	}
}

// TestPublisherConflictRetry: another writer moves the entry between the
// publisher's read and its compare-and-set (both for a create and for an
// update); the publisher reads again and its write lands.
func TestPublisherConflictRetry(t *testing.T) {
	rec := openDirectory(t)
	ctx := context.Background()
	src := &agents{m: map[string]protocol.AgentInfo{}}
	src.set(info("agent-a", "mine"))
	writes := make(chan write, 16)
	var mu sync.Mutex
	attempts := 0
	interfere := func(string) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		switch attempts {
		case 1: // before the create: someone creates it first
			if _, err := rec.Agents.Create(ctx, "agent-a", EntryOf("n1", info("agent-a", "stale"))); err != nil {
				t.Error(err)
			}
		case 3: // before the update: someone updates it first
			e, err := rec.Agents.Get(ctx, "agent-a")
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := rec.Agents.Update(ctx, "agent-a", EntryOf("n1", info("agent-a", "stale again")), e.Revision); err != nil {
				t.Error(err)
			}
		}
	}
	p := NewPublisher(PublisherOptions{Node: "n1", Table: rec.Agents, Source: src,
		Written: func(id string, e *records.AgentEntry) { writes <- write{id, e} }, beforeWrite: interfere})
	run(t, p)
	if w := next(t, writes); w.e == nil || w.e.Title != "mine" {
		t.Fatalf("write after a create conflict: %+v", w)
	}
	src.set(info("agent-a", "renamed"))
	p.Changed("agent-a")
	if w := next(t, writes); w.e == nil || w.e.Title != "renamed" {
		t.Fatalf("write after an update conflict: %+v", w)
	}
	mu.Lock()
	n := attempts
	mu.Unlock()
	if n != 4 {
		t.Errorf("%d attempts, want 4 (two conflicts, two writes)", n)
	}
	if e, err := rec.Agents.Get(ctx, "agent-a"); err != nil || e.Value.Title != "renamed" {
		t.Fatalf("agent-a: %+v, %v", e, err)
	}
}

// TestPublisherRetriesAfterFailure: a reconciliation that fails (the
// cluster had no quorum) is logged and tried again after a wait, until it
// lands; the failures block nothing (Changed returns at once meanwhile).
func TestPublisherRetriesAfterFailure(t *testing.T) {
	rec := openDirectory(t)
	src := &agents{m: map[string]protocol.AgentInfo{}, fail: 3}
	src.set(info("agent-a", "a"))
	writes := make(chan write, 16)
	p := NewPublisher(PublisherOptions{Node: "n1", Table: rec.Agents, Source: src, Retry: time.Millisecond, MaxRetry: 4 * time.Millisecond,
		Written: func(id string, e *records.AgentEntry) { writes <- write{id, e} }})
	run(t, p)
	for range 100 {
		p.Changed("agent-a")
	}
	if w := next(t, writes); w.id != "agent-a" || w.e == nil || w.e.Title != "a" {
		t.Fatalf("write after the failures: %+v", w)
	}
	src.mu.Lock()
	left := src.fail
	src.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d failures left: the write came before the retries", left)
	}
}
