//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// jobsOn asks d for jobs.list (q's filters and paging) over c.
func jobsOn(t *testing.T, c *client.Conn, q protocol.JobsList) protocol.JobsListData {
	t.Helper()
	q.Header = protocol.Header{Type: protocol.TypeJobsList}
	var data protocol.JobsListData
	call(t, c, &q, &data)
	return data
}

// workspacesOn asks for workspace.list over c.
func workspacesOn(t *testing.T, c *client.Conn, q protocol.WorkspaceList) protocol.WorkspaceListData {
	t.Helper()
	q.Header = protocol.Header{Type: protocol.TypeWorkspaceList}
	var data protocol.WorkspaceListData
	call(t, c, &q, &data)
	return data
}

// jobNodes maps each listed job to the node it says.
func jobNodes(jobs []protocol.OpJob) map[string]string {
	out := map[string]string{}
	for _, j := range jobs {
		out[j.JobID] = j.Node
	}
	return out
}

// TestClusterJobsAndWorkspaces: every node lists every job and workspace of
// the cluster, each with its node. Jobs (local runs of parents on n1 and
// n3) and workspaces (on n1 and n2) are listed through each node in the
// commands' order, jobs.list paged a job at a time across the nodes with
// each job once; shardctl jobs ls and ws ls show a NODE column; jobs.show,
// subagent.status (its connection then gets the parent's run events),
// subagent.create, wait and shardctl jobs relaunch of a parent on n3,
// subagent.wait (by the parent's node)
// and workspace.status, diff, merge and retire of one node's job or workspace
// work through another; an id no node holds is NOT_FOUND. n3 SIGKILLed and
// declared dead: the lists leave its jobs out and name it in
// unavailable_nodes, and a command for its job is NOT_FOUND naming it.
func TestClusterJobsAndWorkspaces(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	c1, c2, c3 := dialRaw(t, n1), dialRaw(t, n2), dialRaw(t, n3)

	// Jobs: two of a parent on n1, two of a parent on n3 (plain cwd: the
	// runs stay on their parent's node).
	want := map[string]string{}     // job → node
	parentOf := map[string]string{} // job → its parent
	for _, p := range []struct {
		c    *client.Conn
		node string
	}{{c1, "n1"}, {c3, "n3"}, {c1, "n1"}, {c3, "n3"}} {
		parent := createOn(t, p.c)
		var job protocol.SubagentCreateData
		call(t, p.c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent,
			Name: "kid", Task: "sim: say hi"}, &job)
		want[job.JobID] = p.node
		parentOf[job.JobID] = parent
	}
	newestFirst := make([]string, 0, len(want))
	for id := range want {
		newestFirst = append(newestFirst, id)
	}
	slices.Sort(newestFirst)
	slices.Reverse(newestFirst)

	// Workspaces: one on n1, one on n2.
	wsWant := map[string]string{}
	var ws1, ws2, ws1Cwd string
	for _, p := range []struct {
		c    *client.Conn
		node string
		into *string
	}{{c1, "n1", &ws1}, {c2, "n2", &ws2}} {
		var data protocol.WorkspaceCreateData
		call(t, p.c, &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: wsRepo(t), Label: "on-" + p.node}, &data)
		wsWant[data.Workspace.WorkspaceID] = p.node
		*p.into = data.Workspace.WorkspaceID
		if p.node == "n1" {
			ws1Cwd = data.Workspace.Cwd
		}
	}

	// Every node lists every job and workspace with its node, in order.
	for i, c := range []*client.Conn{c1, c2, c3} {
		jobs := jobsOn(t, c, protocol.JobsList{})
		var ids []string
		for _, j := range jobs.Jobs {
			ids = append(ids, j.JobID)
		}
		if !slices.Equal(ids, newestFirst) || !maps.Equal(jobNodes(jobs.Jobs), want) || jobs.UnavailableNodes != nil || jobs.NextCursor != "" {
			t.Fatalf("jobs.list on n%d: %+v, want %v on %v", i+1, jobs, newestFirst, want)
		}
		wss := workspacesOn(t, c, protocol.WorkspaceList{})
		got := map[string]string{}
		for _, w := range wss.Workspaces {
			got[w.WorkspaceID] = w.Node
		}
		if len(wss.Workspaces) != 2 || !maps.Equal(got, wsWant) || wss.Workspaces[0].WorkspaceID != ws1 || wss.UnavailableNodes != nil {
			t.Fatalf("workspace.list on n%d: %+v, want %v (oldest first)", i+1, wss, wsWant)
		}
	}

	// Paged a job at a time through n2 (which holds none): each job once,
	// newest first, across the nodes.
	var paged []string
	q := protocol.JobsList{Limit: 1}
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("jobs.list pages never end: %v", paged)
		}
		page := jobsOn(t, c2, q)
		if len(page.Jobs) > 1 {
			t.Fatalf("page of %d", len(page.Jobs))
		}
		for _, j := range page.Jobs {
			paged = append(paged, j.JobID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if !slices.Equal(paged, newestFirst) {
		t.Fatalf("paged %v, want %v", paged, newestFirst)
	}
	// A page of three: the first three, and a cursor to the last one.
	page := jobsOn(t, c2, protocol.JobsList{Limit: 3})
	if len(page.Jobs) != 3 || page.Jobs[2].JobID != newestFirst[2] || page.NextCursor == "" {
		t.Fatalf("page of three: %+v", page)
	}
	if rest := jobsOn(t, c3, protocol.JobsList{Limit: 3, Cursor: page.NextCursor}); len(rest.Jobs) != 1 || rest.Jobs[0].JobID != newestFirst[3] || rest.NextCursor != "" {
		t.Fatalf("the page after it, through n3: %+v", rest)
	}

	// shardctl on n2: NODE columns.
	out := n2.mustCtl("", "jobs", "ls").stdout
	if !strings.Contains(out, "NODE") {
		t.Fatalf("jobs ls has no NODE column:\n%s", out)
	}
	for id, node := range want {
		if !lineHas(out, id, node) {
			t.Fatalf("jobs ls: no line with %s on %s:\n%s", id, node, out)
		}
	}
	out = n2.mustCtl("", "ws", "ls").stdout
	if !strings.Contains(out, "NODE") || !lineHas(out, "on-n1", "n1") || !lineHas(out, "on-n2", "n2") {
		t.Fatalf("ws ls:\n%s", out)
	}

	// Commands for another node's job or workspace, through a third node.
	var n1Job, n3Job string
	for _, id := range newestFirst {
		if want[id] == "n1" {
			n1Job = id
		} else {
			n3Job = id
		}
	}
	var shown protocol.OpJob
	call(t, c2, &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: n1Job}, &shown)
	if shown.JobID != n1Job || len(shown.Runs) != 1 || shown.Node != "n1" {
		t.Fatalf("jobs.show of n1's job through n2: %+v", shown)
	}
	// A parent's commands by job go to the parent's node (known from the
	// agent directory, once n2 lists the parents).
	waitListed(t, n2, "n2 lists the parents", func(l []protocol.AgentInfo) bool {
		_, ok1 := agentOf(l, parentOf[n1Job])
		_, ok3 := agentOf(l, parentOf[n3Job])
		return ok1 && ok3
	})
	e2 := dialEvents(t, n2)
	var status protocol.SubagentStatusData
	call(t, e2.c, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parentOf[n1Job],
		Targets: []string{n1Job}}, &status)
	if len(status.Agents) != 1 || status.Agents[0].Run == nil || status.Agents[0].Run.JobID != n1Job {
		t.Fatalf("subagent.status of n1's job through n2: %+v", status)
	}
	// That connection now speaks for the parent on n1: a new run of the
	// parent's comes to it as events.
	var again protocol.SubagentCreateData
	call(t, c1, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parentOf[n1Job],
		Name: "again", Task: "sim: say again"}, &again)
	e2.waitFor("n1's parent's run change on n2", func(m protocol.Typed) bool {
		rc, ok := m.(*protocol.SubagentRunChanged)
		return ok && rc.JobID == again.JobID
	})
	want[again.JobID] = "n1"
	zero := 0.0
	var waited protocol.SubagentWaitData
	call(t, c2, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parentOf[n3Job],
		Handles: []string{n3Job}, Timeout: &zero}, &waited)
	if len(waited.Runs) != 1 || waited.Runs[0].JobID != n3Job {
		t.Fatalf("subagent.wait of n3's job through n2: %+v", waited)
	}
	// Every subagent.* command of a parent goes to its node: a run
	// created through n2 for n3's parent, waited for, and relaunched by
	// shardctl on n2.
	var made protocol.SubagentCreateData
	call(t, c2, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parentOf[n3Job],
		Name: "via", Task: "sim: say made"}, &made)
	long := 120.0
	call(t, c2, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parentOf[n3Job],
		Handles: []string{made.JobID}, Timeout: &long}, &waited)
	if waited.TimedOut || len(waited.Runs) != 1 || waited.Runs[0].State != protocol.RunCompleted || waited.Runs[0].Node != "" && waited.Runs[0].Node != "n3" {
		t.Fatalf("subagent.create of n3's parent through n2, waited: %+v", waited)
	}
	want[made.JobID] = "n3"
	var again3 protocol.SubagentRelaunchData
	out = n2.mustCtl("", "jobs", "relaunch", made.Runs[0].AgentID, "--task", "sim: say again", "-o", "json").stdout
	if err := json.Unmarshal([]byte(out), &again3); err != nil || again3.AgentID != made.Runs[0].AgentID || again3.JobID == "" {
		t.Fatalf("shardctl jobs relaunch through n2: %+v", again3)
	}
	want[again3.JobID] = "n3"
	out = n2.mustCtl("", "jobs", "show", n3Job).stdout
	if !strings.Contains(out, n3Job) || !lineHas(out, "Node:", "n3") {
		t.Fatalf("shardctl jobs show of n3's job on n2:\n%s", out)
	}
	var st protocol.WorkspaceStatusData
	call(t, c3, &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: ws2}, &st)
	if st.Workspace.WorkspaceID != ws2 || st.Workspace.Ahead == nil {
		t.Fatalf("workspace.status of n2's workspace through n3: %+v", st)
	}
	var diff protocol.WorkspaceDiffData
	call(t, c3, &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: ws1}, &diff)
	if diff.WorkspaceID != ws1 {
		t.Fatalf("workspace.diff of n1's workspace through n3: %+v", diff)
	}
	// A commit on n1's workspace's branch, merged through n2.
	if err := os.WriteFile(filepath.Join(ws1Cwd, "feature.txt"), []byte("from n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wsGit(t, ws1Cwd, "add", "feature.txt")
	wsGit(t, ws1Cwd, "commit", "-q", "-m", "feature")
	var merged protocol.WorkspaceMergeData
	call(t, c2, &protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: ws1, Strategy: protocol.MergeMerge}, &merged)
	if merged.Workspace.WorkspaceID != ws1 || merged.MergedSHA == "" || merged.Stats.Files != 1 {
		t.Fatalf("workspace.merge of n1's workspace through n2: %+v", merged)
	}
	var retired protocol.WorkspaceRetireData
	call(t, c3, &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: ws2,
		BranchDisposition: protocol.DispositionKeep}, &retired)
	if retired.Workspace.State != protocol.WorkspaceStateRetired {
		t.Fatalf("workspace.retire of n2's workspace through n3: %+v", retired)
	}
	if wss := workspacesOn(t, c1, protocol.WorkspaceList{}); len(wss.Workspaces) != 1 || wss.Workspaces[0].WorkspaceID != ws1 {
		t.Fatalf("workspace.list after the retire: %+v", wss)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c1.Call(ctx, &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: "ws-nobody"}, nil)
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("workspace.status of an id nobody holds: %v", err)
	}

	// n3 dies: its jobs are left out and it is named.
	c3.Close()
	n3.kill()
	n3.waitExit(t, exitTimeout)
	onN1 := 0
	for _, node := range want {
		if node == "n1" {
			onN1++
		}
	}
	// Killed, perhaps not declared dead yet: asked (through c1's
	// connection to it, which may not know yet that it is gone) or not,
	// it is left out and named, within the bound.
	if early := jobsOn(t, c1, protocol.JobsList{}); len(early.Jobs) != onN1 || !slices.Equal(early.UnavailableNodes, []string{"n3"}) {
		t.Fatalf("jobs.list right after n3 was killed: %+v", early)
	}
	waitNode(t, n1, "n1 sees n3 dead", "n3", func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeDead })
	jobs := jobsOn(t, c1, protocol.JobsList{})
	for _, j := range jobs.Jobs {
		if want[j.JobID] != "n1" || j.Node != "n1" {
			t.Fatalf("with n3 dead, listed %s on %q", j.JobID, j.Node)
		}
	}
	if len(jobs.Jobs) != onN1 || !slices.Equal(jobs.UnavailableNodes, []string{"n3"}) {
		t.Fatalf("jobs.list with n3 dead: %+v", jobs)
	}
	if wss := workspacesOn(t, c2, protocol.WorkspaceList{IncludeRetired: true}); len(wss.Workspaces) != 2 || !slices.Equal(wss.UnavailableNodes, []string{"n3"}) {
		t.Fatalf("workspace.list with n3 dead: %+v", wss)
	}
	err = c2.Call(ctx, &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: n3Job}, nil)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeNotFound || !strings.Contains(pe.Message, "n3") {
		t.Fatalf("jobs.show of dead n3's job: %v", err)
	}
	if b, _ := json.Marshal(pe.Data); !strings.Contains(string(b), `"unavailable_nodes":["n3"]`) {
		t.Fatalf("jobs.show of dead n3's job: data %s", b)
	}
	r := n1.ctl("", "jobs", "ls")
	if r.code != 0 || !strings.Contains(r.stderr, "nodes unavailable, their jobs not listed: n3") {
		t.Fatalf("jobs ls with n3 dead exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
