//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/recordstest"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterRunsRequestsUnlisted: the claiming node finds the parent's
// node in the run, not in its agent directory. The parent's entry is taken
// out of the directory (n3 no longer lists it, as in the moment after a
// parent was created), then its job is created: the child on n3 still
// sends its permission request up to the person attached to the parent on
// n1, whose answer lets the child's tool run. A client that attached to
// the child on n3 after the request went up sees it pending in the child's
// sync, and resolved by n1's answer.
func TestClusterRunsRequestsUnlisted(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := []*daemon{
		runsNodeWith(t, mesh, 0, newHome(t), token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 1, newHome(t), token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 2, newHome(t), token),
	}
	allAlive(t, nodes)
	n1, n3 := nodes[0], nodes[2]
	rec := recordstest.Dial(t, natsURL(t, n1), token, records.Options{Replicas: 3})
	repo, _ := originRepo(t)
	c1 := dialEvents(t, n1)
	var parent protocol.AgentCreateData
	c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &parent)
	var att protocol.AgentAttachData
	c1.call(attachCmd(parent.AgentID), &att)

	// The parent leaves n3's directory.
	waitListed(t, n3, "n3 lists the parent", func(l []protocol.AgentInfo) bool { _, ok := agentOf(l, parent.AgentID); return ok })
	ctx := context.Background()
	eventually(t, clusterWait, "the parent's directory entry deleted", func() bool {
		// n1 may rewrite it meanwhile (the attachment): a conflict, again.
		e, err := rec.Agents.Get(ctx, parent.AgentID)
		if err != nil {
			t.Fatalf("the parent's directory entry: %v", err)
		}
		return rec.Agents.Delete(ctx, parent.AgentID, e.Revision) == nil
	})
	waitListed(t, n3, "n3 no longer lists the parent", func(l []protocol.AgentInfo) bool { _, ok := agentOf(l, parent.AgentID); return !ok })

	var job protocol.SubagentCreateData
	c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: "w",
			Task: "sim: tool write {\"path\":\"w.txt\",\"content\":\"written\\n\"}\nsim: say w done"}}}, &job)
	runID, child := job.Runs[0].RunID, job.Runs[0].AgentID
	rr, err := rec.Runs.Get(ctx, records.RunKey(job.JobID, runID))
	if err != nil || rr.Value.ParentNode != "n1" {
		t.Fatalf("run record %+v: %v (want parent_node n1)", rr.Value, err)
	}
	req := c1.waitFor("the permission request of child "+child, of(protocol.TypePermissionRequest, child)).(*protocol.PermissionRequest)
	// A client attaches to the child on n3 once its request went up: its
	// sync lists the request, and the answer of n1's person resolves it.
	c3 := dialEvents(t, n3)
	c3.call(attachCmd(child), &att)
	s := c3.waitFor("the child's sync on n3", of(protocol.TypeSync, child)).(*protocol.Sync)
	listed := false
	for _, p := range s.PendingRequests {
		listed = listed || strings.Contains(string(p), req.RequestID)
	}
	if !listed {
		t.Fatalf("the child's sync on n3 does not list %s: %s", req.RequestID, s.PendingRequests)
	}
	if err := c1.try(permResponse(child, req.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("n1's answer to the child on n3: %v", err)
	}
	isRes := func(m protocol.Typed) bool {
		r, ok := m.(*protocol.PermissionResolved)
		return ok && r.AgentID == child && r.RequestID == req.RequestID
	}
	for _, e := range []*evConn{c1, c3} {
		if res := e.waitFor("the resolution", isRes).(*protocol.PermissionResolved); res.Source != "unix" || res.Decision != protocol.DecisionAllow {
			t.Fatalf("resolution: %+v (want n1's allow)", res)
		}
	}
	r := waitRun(t, n1, parent.AgentID, runID, "the run ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if r.State != protocol.RunCompleted || r.Node != "n3" || r.FinalText != "w done" {
		t.Fatalf("run: %+v", r)
	}
	var diff protocol.WorkspaceDiffData
	c1.call(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: r.Workspace.WorkspaceID}, &diff)
	if len(diff.Files) != 1 {
		t.Fatalf("the run wrote %d files: want its w.txt (the answer let the tool run)", len(diff.Files))
	}
}

