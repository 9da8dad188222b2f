//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

// eventCounts counts what one client got: workspace events by type and
// workspace, run changes by run and state.
type eventCounts struct {
	ws   map[string]int // "type workspace_id" → count
	runs map[string]int // "run_id state" → count
	node map[string]string
}

func newEventCounts() *eventCounts {
	return &eventCounts{ws: map[string]int{}, runs: map[string]int{}, node: map[string]string{}}
}

// add counts m when it is a workspace event or a run change.
func (ec *eventCounts) add(m protocol.Typed) {
	switch m := m.(type) {
	case *protocol.WorkspaceCreated:
		ec.ws[m.Type+" "+m.Workspace.WorkspaceID]++
		ec.node[m.Workspace.WorkspaceID] = m.Workspace.Node
	case *protocol.WorkspaceAttached:
		ec.ws[m.Type+" "+m.Workspace.WorkspaceID]++
	case *protocol.WorkspaceRetired:
		ec.ws[m.Type+" "+m.Workspace.WorkspaceID]++
	case *protocol.SubagentRunChanged:
		ec.runs[m.RunID+" "+string(m.State)]++
	}
}

// TestClusterJobAndWorkspaceEvents: the events that keep a view of jobs
// and workspaces live reach every node's clients, each once. A parent on
// n1 starts an isolated job (its workspace on n1); a client of n2 that
// speaks for the parent (subagent.status, forwarded to n1) gets the
// workspace's workspace_created (with node n1) and every
// subagent_run_changed of the run up to completed, without listing, each
// exactly once; a client of n1 and one of n3 (which speak for nobody) get
// workspace_created once too, n1's with node n1. Later events (a
// workspace.create on n1, a retire through n3, a second job of the parent)
// arrive after them, in order, and nothing of the first job again.
func TestClusterJobAndWorkspaceEvents(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	c1 := dialRaw(t, n1)
	var parentData protocol.AgentCreateData
	call(t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: wsRepo(t)}, &parentData)
	parent := parentData.AgentID
	waitListed(t, n2, "n2 lists the parent", func(l []protocol.AgentInfo) bool {
		a, ok := agentOf(l, parent)
		return ok && a.Node == "n1"
	})

	e1, e2, e3 := dialEvents(t, n1), dialEvents(t, n2), dialEvents(t, n3)
	// e2 speaks for the parent, as a page or a script does on one node.
	var status protocol.SubagentStatusData
	e2.call(&protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}, &status)
	counts := map[*evConn]*eventCounts{e1: newEventCounts(), e2: newEventCounts(), e3: newEventCounts()}
	// until reads e's events, counting them, until one satisfies want.
	until := func(e *evConn, what string, want func(protocol.Typed) bool) {
		t.Helper()
		e.waitFor(what, func(m protocol.Typed) bool {
			counts[e].add(m)
			return want(m)
		})
	}

	var job protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent,
		Name: "kid", Task: "sim: say hi", Isolation: protocol.IsolationWorkspace}, &job)
	if len(job.Runs) != 1 || job.Runs[0].WorkspaceID == "" {
		t.Fatalf("isolated job: %+v", job)
	}
	run, ws := job.Runs[0].RunID, job.Runs[0].WorkspaceID
	created := func(id string) func(protocol.Typed) bool {
		return func(m protocol.Typed) bool {
			c, ok := m.(*protocol.WorkspaceCreated)
			return ok && c.Workspace.WorkspaceID == id
		}
	}
	runIs := func(id string, state protocol.RunState) func(protocol.Typed) bool {
		return func(m protocol.Typed) bool {
			rc, ok := m.(*protocol.SubagentRunChanged)
			return ok && rc.RunID == id && rc.State == state
		}
	}
	until(e2, "n1's workspace_created on n2", created(ws))
	until(e2, "the run completed, on n2", runIs(run, protocol.RunCompleted))
	until(e1, "workspace_created on n1", created(ws))
	until(e3, "n1's workspace_created on n3", created(ws))

	// Fences: what n1 broadcasts later comes after any copy of the
	// first, on every path (NATS keeps a publisher's order; a node's
	// connection to another keeps the order it was sent in).
	var later protocol.WorkspaceCreateData
	call(t, c1, &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: wsRepo(t), Label: "later"}, &later)
	var retired protocol.WorkspaceRetireData
	e3.call(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: later.Workspace.WorkspaceID,
		BranchDisposition: protocol.DispositionKeep}, &retired)
	retiredEv := func(m protocol.Typed) bool {
		r, ok := m.(*protocol.WorkspaceRetired)
		return ok && r.Workspace.WorkspaceID == later.Workspace.WorkspaceID && r.Workspace.Node == "n1"
	}
	var again protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent,
		Name: "again", Task: "sim: say again"}, &again)
	againDone := protocol.TypeSubagentRunChanged + " " + again.Runs[0].RunID + " " + string(protocol.RunCompleted)
	for e, name := range map[*evConn]string{e1: "n1", e2: "n2", e3: "n3"} {
		retiredSeen, againSeen := false, e != e2
		until(e, "the later workspace's retire (and on n2 the second job's run completed) on "+name, func(m protocol.Typed) bool {
			retiredSeen = retiredSeen || retiredEv(m)
			if rc, ok := m.(*protocol.SubagentRunChanged); ok {
				againSeen = againSeen || rc.Type+" "+rc.RunID+" "+string(rc.State) == againDone
			}
			return retiredSeen && againSeen
		})
	}

	for e, name := range map[*evConn]string{e1: "n1", e2: "n2", e3: "n3"} {
		ec := counts[e]
		for _, key := range []string{
			protocol.TypeWorkspaceCreated + " " + ws,
			protocol.TypeWorkspaceCreated + " " + later.Workspace.WorkspaceID,
			protocol.TypeWorkspaceAttached + " " + later.Workspace.WorkspaceID,
			protocol.TypeWorkspaceRetired + " " + later.Workspace.WorkspaceID,
		} {
			if ec.ws[key] != 1 {
				t.Errorf("client of %s got %q %d times, want once (all: %v)", name, key, ec.ws[key], ec.ws)
			}
		}
		if ec.node[ws] != "n1" {
			t.Errorf("client of %s: workspace_created of %s says node %q, want n1", name, ws, ec.node[ws])
		}
		if e != e2 {
			if len(ec.runs) != 0 {
				t.Errorf("client of %s speaks for no parent but got run changes %v", name, ec.runs)
			}
			continue
		}
		// Every transition of both runs once, completed among them.
		for _, r := range []string{run, again.Runs[0].RunID} {
			if ec.runs[fmt.Sprintf("%s %s", r, protocol.RunCompleted)] != 1 {
				t.Errorf("n2's client: run %s completed %d times: %v", r, ec.runs[r+" completed"], ec.runs)
			}
		}
		for key, n := range ec.runs {
			if n != 1 {
				t.Errorf("n2's client got the run change %q %d times, want once", key, n)
			}
		}
	}
}

