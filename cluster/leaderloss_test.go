package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamLeaderLossKillsOnlyTheLost: the node holding the membership
// bucket's stream leader crashes. The survivors' watches stall until a
// new leader is elected and the watch is restarted, and every record
// looks silent meanwhile; a survivor must not judge on that stale view.
// Exactly the crashed node is declared dead, once; the live nodes are
// never declared dead nor rejoin as a new incarnation.
func TestStreamLeaderLossKillsOnlyTheLost(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	h.startAll()
	for i := range 3 {
		waitFor(t, h.node(i), "three alive members", allAlive("n1", "n2", "n3"))
	}
	leader := streamLeader(t, h.node(0))
	var survivors []int
	for i := range 3 {
		if i != leader {
			survivors = append(survivors, i)
		}
	}
	lost := h.name(leader)
	t.Logf("stream leader of %s: %s", NodesBucket, lost)

	h.crash(leader)
	declared := func(ms []Member) bool {
		for _, m := range ms {
			if m.Node == lost && m.Incarnation == 1 {
				return m.Health == HealthDead && m.DeclaredBy != ""
			}
		}
		return false
	}
	for _, i := range survivors {
		waitFor(t, h.node(i), lost+" declared dead", declared)
	}
	// The survivors go on for two more leases of heartbeats, each seen
	// by both: a false death would show in that time too.
	after := time.Now().Add(2 * testLease)
	for _, i := range survivors {
		waitFor(t, h.node(i), "the survivors heartbeating two leases on", func(ms []Member) bool {
			for _, j := range survivors {
				found := false
				for _, m := range ms {
					if m.Node == h.name(j) {
						found = m.Incarnation == 1 && m.Health == HealthAlive && m.HeartbeatAt.After(after)
					}
				}
				if !found {
					return false
				}
			}
			return true
		})
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.deaths) != 1 || h.deaths[0].node != lost || h.deaths[0].incarnation != 1 {
		t.Errorf("OnNodeDead calls = %+v, want one, for %s incarnation 1", h.deaths, lost)
	}
	if len(h.rejoins) != 0 {
		t.Errorf("OnRejoin calls = %+v, want none", h.rejoins)
	}
	for _, i := range survivors {
		if got := h.nodes[i].Incarnation(); got != 1 {
			t.Errorf("%s incarnation = %d, want 1", h.name(i), got)
		}
	}
}

// streamLeader is the index of the node holding the membership bucket's
// stream leader, as JetStream's stream info names it.
func streamLeader(t *testing.T, n *Node) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	kv, err := n.JetStream().KeyValue(ctx, NodesBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if info.Cluster == nil {
		t.Fatal("the bucket's stream has no cluster info")
	}
	var i int
	if _, err := fmt.Sscanf(info.Cluster.Leader, "n%d", &i); err != nil || i < 1 || i > 3 {
		t.Fatalf("stream leader %q is not one of n1..n3", info.Cluster.Leader)
	}
	return i - 1
}

// FuzzDecodeMsgGet: the decoder of JetStream's stream message get
// response never panics, and what it accepts has a sequence.
func FuzzDecodeMsgGet(f *testing.F) {
	f.Add([]byte(`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$KV.shard_nodes.node.n1","seq":7,"data":"e30=","time":"2026-12-06T16:00:00Z"}}`))
	f.Add([]byte(`{"error":{"code":404,"err_code":10037,"description":"no message found"}}`))
	f.Add([]byte(`{"message":null}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMsgGet(b)
		if err == nil && m.Seq == 0 {
			t.Fatalf("accepted %q without a sequence", b)
		}
	})
}
