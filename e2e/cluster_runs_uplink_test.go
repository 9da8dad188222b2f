//go:build linux

package e2e

import (
	"context"
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
// n1, whose answer lets the child's tool run.
func TestClusterRunsRequestsUnlisted(t *testing.T) {
	mesh := clustertest.NewMesh(t, 3)
	token := randomToken(t, "cluster-token")
	nodes := []*daemon{
		runsNodeWith(t, mesh, 0, newHome(t), token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 1, newHome(t), token, "--cluster.claim-runs=false"),
		runsNodeWith(t, mesh, 2, newHome(t), token),
	}
	for _, d := range nodes {
		d.waitServing()
	}
	n1, n3 := nodes[0], nodes[2]
	for _, name := range []string{"n1", "n2", "n3"} {
		waitNode(t, n1, "n1 sees "+name+" alive", name, func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeAlive })
	}
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
	if err := c1.try(permResponse(child, req.RequestID, protocol.DecisionAllow)); err != nil {
		t.Fatalf("n1's answer to the child on n3: %v", err)
	}
	res := c1.waitFor("the resolution", func(m protocol.Typed) bool {
		r, ok := m.(*protocol.PermissionResolved)
		return ok && r.AgentID == child && r.RequestID == req.RequestID
	}).(*protocol.PermissionResolved)
	if res.Source != "unix" || res.Decision != protocol.DecisionAllow {
		t.Fatalf("resolution on n1: %+v (want n1's allow)", res)
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
