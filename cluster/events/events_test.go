package events

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// bound is how long a wait may take before a test fails; a passing test
// never waits it out.
const bound = 60 * time.Second

// serve starts one NATS server on loopback (random port).
func serve(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(bound) {
		t.Fatal("server not ready")
	}
	return s
}

// node is one daemon as the Relay sees it: a hub with a client in it.
type node struct {
	hub       *outbox.Hub
	client    *outbox.Outbox
	nc        *nats.Conn
	listeners *Listeners
	relay     *Relay
}

// startNode connects a node named name to s and starts its Relay.
func startNode(t *testing.T, s *server.Server, name string) *node {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	n := &node{hub: outbox.NewHub(), client: outbox.New(outbox.Limits{}), nc: nc, listeners: NewListeners()}
	n.hub.Add(n.client)
	ctx, cancel := context.WithCancel(context.Background())
	r := NewRelay(Options{Node: name, Hub: n.hub, Listeners: n.listeners})
	n.relay = r
	if err := r.Start(ctx, nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-r.Done()
	})
	return n
}

// next reads the client's next records, failing past the bound.
func (n *node) next(t *testing.T) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	recs, ok := n.client.Next(ctx)
	if !ok {
		t.Fatal("no event within the bound")
	}
	return recs
}

// read reads the client's records until it has want of them.
func (n *node) read(t *testing.T, want int) []string {
	t.Helper()
	var got []string
	for len(got) < want {
		for _, rec := range n.next(t) {
			got = append(got, string(rec))
		}
	}
	return got
}

func created(id, node string) []byte {
	return protocol.MustMarshal(protocol.WorkspaceCreated{
		Header:    protocol.Header{Type: protocol.TypeWorkspaceCreated},
		Workspace: protocol.WorkspaceInfo{WorkspaceID: id, Node: node},
	})
}

// TestRelayCarriesEachEventOnce: a workspace event broadcast on node a
// reaches b's client once and a's own client once (its own publication
// coming back is dropped); b's delivery is not published again; what is
// not a workspace event, or names no node of its own, stays on its node.
func TestRelayCarriesEachEventOnce(t *testing.T) {
	s := serve(t)
	a, b := startNode(t, s, "a"), startNode(t, s, "b")

	// Not travelling: an agent event, and a workspace event with no
	// node (a single shardd's shape).
	a.hub.Broadcast(protocol.MustMarshal(protocol.AgentActivity{Header: protocol.Header{Type: protocol.TypeAgentActivity, AgentID: "agent-1"}}))
	a.hub.Broadcast(created("ws-local", ""))
	a.hub.Broadcast(created("ws-1", "a"))
	if got := a.read(t, 3); !strings.Contains(got[2], "ws-1") {
		t.Fatalf("a's client: %v", got)
	}
	// b gets ws-1 alone; then b's own event, after it.
	if got := b.read(t, 1); len(got) != 1 || !strings.Contains(got[0], `"ws-1"`) || !strings.Contains(got[0], `"node":"a"`) {
		t.Fatalf("b's client: %v", got)
	}
	b.hub.Broadcast(created("ws-2", "b"))
	if got := b.read(t, 1); len(got) != 1 || !strings.Contains(got[0], `"ws-2"`) {
		t.Fatalf("b's client after its own event: %v", got)
	}
	// a gets ws-2 next: its own ws-1 came back to it before ws-2 (the
	// server keeps a's order, and published ws-1 before b saw it) and was
	// dropped.
	if got := a.read(t, 1); len(got) != 1 || !strings.Contains(got[0], `"ws-2"`) {
		t.Fatalf("a's client after b's event: %v", got)
	}
	// b did not publish a's ws-1 again: a third event of a's comes next
	// on b, nothing in between.
	a.hub.Broadcast(created("ws-3", "a"))
	if got := b.read(t, 1); len(got) != 1 || !strings.Contains(got[0], `"ws-3"`) {
		t.Fatalf("b's client after a's third event: %v", got)
	}
	if got := a.read(t, 1); len(got) != 1 || !strings.Contains(got[0], `"ws-3"`) {
		t.Fatalf("a's client after its third event: %v", got)
	}
}