// TestClusterRunsChain: ancestors on two nodes. A grandparent on n1
// (its person attached there) has its child P run on the node that
// claimed it (B); P makes children of its own on B (runs without
// isolation stay on their parent's node). A grandchild's permission
// request goes to the nearest ancestor with an interactive client, as on
// one node: with nobody attached to P, up the link to the grandparent's
// person on n1, whose answer n1 forwards to B; a client that attached to
// the grandchild on B once its request went up sees it resolved by that
// answer. Once a person attaches to P (through n1), the next grandchild's
// request goes to P's person instead.
func TestClusterRunsChain(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := []*daemon{
		runsNodeWith(t, mesh, 0, newHome(t), token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 1, newHome(t), token, "--jobs.max-active", "4"),
		runsNodeWith(t, mesh, 2, newHome(t), token, "--jobs.max-active", "4"),
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	repo, _ := originRepo(t)
	c1 := dialEvents(t, n1)
	var gp protocol.AgentCreateData
	c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &gp)
	var att protocol.AgentAttachData
	c1.call(attachCmd(gp.AgentID), &att)

	// P: a first child that writes, the ask that lets the test attach a
	// person to P, a second child that writes. Its children's aliases are
	// the pool's first two.
	child := func(file string) string {
		b, err := json.Marshal(map[string]any{"action": "create", "name": file,
			"task": "sim: tool write {\"path\":\"" + file + "\",\"content\":\"x\\n\"}\nsim: say " + file + " done"})
		if err != nil {
			t.Fatal(err)
		}
		return "sim: tool subagent " + string(b)
	}
	pTask := strings.Join([]string{
		child("one.txt"), `sim: tool subagent {"action":"wait","handles":["ada"]}`,
		"sim: ask confirm Next",
		child("two.txt"), `sim: tool subagent {"action":"wait","handles":["alan"]}`,
		"sim: say p done",
	}, "\n")
	var job protocol.SubagentCreateData
	c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: gp.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: "p", Task: pTask}}}, &job)
	pRun, p := job.Runs[0].RunID, job.Runs[0].AgentID
	grandchildAsks := func(e *evConn, what string) *protocol.PermissionRequest {
		t.Helper()
		return e.waitFor(what, func(m protocol.Typed) bool {
			r, ok := m.(*protocol.PermissionRequest)
			return ok && r.AgentID != p && r.AgentID != gp.AgentID
		}).(*protocol.PermissionRequest)
	}
	resolvedBy := func(e *evConn, what string, req *protocol.PermissionRequest) *protocol.PermissionResolved {
		t.Helper()
		return e.waitFor(what, func(m protocol.Typed) bool {
			r, ok := m.(*protocol.PermissionResolved)
			return ok && r.AgentID == req.AgentID && r.RequestID == req.RequestID
		}).(*protocol.PermissionResolved)
	}

	// 1. Nobody attached to P: the grandparent's person on n1 is asked.
	req := grandchildAsks(c1, "the first grandchild's request on n1")
	pr := waitRun(t, n1, gp.AgentID, pRun, "n1 shows where P runs", func(r protocol.RunSnapshot) bool { return r.Node != "" })
	x1, _ := agentOf(waitListed(t, n1, "n1 lists the grandchild", func(l []protocol.AgentInfo) bool { _, ok := agentOf(l, req.AgentID); return ok }), req.AgentID)
	if x1.ParentAgentID != p || x1.Node != pr.Node || pr.Node == "n1" {
		t.Fatalf("grandchild %+v, P on %s: want a child of P on P's node", x1, pr.Node)
	}
	var nb *daemon
	for i, d := range nodes {
		if pr.Node == fmt.Sprintf("n%d", i+1) {
			nb = d
		}
	}
	// A client attaches to the grandchild on its node after the request
	// went up: the answer of n1's person resolves it for that client too.
	cx := dialEvents(t, nb)
	cx.call(attachCmd(x1.AgentID), &att)
	if err := c1.try(permResponse(x1.AgentID, req.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("n1's answer to the grandchild on %s: %v", pr.Node, err)
	}
	if res := resolvedBy(c1, "the resolution on n1", req); res.Source != "unix" || res.Decision != protocol.DecisionAllow {
		t.Fatalf("resolution on n1: %+v (want n1's allow)", res)
	}
	if res := resolvedBy(cx, "the resolution seen by the grandchild's client", req); res.Source != "unix" || res.Decision != protocol.DecisionAllow {
		t.Fatalf("resolution seen on %s by the grandchild's client: %+v (want n1's allow)", pr.Node, res)
	}
	cx.c.Close()

	// 2. P asks (its own request, up to n1); meanwhile a person attaches
	// to P through n1. The next grandchild's request goes to P's person.
	ask := c1.waitFor("P's ask", of(protocol.TypeUIRequest, p)).(*protocol.UIRequest)
	cp := dialEvents(t, n1)
	cp.call(attachCmd(p), &att)
	if err := c1.try(&protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: p},
		RequestID: ask.RequestID, Value: json.RawMessage(`"true"`)}); err != nil {
		t.Fatalf("n1's answer to P's ask: %v", err)
	}
	req2 := grandchildAsks(cp, "the second grandchild's request at P's person")
	if req2.AgentID == x1.AgentID {
		t.Fatalf("the second request is the first grandchild's: %+v", req2)
	}
	if err := cp.try(permResponse(req2.AgentID, req2.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("P's person's answer: %v", err)
	}
	if res := resolvedBy(cp, "the second resolution at P's person", req2); res.Decision != protocol.DecisionAllow {
		t.Fatalf("second resolution: %+v", res)
	}
	pr = waitRun(t, n1, gp.AgentID, pRun, "P's run ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if pr.State != protocol.RunCompleted { // its final text may be a turn a child's report started
		t.Fatalf("P's run: %+v", pr)
	}
}