// TestClusterRunEventsOutliveTheParentsNode: a client of n2 that spoke for
// a parent on n1 (subagent.status, forwarded) keeps getting its run
// changes after n1 restarts, though the connection n2 had opened to n1
// for it is gone and it sent nothing since: n2 keeps who speaks for whom
// and n1 publishes its run changes to every node, as one node keeps a
// connection's parents for the connection's life (docs/protocol.md §13
// "Events of other nodes"). Each change comes once.
func TestClusterRunEventsOutliveTheParentsNode(t *testing.T) {
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
	n1, n2 := nodes[0], nodes[1]
	c1 := dialRaw(t, n1)
	parent := createOn(t, c1)
	waitListed(t, n2, "n2 lists the parent", func(l []protocol.AgentInfo) bool {
		_, ok := agentOf(l, parent)
		return ok
	})
	e2 := dialEvents(t, n2)
	e2.call(&protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}, nil)

	// n1 SIGKILLed and started again on its home.
	c1.Close()
	n1.kill()
	n1.waitExit(t, exitTimeout)
	n1 = clusterNode(t, mesh, 0, homes[0], token)
	n1.waitServing()
	c1 = dialRaw(t, n1)

	counts := newEventCounts()
	runDone := func(run string) func(protocol.Typed) bool {
		return func(m protocol.Typed) bool {
			counts.add(m)
			rc, ok := m.(*protocol.SubagentRunChanged)
			return ok && rc.RunID == run && rc.State == protocol.RunCompleted
		}
	}
	var job, fence protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent,
		Name: "kid", Task: "sim: say hi"}, &job)
	e2.waitFor("the run completed, on n2, after n1's restart", runDone(job.Runs[0].RunID))
	// A second job's changes come after any copy of the first's (n1
	// publishes them in order).
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent,
		Name: "fence", Task: "sim: say hi"}, &fence)
	e2.waitFor("the second run completed, on n2", runDone(fence.Runs[0].RunID))
	for key, n := range counts.runs {
		if n != 1 {
			t.Errorf("n2's client got the run change %q %d times, want once", key, n)
		}
	}
}

// TestClusterWatchFollowsOtherNodesRuns: shardctl watch on n2, started
// before a parent on n1 exists, prints that parent's run changes: it
// speaks for every parent it learns of (subagent.status, forwarded to
// n1), and n1's run changes reach it through n2.
func TestClusterWatchFollowsOtherNodesRuns(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n1, n2 := nodes[0], nodes[1]
	cmd := n2.ctlCmd("watch")
	out := &shardtest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c1 := dialRaw(t, n1)
	parent := createOn(t, c1)
	eventually(t, clusterWait, "watch on n2 sees n1's parent", func() bool { return strings.Contains(out.String(), parent) })
	// The parent is known to watch once its spawn is printed; a job of
	// its made after that is followed.
	var job protocol.SubagentCreateData
	eventually(t, clusterWait, "watch on n2 prints the run's end", func() bool {
		if job.JobID == "" {
			call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent,
				Name: "kid", Task: "sim: say hi"}, &job)
		}
		return strings.Contains(out.String(), job.Runs[0].RunID+" active→completed")
	})
}
