//go:build linux

package web_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/protocol"
)

// TestDashboardClusterJobsLive: n2's page (no agent selected) follows a
// job of a parent on n1 as it starts, without a reload: n1's
// workspace_created reaches n2's page (docs/protocol.md §13 "Events of
// other nodes"), which reads its panels again, cluster-wide: the jobs
// panel lists the job as n1's and the workspaces panel its workspace as
// n1's. With the parent opened on n2's page (attached, and its jobs read,
// through n2), a second job's run is followed live to completed
// (subagent_run_changed through n2's connection to n1). First, a job of a
// run any node may take is listed while it runs (its child's
// agent_spawned: its workspace is made on n1 only when it ends).
func TestDashboardClusterJobsLive(t *testing.T) {
	b := newBrowser(t)
	nodes := startCluster(t, 3)
	n1, n2 := nodes[0], nodes[1]

	p := b.newPage("n2")
	p.recordSent()
	p.enroll(n2)
	p.until("the cluster chip", `document.querySelector("#cluster summary")?.textContent === "node n2 · 3/3 alive"`)
	p.until("no jobs yet", `document.querySelector("#jobs .count")?.textContent === "0"`)

	// A run any node may take (a repository with an origin): its
	// workspace is made on n1 only when it ends, so no workspace event
	// says it started; its child's agent_spawned does, and the page lists
	// the job while it runs.
	c1 := n1.wire()
	far := newRepo(t)
	origin := filepath.Join(t.TempDir(), "origin.git")
	gitIn(t, far, "init", "-q", "--bare", origin)
	gitIn(t, far, "remote", "add", "origin", origin)
	farParent := call[protocol.AgentCreateData](t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: far}).AgentID
	long := call[protocol.SubagentCreateData](t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
		ParentAgentID: farParent, Name: "far", Task: "sim: sleep 600000", Isolation: protocol.IsolationWorkspace})
	p.until("the running job of a run any node takes listed", fmt.Sprintf(`(el => !!el && el.dataset.node === "n1" && ["queued", "starting", "active"].includes(el.querySelector(".run .state")?.textContent))(document.querySelector('#jobs [data-job=%q]'))`, long.JobID))
	call[protocol.SubagentStopData](t, c1, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: farParent, Handle: long.JobID})

	parent := call[protocol.AgentCreateData](t, c1, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: newRepo(t)}).AgentID
	job := call[protocol.SubagentCreateData](t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
		ParentAgentID: parent, Name: "kid", Task: "sim: say hi", Isolation: protocol.IsolationWorkspace})
	if len(job.Runs) != 1 || job.Runs[0].WorkspaceID == "" {
		t.Fatalf("isolated job: %+v", job)
	}
	p.until("n1's job listed on n2's page, as n1's", fmt.Sprintf(`(el => !!el && el.dataset.node === "n1" && el.querySelector(".badge.node")?.textContent === "on n1")(document.querySelector('#jobs [data-job=%q]'))`, job.JobID))
	p.until("its workspace listed, as n1's", fmt.Sprintf(`document.querySelector('#workspaces [data-workspace=%q]')?.dataset.node === "n1"`, job.Runs[0].WorkspaceID))

	// The parent opened on n2's page: its jobs follow its run changes.
	p.until("the parent listed as n1's", fmt.Sprintf(`document.querySelector('[data-agent=%q]')?.dataset.node === "n1"`, parent))
	p.run("open the parent", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-agent=%q] .pick`, parent))))
	p.until("the parent's view", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && !document.querySelector("#remote-agent")`, parent))
	p.until("the parent's jobs read", fmt.Sprintf(`(window.__sent || []).some(m => m.type === "subagent.status" && m.parent_agent_id === %q)`, parent))
	again := call[protocol.SubagentCreateData](t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
		ParentAgentID: parent, Name: "again", Task: "sim: sleep 1000"})
	p.until("the second job's run followed live to completed", fmt.Sprintf(`document.querySelector('#jobs [data-job=%q] .run .state')?.textContent === "completed"`, again.JobID))
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardClusterListsAgainWhenANodeIsBack: events a node publishes
// while another cannot hear it are lost (docs/protocol.md §13 "Events of
// other nodes"), so n2's page reads its panels again when a node it saw
// dead is alive again. n3's workspace is listed on n2's page; n3 killed,
// a later list (after n1's workspace_created) leaves it out; n3 started
// again on its home, the page lists it again, with no event of it.
func TestDashboardClusterListsAgainWhenANodeIsBack(t *testing.T) {
	b := newBrowser(t)
	nodes, restart := startClusterRestartable(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, far := newWorkspace(t, n3, "far")
	farSel := fmt.Sprintf(`document.querySelector('#workspaces [data-workspace=%q]')`, far.Workspace.WorkspaceID)

	p := b.newPage("n2")
	p.enroll(n2)
	p.until("the cluster chip", `document.querySelector("#cluster summary")?.textContent === "node n2 · 3/3 alive"`)
	p.until("n3's workspace listed", farSel+`?.dataset.node === "n3"`)

	n3.sd.Kill()
	p.untilWithin(clusterReady, "n3 dead in the chip", `document.querySelector('#cluster .cn[data-node="n3"]')?.dataset.health === "dead"`)
	_, near := newWorkspace(t, n1, "near")
	p.until("n1's new workspace listed, n3's left out", fmt.Sprintf(`document.querySelector('#workspaces [data-workspace=%q]')?.dataset.node === "n1" && !%s`, near.Workspace.WorkspaceID, farSel))

	restart(2)
	p.untilWithin(clusterReady, "n3's workspace listed again once n3 is back", farSel+`?.dataset.node === "n3"`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