// TestClusterRunsChainThreeNodes: an uplink chain over three nodes. The
// grandparent on n1 (its person attached there); its child P's run
// claimed by one node (B); P's own isolated run claimed by the third (C:
// B is full, one run each) — a claimed run's worktree is a repository of
// its own whose origin is the shared remote, so P's isolated runs are
// anywhere runs too. The grandchild X on C has nobody attached, nor has P:
// its permission request goes C → B → n1, to the grandparent's person;
// n1 forwards the answer to C (the request named X's node on its way),
// X's write runs, and a client that attached to X on C after the request
// went up sees it resolved by that answer.
func TestClusterRunsChainThreeNodes(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := []*daemon{
		runsNodeWith(t, mesh, 0, newHome(t), token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 1, newHome(t), token),
		runsNodeWith(t, mesh, 2, newHome(t), token),
	}
	allAlive(t, nodes)
	n1 := nodes[0]
	repo, _ := originRepo(t)
	c1 := dialEvents(t, n1)
	var gp protocol.AgentCreateData
	c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: repo}, &gp)
	var att protocol.AgentAttachData
	c1.call(attachCmd(gp.AgentID), &att)

	create, err := json.Marshal(map[string]any{"action": "create", "name": "x", "isolation": "workspace",
		"task": "sim: tool write {\"path\":\"x.txt\",\"content\":\"x\\n\"}\nsim: say x done"})
	if err != nil {
		t.Fatal(err)
	}
	pTask := "sim: tool subagent " + string(create) + "\nsim: tool subagent {\"action\":\"wait\",\"handles\":[\"ada\"]}\nsim: say p done"
	var job protocol.SubagentCreateData
	c1.call(&protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: gp.AgentID,
		Strategy: protocol.StrategyParallel, Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{{Name: "p", Task: pTask}}}, &job)
	pRun, p := job.Runs[0].RunID, job.Runs[0].AgentID

	req := c1.waitFor("the grandchild's request on n1", func(m protocol.Typed) bool {
		r, ok := m.(*protocol.PermissionRequest)
		return ok && r.AgentID != p && r.AgentID != gp.AgentID
	}).(*protocol.PermissionRequest)
	pr := waitRun(t, n1, gp.AgentID, pRun, "n1 shows where P runs", func(r protocol.RunSnapshot) bool { return r.Node != "" })
	x, _ := agentOf(waitListed(t, n1, "n1 lists the grandchild", func(l []protocol.AgentInfo) bool { _, ok := agentOf(l, req.AgentID); return ok }), req.AgentID)
	if x.ParentAgentID != p || x.Node == "" || x.Node == pr.Node || x.Node == "n1" {
		t.Fatalf("grandchild %+v, P on %s: want a child of P on the third node", x, pr.Node)
	}
	var nc *daemon
	for i, d := range nodes {
		if x.Node == fmt.Sprintf("n%d", i+1) {
			nc = d
		}
	}
	cx := dialEvents(t, nc)
	cx.call(attachCmd(x.AgentID), &att)
	if err := c1.try(permResponse(x.AgentID, req.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("n1's answer to the grandchild on %s: %v", x.Node, err)
	}
	isRes := func(m protocol.Typed) bool {
		r, ok := m.(*protocol.PermissionResolved)
		return ok && r.AgentID == x.AgentID && r.RequestID == req.RequestID
	}
	if res := c1.waitFor("the resolution on n1", isRes).(*protocol.PermissionResolved); res.Source != "unix" || res.Decision != protocol.DecisionAllow {
		t.Fatalf("resolution on n1: %+v (want n1's allow)", res)
	}
	if res := cx.waitFor("the resolution seen by the grandchild's client", isRes).(*protocol.PermissionResolved); res.Source != "unix" || res.Decision != protocol.DecisionAllow {
		t.Fatalf("resolution seen on %s: %+v (want n1's allow)", x.Node, res)
	}
	pr = waitRun(t, n1, gp.AgentID, pRun, "P's run ends", func(r protocol.RunSnapshot) bool { return r.State.Terminal() })
	if pr.State != protocol.RunCompleted {
		t.Fatalf("P's run: %+v", pr)
	}
	// The grandchild's run, asked of P's node through n1: completed on
	// C with its one file (its branch fetched back into its workspace on B).
	var st protocol.SubagentStatusData
	c1.call(&protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: p}, &st)
	var found bool
	for _, j := range st.Jobs {
		for _, r := range j.Runs {
			if r.AgentID == x.AgentID {
				found = true
				if r.State != protocol.RunCompleted || r.Node != x.Node || r.Workspace == nil || r.Workspace.DiffStat == nil || r.Workspace.DiffStat.Files != 1 {
					t.Fatalf("the grandchild's run, from n1: %+v (want completed on %s, its one file)", r, x.Node)
				}
			}
		}
	}
	if !found {
		t.Fatalf("subagent.status of P from n1: no run of %s in %+v", x.AgentID, st)
	}
}