// TestRelayDropsForgedEvents: a record on a node's subject that is not a
// workspace event of that node is not delivered.
func TestRelayDropsForgedEvents(t *testing.T) {
	s := serve(t)
	b := startNode(t, s, "b")
	for _, rec := range [][]byte{
		[]byte(`not json`),
		created("ws-x", "c"), // names another node than its subject's
		protocol.MustMarshal(protocol.AgentSpawned{Header: protocol.Header{Type: protocol.TypeAgentSpawned, AgentID: "agent-1"}}),
		[]byte(`{"type":"workspace_created"}`),
	} {
		if err := b.nc.Publish(Subject("a"), rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.nc.Publish(Subject("a"), created("ws-ok", "a")); err != nil {
		t.Fatal(err)
	}
	if got := b.read(t, 1); len(got) != 1 || !strings.Contains(got[0], `"ws-ok"`) {
		t.Fatalf("b's client: %v", got)
	}
}

func runChanged(parent, run string, state protocol.RunState) []byte {
	return protocol.MustMarshal(protocol.SubagentRunChanged{
		Header:        protocol.Header{Type: protocol.TypeSubagentRunChanged},
		ParentAgentID: parent, JobID: "job-1", RunID: run, State: state,
	})
}

// TestRelayRunChangesGoToListeners: a run change a's jobs publish reaches
// b's connections that speak for its parent, once each, and no other
// connection of either node (a's jobs send it to a's own connections
// themselves); a connection forgotten gets no more.
func TestRelayRunChangesGoToListeners(t *testing.T) {
	s := serve(t)
	a, b := startNode(t, s, "a"), startNode(t, s, "b")
	speaker, other := outbox.New(outbox.Limits{}), outbox.New(outbox.Limits{})
	b.listeners.Listen("agent-p", speaker)
	b.listeners.Listen("agent-p", speaker) // twice: still once
	b.listeners.Listen("agent-q", other)
	read := func(o *outbox.Outbox) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		recs, ok := o.Next(ctx)
		if !ok {
			t.Fatal("no run change within the bound")
		}
		var got []string
		for _, rec := range recs {
			got = append(got, string(rec))
		}
		return got
	}
	a.relay.PublishRun(runChanged("agent-p", "run-1", protocol.RunActive))
	a.relay.PublishRun(runChanged("agent-q", "run-2", protocol.RunActive))
	if got := read(speaker); len(got) != 1 || !strings.Contains(got[0], `"run-1"`) {
		t.Fatalf("p's speaker: %v", got)
	}
	if got := read(other); len(got) != 1 || !strings.Contains(got[0], `"run-2"`) {
		t.Fatalf("q's speaker: %v", got)
	}
	// Forgotten: the next goes to nobody; a workspace event after it
	// shows it came and went (NATS keeps a's order).
	b.listeners.Forget(speaker)
	a.relay.PublishRun(runChanged("agent-p", "run-1", protocol.RunCompleted))
	a.relay.PublishRun(runChanged("agent-q", "run-2", protocol.RunCompleted))
	if got := read(other); len(got) != 1 || !strings.Contains(got[0], `"completed"`) {
		t.Fatalf("q's speaker: %v", got)
	}
	a.hub.Broadcast(created("ws-1", "a"))
	if got := b.read(t, 1); !strings.Contains(got[0], `"ws-1"`) {
		t.Fatalf("b's hub client got %v before a's workspace event (run changes are not broadcast)", got)
	}
	if got := a.read(t, 1); !strings.Contains(got[0], `"ws-1"`) {
		t.Fatalf("a's hub client: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if recs, _ := speaker.Next(ctx); len(recs) != 0 {
		t.Fatalf("a forgotten speaker got %q", recs)
	}
}

func TestRunParent(t *testing.T) {
	if p, ok := RunParent(runChanged("agent-p", "run-1", protocol.RunActive)); !ok || p != "agent-p" {
		t.Fatalf("RunParent = %q %v", p, ok)
	}
	for _, rec := range []string{`{"type":"subagent_run_changed","run_id":"r"}`, `{"type":"workspace_created","parent_agent_id":"p","run_id":"r"}`, `[`} {
		if p, ok := RunParent([]byte(rec)); ok {
			t.Fatalf("RunParent(%s) = %q", rec, p)
		}
	}
}

func FuzzRunParent(f *testing.F) {
	f.Add([]byte(`{"type":"subagent_run_changed","parent_agent_id":"agent-p","run_id":"run-1","job_id":"j","state":"active"}`))
	f.Add([]byte(`{"type":"subagent_run_changed","type":"x","parent_agent_id":"p","run_id":"r"}`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		if p, ok := RunParent(rec); ok && p == "" || !ok && p != "" {
			t.Fatalf("RunParent = %q %v", p, ok)
		}
	})
}

func TestOrigin(t *testing.T) {
	for _, c := range []struct {
		rec     string
		typ, nd string
		ok      bool
	}{
		{`{"type":"workspace_retired","workspace":{"workspace_id":"ws-1","node":"n1"}}`, protocol.TypeWorkspaceRetired, "n1", true},
		{`{"type":"workspace_attached","agent_id":"agent-1","workspace":{"workspace_id":"ws-1"}}`, protocol.TypeWorkspaceAttached, "", true},
		{`{"type":"workspace_conflict","workspace":{"node":"n1"}}`, "", "", false},
		{`{"type":"agent_spawned","workspace":{"workspace_id":"ws-1","node":"n1"}}`, "", "", false},
		{`{"type":"workspace_created","workspace":[]}`, "", "", false},
	} {
		typ, nd, ok := Origin([]byte(c.rec))
		if typ != c.typ || nd != c.nd || ok != c.ok {
			t.Errorf("Origin(%s) = %q %q %v, want %q %q %v", c.rec, typ, nd, ok, c.typ, c.nd, c.ok)
		}
	}
}

func FuzzOrigin(f *testing.F) {
	f.Add([]byte(`{"type":"workspace_created","workspace":{"workspace_id":"ws-1","node":"n1"}}`))
	f.Add([]byte(`{"type":"workspace_created","type":"agent_spawned","workspace":{"workspace_id":"ws-1"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		typ, _, ok := Origin(rec)
		if ok && !Travels(typ) {
			t.Fatalf("Origin accepted a %q", typ)
		}
		if !ok && typ != "" {
			t.Fatalf("Origin refused but named %q", typ)
		}
	})
}
