//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/protocol"
)

// listOn asks d for agent.list (q's filters and paging) over a fresh
// connection; an error is returned for waits that retry.
func listOn(t *testing.T, d *daemon, q protocol.AgentList) (protocol.AgentListData, error) {
	t.Helper()
	c, err := dialQuiet(d)
	if err != nil {
		return protocol.AgentListData{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q.Header = protocol.Header{Type: protocol.TypeAgentList}
	var data protocol.AgentListData
	err = c.Call(ctx, &q, &data)
	return data, err
}

// agentOf is agent id's AgentInfo in list.
func agentOf(list []protocol.AgentInfo, id string) (protocol.AgentInfo, bool) {
	for _, in := range list {
		if in.AgentID == id {
			return in, true
		}
	}
	return protocol.AgentInfo{}, false
}

// waitListed waits until d's agent.list satisfies want.
func waitListed(t *testing.T, d *daemon, what string, want func([]protocol.AgentInfo) bool) []protocol.AgentInfo {
	t.Helper()
	var data protocol.AgentListData
	eventually(t, clusterWait, what, func() bool {
		var err error
		data, err = listOn(t, d, protocol.AgentList{})
		return err == nil && want(data.Agents)
	})
	return data.Agents
}

// createOn creates an agent on d and returns its id.
func createOn(t *testing.T, c *client.Conn) string {
	t.Helper()
	var created protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &created)
	return created.AgentID
}

// TestClusterAgentDirectory: every node lists every agent of the cluster.
// Agents created on n1 and n3 are listed on n2 (agent.list with node,
// shardctl agents ls with its NODE column), in agent.list's order and
// paging; a rename on n3 shows on n1; a rename on n1 of n3's agent is
// forwarded to n3; an agent.remove mixing nodes refuses the other node's
// agent naming it (UNSUPPORTED); a removal disappears everywhere; a
// client of n2 is told of it all as events; n3 SIGKILLed, its agents are
// still listed on n1 while it is dead; an agent removed from n3's store
// while n3 is out of the cluster leaves the directory when n3 returns and
// reconciles.
func TestClusterAgentDirectory(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	nodes := make([]*daemon, 3)
	for i := range nodes {
		nodes[i] = clusterNode(t, mesh, i, homes[i], token)
	}
	for _, d := range nodes {
		d.waitServing()
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	// A client of n2 is told of the other nodes' agents as of its own.
	evs := watchEvents(t, n2)
	c1, c3 := n1.dial(), n3.dial()
	a1 := createOn(t, c1)
	a3 := createOn(t, c3)
	b3 := createOn(t, c3)
	where := map[string]string{a1: "n1", a3: "n3", b3: "n3"}

	spawned := map[string]string{}
	waitEvent(t, evs, "agent_spawned on n2 for the three", func(m protocol.Typed) bool {
		if e, ok := m.(*protocol.AgentSpawned); ok && e.Info.AgentID == e.AgentID {
			spawned[e.AgentID] = e.Info.Node
		}
		return len(spawned) == 3
	})
	for id, node := range where {
		if spawned[id] != node {
			t.Errorf("agent_spawned on n2 for %s: node %q, want %s", id, spawned[id], node)
		}
	}

	// n2 hosts nothing and lists all three, each with its node, oldest
	// first.
	list := waitListed(t, n2, "n2 lists the agents of n1 and n3", func(l []protocol.AgentInfo) bool { return len(l) == 3 })
	for i, in := range list {
		if in.Node != where[in.AgentID] || in.Cwd == "" || in.Status == "" || in.RuntimeState == "" {
			t.Errorf("n2's agent.list[%d]: %+v, want node %s", i, in, where[in.AgentID])
		}
		if i > 0 && (list[i-1].CreatedAt > in.CreatedAt || list[i-1].CreatedAt == in.CreatedAt && list[i-1].AgentID > in.AgentID) {
			t.Errorf("n2's agent.list out of order: %+v", list)
		}
	}
	// Paged, one at a time: the same three, each once, in the same order.
	var paged []string
	q := protocol.AgentList{Limit: 1}
	for range 5 {
		page, err := listOn(t, n2, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page.Agents {
			paged = append(paged, in.AgentID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if strings.Join(paged, ",") != strings.Join([]string{list[0].AgentID, list[1].AgentID, list[2].AgentID}, ",") {
		t.Errorf("n2's pages of one: %q, unpaged %+v", paged, list)
	}
	// n1 lists its own with node n1 and n3's with node n3.
	waitListed(t, n1, "n1 lists the three", func(l []protocol.AgentInfo) bool { return len(l) == 3 })
	ls := n2.mustCtl("", "agents", "ls").stdout
	for id, node := range where {
		if !lineHas(ls, id[:18], " "+node+" ") { // ls shows ids cut to 18
			t.Errorf("agents ls on n2 has no row of %s on %s:\n%s", id, node, ls)
		}
	}
	if !strings.Contains(strings.SplitN(ls, "\n", 2)[0], "NODE") {
		t.Errorf("agents ls on n2 has no NODE column:\n%s", ls)
	}
	// agent.status of n3's agent on n2 answers from the directory.
	var st protocol.AgentListData
	call(t, dialRaw(t, n2), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: a3}}, &st)
	if len(st.Agents) != 1 || st.Agents[0].Node != "n3" {
		t.Errorf("agent.status of %s on n2: %+v", a3, st)
	}

	// A rename on n3 shows on n1.
	title := "release notes"
	var upd protocol.AgentInfo
	call(t, c3, &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: a3}, Title: &title}, &upd)
	waitListed(t, n1, "n1 sees n3's rename", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, a3)
		return ok && in.Title == title && in.Node == "n3"
	})
	waitEvent(t, evs, "agent_updated on n2 with n3's rename", func(m protocol.Typed) bool {
		e, ok := m.(*protocol.AgentUpdated)
		return ok && e.AgentID == a3 && e.Info.Title == title && e.Info.Node == "n3"
	})

	// A command on n1 for n3's agent is forwarded to n3 (docs/protocol.md
	// §13 "Agents of other nodes"): a rename through n1 shows on n3.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	other := "renamed through n1"
	var upd1 protocol.AgentUpdateData
	call(t, c1, &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: a3}, Title: &other}, &upd1)
	if upd1.Info.Title != other || upd1.Info.Node != "n3" {
		t.Errorf("agent.update on n1 of n3's agent: %+v", upd1)
	}
	waitListed(t, n3, "n3 has the rename made through n1", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, a3)
		return ok && in.Title == other
	})
	n1.mustCtl("", "agents", "rename", a3, title) // shardctl through n1 too, back to title
	waitListed(t, n3, "n3 has shardctl's rename through n1", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, a3)
		return ok && in.Title == title
	})
	// An agent.remove naming agents of more than one node is not
	// forwarded: the other node's agent is refused naming its node.
	var rmOn1 protocol.AgentRemoveData
	call(t, c1, &protocol.AgentRemove{Header: protocol.Header{Type: protocol.TypeAgentRemove}, AgentIDs: []string{a3, "agent-nobody"}}, &rmOn1)
	if len(rmOn1.Results) != 2 || rmOn1.Results[0].Removed || rmOn1.Results[0].Error != protocol.CodeUnsupported ||
		!strings.Contains(rmOn1.Results[0].Reason, "lives on node n3") || rmOn1.Results[1].Error != protocol.CodeNotFound {
		t.Errorf("agent.remove on n1 of n3's agent and an unknown one: %+v", rmOn1)
	}
	// An id nobody has is still NOT_FOUND.
	if err := c1.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: "agent-nobody"}}, nil); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Errorf("attach of an unknown agent on n1: %v", err)
	}

	// A removal on n3 disappears everywhere.
	// Its runtime stopped first (agent.remove refuses a running agent);
	// n1 sees the stop too.
	call(t, c3, &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: b3}}, nil)
	waitListed(t, n1, "n1 sees n3's agent stopped", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, b3)
		return ok && in.RuntimeState == protocol.RuntimeStopped
	})
	var rm protocol.AgentRemoveData
	call(t, c3, &protocol.AgentRemove{Header: protocol.Header{Type: protocol.TypeAgentRemove}, AgentIDs: []string{b3}}, &rm)
	if len(rm.Results) != 1 || !rm.Results[0].Removed {
		t.Fatalf("agent.remove on n3: %+v", rm)
	}
	waitEvent(t, evs, "agent_removed on n2 for n3's removed agent", func(m protocol.Typed) bool {
		e, ok := m.(*protocol.AgentRemoved)
		return ok && e.AgentID == b3
	})
	for _, d := range []*daemon{n1, n2} {
		waitListed(t, d, "the removed agent leaves "+d.home, func(l []protocol.AgentInfo) bool {
			_, ok := agentOf(l, b3)
			return !ok && len(l) == 2
		})
	}

	// SIGKILL n3: n1 still lists its agents while n3 is dead.
	d3 := createOn(t, c3)
	waitListed(t, n1, "n1 lists n3's new agent", func(l []protocol.AgentInfo) bool {
		_, ok := agentOf(l, d3)
		return ok
	})
	c3.Close()
	n3.kill()
	n3.waitExit(t, exitTimeout)
	waitNode(t, n1, "n1 sees n3 dead", "n3", func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeDead })
	dead, err := listOn(t, n1, protocol.AgentList{})
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := agentOf(dead.Agents, a3); !ok || in.Node != "n3" || in.Title != title || len(dead.Agents) != 3 {
		t.Fatalf("n1's list with n3 dead: %+v", dead.Agents)
	}

	// While n3 is out of the cluster its home serves as a single shardd
	// for a moment, and a3 is removed from its store.
	alone := startDaemonAt(t, homes[2])
	var rmAlone protocol.AgentRemoveData
	ca := dialRaw(t, alone)
	call(t, ca, &protocol.AgentRemove{Header: protocol.Header{Type: protocol.TypeAgentRemove}, AgentIDs: []string{a3}}, &rmAlone)
	if len(rmAlone.Results) != 1 || !rmAlone.Results[0].Removed {
		t.Fatalf("agent.remove of %s on n3's home alone: %+v", a3, rmAlone)
	}
	ca.Close()
	alone.kill()
	alone.waitExit(t, exitTimeout)

	// n3 again in the cluster: it reconciles its entries — a3's goes, d3's
	// stays — and lists n1's agent beside its own.
	n3 = clusterNode(t, mesh, 2, homes[2], token)
	n3.waitServing()
	for _, d := range []*daemon{n1, n2, n3} {
		waitListed(t, d, "after n3's return, "+d.home+" lists a1 and d3 only", func(l []protocol.AgentInfo) bool {
			x, ok1 := agentOf(l, a1)
			y, ok3 := agentOf(l, d3)
			return len(l) == 2 && ok1 && ok3 && x.Node == "n1" && y.Node == "n3"
		})
	}
}

// lineHas reports whether a line of out holds every one of parts.
func lineHas(out string, parts ...string) bool {
	for l := range strings.SplitSeq(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l+" ", p)
		}
		if ok {
			return true
		}
	}
	return false
}

// watchEvents connects to d and returns the events it is sent, in order
// (the channel is large enough for the test; the client's reader never
// blocks on it).
func watchEvents(t *testing.T, d *daemon) <-chan protocol.Typed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	out := make(chan protocol.Typed, 4096)
	go func() {
		for e := range c.Events() {
			select {
			case out <- e.Msg:
			default:
			}
		}
	}()
	return out
}

// waitEvent reads evs until one satisfies want.
func waitEvent(t *testing.T, evs <-chan protocol.Typed, what string, want func(protocol.Typed) bool) {
	t.Helper()
	timeout := time.After(clusterWait)
	for {
		select {
		case m := <-evs:
			if want(m) {
				return
			}
		case <-timeout:
			t.Fatalf("timed out after %s: %s", clusterWait, what)
		}
	}
}
