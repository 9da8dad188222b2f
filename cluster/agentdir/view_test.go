package agentdir

import (
	"context"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestViewFollowsOtherNodes: the view lists the other nodes' entries,
// oldest first, with their node, and never this node's own; an update
// and a delete written after it synced reach it.
func TestViewFollowsOtherNodes(t *testing.T) {
	rec := openDirectory(t)
	ctx := context.Background()
	mk := func(node, id string, at int64) {
		in := info(id, "")
		in.CreatedAt = at
		if _, err := rec.Agents.Create(ctx, id, EntryOf(node, in)); err != nil {
			t.Fatal(err)
		}
	}
	mk("n2", "agent-b", 2)
	mk("n1", "agent-mine", 1)
	mk("n3", "agent-a", 2)
	v := NewView("n1", rec.Agents, nil)
	events := make(chan Event, 16)
	v.Notify(func(ev Event) { events <- ev })
	applied := make(chan struct{}, 1)
	v.applied = func() {
		select {
		case applied <- struct{}{}:
		default:
		}
	}
	waitView := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-applied:
			case <-time.After(bound):
				t.Fatalf("timed out: %s", what)
			}
		}
	}
	vctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); v.Run(vctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitView("the view synced", func() bool { return v.Synced() })
	seen := map[string]EventKind{}
	for range 2 {
		ev := <-events
		seen[ev.Info.AgentID] = ev.Kind
	}
	if seen["agent-a"] != Added || seen["agent-b"] != Added || len(events) != 0 {
		t.Fatalf("events of the replay: %v (own agent told: %d more)", seen, len(events))
	}
	got := v.Remote()
	if len(got) != 2 || got[0].AgentID != "agent-a" || got[0].Node != "n3" || got[1].AgentID != "agent-b" || got[1].Node != "n2" {
		t.Fatalf("Remote: %+v", got)
	}
	if _, ok := v.Lookup("agent-mine"); ok {
		t.Fatal("Lookup finds this node's own agent")
	}
	if in, ok := v.Lookup("agent-b"); !ok || in.Node != "n2" {
		t.Fatalf("Lookup(agent-b): %+v %t", in, ok)
	}
	e, err := rec.Agents.Get(ctx, "agent-b")
	if err != nil {
		t.Fatal(err)
	}
	e.Value.Title = "renamed"
	if _, err := rec.Agents.Update(ctx, "agent-b", e.Value, e.Revision); err != nil {
		t.Fatal(err)
	}
	waitView("the rename reached the view", func() bool {
		for _, in := range v.Remote() {
			if in.AgentID == "agent-b" && in.Title == "renamed" {
				return true
			}
		}
		return false
	})
	if ev := <-events; ev.Kind != Updated || ev.Info.AgentID != "agent-b" || ev.Info.Title != "renamed" || ev.Info.Node != "n2" {
		t.Fatalf("event of the rename: %+v", ev)
	}
	a, err := rec.Agents.Get(ctx, "agent-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Agents.Delete(ctx, "agent-a", a.Revision); err != nil {
		t.Fatal(err)
	}
	waitView("the delete reached the view", func() bool {
		_, ok := v.Lookup("agent-a")
		return !ok
	})
	if ev := <-events; ev.Kind != Removed || ev.Info.AgentID != "agent-a" {
		t.Fatalf("event of the delete: %+v", ev)
	}
	if got := v.Remote(); len(got) != 1 || got[0].AgentID != "agent-b" || got[0].Status != protocol.StatusIdle {
		t.Fatalf("Remote after the delete: %+v", got)
	}
}
