package records_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/internal/natstest"
)

// next receives one change, failing the test if the watch closed.
func next[T records.Record](t *testing.T, ch <-chan records.Change[T]) records.Change[T] {
	t.Helper()
	timer := time.NewTimer(natstest.Bound)
	defer timer.Stop()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		return c
	case <-timer.C:
		t.Fatalf("no change within %s", natstest.Bound)
	}
	panic("unreachable")
}

// TestWatchSeesOtherServers watches the runs of one job through S-1: it
// gets the record that was there, the Synced marker, then a create made
// through S-2 and a delete made through S-3, and nothing of another job;
// ending its context closes the channel.
func TestWatchSeesOtherServers(t *testing.T) {
	b := setup(t, 3, records.Options{})
	if _, err := b.rec[0].CreateRun(ctx(t), run("job-w", "run-1")); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx(t))
	ch, err := b.rec[0].Runs.Watch(wctx, "job-w")
	if err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Key != "job-w.run-1" || c.Value.RunID != "run-1" || c.Deleted || c.Synced {
		t.Fatalf("initial change: %+v", c)
	}
	if c := next(t, ch); !c.Synced {
		t.Fatalf("want the Synced marker, got %+v", c)
	}
	if _, err := b.rec[1].CreateRun(ctx(t), run("job-other", "run-9")); err != nil {
		t.Fatal(err)
	}
	rev, err := b.rec[1].CreateRun(ctx(t), run("job-w", "run-2"))
	if err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Key != "job-w.run-2" || c.Revision != rev || c.Value.Task != "task of run-2" {
		t.Fatalf("create through S-2: %+v", c)
	}
	if err := b.rec[2].Runs.Delete(ctx(t), "job-w.run-2", rev); err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Key != "job-w.run-2" || !c.Deleted || c.Revision <= rev {
		t.Fatalf("delete through S-3: %+v", c)
	}
	stop()
	for range ch {
	}
	if _, err := b.rec[0].Runs.Watch(ctx(t), "job.*"); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("wildcard prefix: %v", err)
	}
}

// TestOpenOptions: one server runs the layer with one replica; two
// replicas are refused (a majority of two is both: the bucket would stop
// with either server lost); a node asking for another replica count than
// the bucket has is refused rather than silently served.
func TestOpenOptions(t *testing.T) {
	b := setup(t, 1, records.Options{})
	rev, err := b.rec[0].Agents.Create(ctx(t), "agent-1", records.AgentEntry{AgentID: "agent-1", Node: "n1", Cwd: "/w", State: records.AgentLive})
	if err != nil || rev == 0 {
		t.Fatalf("create on one server: %d %v", rev, err)
	}
	if _, err := records.Open(ctx(t), b.js[0], records.Options{Replicas: 2}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("two replicas: %v", err)
	}
	if _, err := records.Open(ctx(t), b.js[0], records.Options{Replicas: 3}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("three replicas over a one-replica bucket: %v", err)
	}
	again, err := records.Open(ctx(t), b.js[0], records.Options{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := again.Agents.Get(ctx(t), "agent-1"); err != nil || e.Value.Node != "n1" {
		t.Fatalf("bound again: %+v %v", e, err)
	}
}

// TestDirectory: a node's agents, and an alias bound once across servers.
func TestDirectory(t *testing.T) {
	b := setup(t, 3, records.Options{})
	for i, node := range []string{"n1", "n2", "n1"} {
		id := []string{"agent-a", "agent-b", "agent-c"}[i]
		if _, err := b.rec[i].Agents.Create(ctx(t), id, records.AgentEntry{AgentID: id, Node: node, Cwd: "/w", State: records.AgentLive}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.rec[2].AgentsOfNode(ctx(t), "n1")
	if err != nil || len(got) != 2 || got[0].Value.Node != "n1" || got[1].Value.Node != "n1" {
		t.Fatalf("agents of n1: %+v %v", got, err)
	}
	if err := b.rec[0].BindAlias(ctx(t), "agent-a", "scout one", "agent-b"); err != nil {
		t.Fatal(err)
	}
	if err := b.rec[1].BindAlias(ctx(t), "agent-a", "scout one", "agent-b"); err != nil {
		t.Fatalf("same binding again: %v", err)
	}
	if err := b.rec[2].BindAlias(ctx(t), "agent-a", "scout one", "agent-c"); !errors.Is(err, records.ErrExists) {
		t.Fatalf("alias taken by another agent: %v", err)
	}
	if err := b.rec[2].BindAlias(ctx(t), "agent-c", "scout one", "agent-c"); err != nil {
		t.Fatalf("same alias under another parent: %v", err)
	}
}

// TestWatchOutlivesLeaderLoss: a watch through a surviving server keeps
// delivering after the stream's leader is killed, so another node's view
// stays live across a failover.
func TestWatchOutlivesLeaderLoss(t *testing.T) {
	b := setup(t, 3, records.Options{})
	leader := b.c.StreamLeader("KV_" + records.BucketRuns)
	via, writer := (leader+1)%3, (leader+2)%3
	wctx, stop := context.WithCancel(ctx(t))
	defer stop()
	ch, err := b.rec[via].Runs.Watch(wctx, "job-f")
	if err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); !c.Synced {
		t.Fatalf("want Synced first, got %+v", c)
	}
	b.c.Stop(leader)
	rev, err := b.rec[writer].CreateRun(ctx(t), run("job-f", "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Key != "job-f.run-1" || c.Revision != rev {
		t.Fatalf("after the leader's loss: %+v, want revision %d", c, rev)
	}
}
