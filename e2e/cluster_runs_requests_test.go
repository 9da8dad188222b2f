//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/protocol"
)

// runsNodeWith is runsNode with more flags (cluster.claim_runs=false keeps
// a node free of claimed runs).
func runsNodeWith(t *testing.T, mesh *clustertest.Mesh, i int, home, token string, extra ...string) *daemon {
	t.Helper()
	return clusterNode(t, mesh, i, home, token, append([]string{"--jobs.max-active", "1", "--shutdown.timeout", "1s",
		"--cluster.client-listen", "127.0.0.1:0"}, extra...)...)
}

// TestClusterRunsRequests: a child running on n3 (the only node that
// claims runs) asks permission to write; its parent lives on n1, with a
// client attached there. The request reaches n1's client with the child's
// agent_id; its answer, forwarded to n3, lets the child's tool run, and
// the resolution comes back to n1. With a client of n3 attached to the
// parent too (through n3's forwarding to n1), n3's answer wins and n1's
// later one is acknowledged and dropped. With n3 SIGKILLed while a
// request is open, n1 resolves it for the parent's clients (source
// node_lost) and the parent's sync no longer lists it.
func TestClusterRunsRequests(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	homes := []string{newHome(t), newHome(t), newHome(t)}
	nodes := []*daemon{
		runsNodeWith(t, mesh, 0, homes[0], token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 1, homes[1], token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 2, homes[2], token),
	}
	allAlive(t, nodes)
	n1, n3 := nodes[0], nodes[2]
	repo, _ := originRepo(t)
	c1 := dialEvents(t, n1)
	var parent protocol.AgentCreateData
	c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &parent)
	var att protocol.AgentAttachData
	c1.call(attachCmd(parent.AgentID), &att)
	// No wait for n3 to list the parent: the job follows at once, and the
	// run carries its parent's node to n3, where the child's request goes
	// up to n1 whatever n3's agent directory lists yet.

	// spawn starts a job of one run whose child writes file, and returns
	// the run's handle and child.
	spawn := func(file string) (runID, child string) {
		t.Helper()
		var job protocol.SubagentCreateData
		c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
			Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: file,
				Task: fmt.Sprintf("sim: tool write {\"path\":%q,\"content\":\"written\\n\"}\nsim: say %s done", file, file)}}}, &job)
		return job.Runs[0].RunID, job.Runs[0].AgentID
	}
	asked := func(e *evConn, child string) *protocol.PermissionRequest {
		t.Helper()
		return e.waitFor("the permission request of child "+child, of(protocol.TypePermissionRequest, child)).(*protocol.PermissionRequest)
	}
	resolved := func(e *evConn, child, reqID string) *protocol.PermissionResolved {
		t.Helper()
		return e.waitFor("the resolution of "+reqID, func(m protocol.Typed) bool {
			r, ok := m.(*protocol.PermissionResolved)
			return ok && r.AgentID == child && r.RequestID == reqID
		}).(*protocol.PermissionResolved)
	}
	wait := func(runID string) protocol.RunSnapshot {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*clusterWait)
		defer cancel()
		timeout := clusterWait.Seconds()
		var waited protocol.SubagentWaitData
		if err := c1.c.Call(ctx, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parent.AgentID,
			Handles: []string{runID}, Mode: "all", Timeout: &timeout}, &waited); err != nil || waited.TimedOut {
			t.Fatalf("subagent.wait %s: %v (%+v)", runID, err, waited)
		}
		return snapshotOf(waited, runID)
	}
	written := func(r protocol.RunSnapshot) int {
		t.Helper()
		var diff protocol.WorkspaceDiffData
		c1.call(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: r.Workspace.WorkspaceID}, &diff)
		return len(diff.Files)
	}

	// 1. The child on n3 asks; the parent's client on n1 answers.
	run1, child1 := spawn("one.txt")
	req := asked(c1, child1)
	if err := c1.try(permResponse(child1, req.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("n1's answer to the child on n3: %v", err)
	}
	if res := resolved(c1, child1, req.RequestID); res.Source != "unix" {
		t.Fatalf("resolution seen on n1: %+v (want n1's answer, source unix)", res)
	}
	r1 := wait(run1)
	if r1.State != protocol.RunCompleted || r1.Node != "n3" || r1.FinalText != "one.txt done" {
		t.Fatalf("run 1: %+v", r1)
	}
	if n := written(r1); n != 1 {
		t.Fatalf("run 1 wrote %d files: want its one.txt (the answer let the tool run)", n)
	}

	// 2. Clients on both sides: a client of n3 attached to the parent
	// (forwarded to n1) answers first; n1's answer comes late.
	c3 := dialEvents(t, n3)
	c3.call(attachCmd(parent.AgentID), &att)
	run2, child2 := spawn("two.txt")
	req = asked(c1, child2)
	asked(c3, child2)
	if err := c3.try(permResponse(child2, req.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("n3's answer: %v", err)
	}
	res3, res1 := resolved(c3, child2, req.RequestID), resolved(c1, child2, req.RequestID)
	if res3.Decision != protocol.DecisionAllow || res1.Decision != protocol.DecisionAllow || res1.Source != "unix" {
		t.Fatalf("resolutions: n3 %+v, n1 %+v", res3, res1)
	}
	if err := c1.try(permResponse(child2, req.RequestID, protocol.DecisionDeny)); err != nil {
		t.Fatalf("n1's late answer: %v (want success, nothing done)", err)
	}
	r2 := wait(run2)
	if r2.State != protocol.RunCompleted || written(r2) != 1 {
		t.Fatalf("run 2: %+v (n3's allow should have won)", r2)
	}
	c3.c.Close()

	// 3. n3 dies with a request open: n1's clients see it resolved.
	_, child3 := spawn("three.txt")
	req = asked(c1, child3)
	n3.kill()
	if res := resolved(c1, child3, req.RequestID); res.Source != "node_lost" || res.Decision != protocol.DecisionDeny {
		t.Fatalf("resolution after n3 died: %+v", res)
	}
	c1.call(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: parent.AgentID}}, nil)
	c1.call(attachCmd(parent.AgentID), &att)
	s := c1.waitFor("the parent's sync", of(protocol.TypeSync, parent.AgentID)).(*protocol.Sync)
	for _, p := range s.PendingRequests {
		if strings.Contains(string(p), req.RequestID) {
			t.Fatalf("the parent's sync still lists %s: %s", req.RequestID, p)
		}
	}
}

// allAlive waits until every node serves and the first sees all three
// alive: the start of a runs test, before it makes its first job.
func allAlive(t *testing.T, nodes []*daemon) {
	t.Helper()
	for _, d := range nodes {
		d.waitServing()
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		waitNode(t, nodes[0], "n1 sees "+name+" alive", name, func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeAlive })
	}
}

// callReplicated is call for a command the daemon answers only once a
// replicated write (a run record's compare-and-set, each write synced on
// a majority of the nodes) is done: the daemon bounds that write at 30 s
// itself, so the test waits as long as it would on a loaded machine
// rather than call's 20 s.
func callReplicated(t *testing.T, c *client.Conn, msg protocol.Typed, data any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	if err := c.Call(ctx, msg, data); err != nil {
		t.Fatalf("%s: %v", msg.Head().Type, err)
	}
}
