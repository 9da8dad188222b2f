package daemon_test

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// killChild stops a child's runtime; agent.kill answers once the process
// is gone, so the workspace is no longer live after it.
func killChild(t *testing.T, c *client.Conn, agentID string) {
	t.Helper()
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: agentID}, Force: true}); err != nil {
		t.Fatalf("agent.kill %s: %v", agentID, err)
	}
}

func relaunch(c *client.Conn, t *testing.T, parent, target, task string) (protocol.SubagentRelaunchData, error) {
	var rl protocol.SubagentRelaunchData
	err := c.Call(ctx(t), &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch), ParentAgentID: parent,
		Target: target, Task: task}, &rl)
	return rl, err
}

// TestRelaunchVersusRetireOfItsWorkspace: subagent.relaunch of an
// isolated child and workspace.retire of its workspace, in both orders.
// Relaunch first: the relaunched run is in flight (it claims the
// workspace at its start), so retire is refused busy and the worktree
// stays. Retire first: the relaunch is refused at once with the typed
// refusal "retired" (CONFLICT) and no run is created — the child never
// runs in a vanished cwd, nor anywhere else. (The same moment, a retire
// holding the repository's lock while the run starts, is
// workspaces.TestRetireAndRunStartAtTheSameMoment.)
func TestRelaunchVersusRetireOfItsWorkspace(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	parent := isolatedParent(t, h, c, repo)

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "first",
		Task: "sim: say done", Isolation: protocol.IsolationWorkspace})
	run := job.Runs[0]
	if res := waitRuns(t, c, parent, []string{run.RunID}, "", nil); res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("first run = %+v", res.Runs[0])
	}
	killChild(t, c, run.AgentID)

	// Relaunch first, retire second: busy.
	rl, err := relaunch(c, t, parent, run.AgentID, "sim: sleep 30000")
	if err != nil {
		t.Fatalf("relaunch into an active workspace: %v", err)
	}
	_, err = wsRetire(t, c, run.WorkspaceID, protocol.DispositionKeep)
	r := wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalBusy)
	if r.WorkspaceID != run.WorkspaceID || !strings.Contains(r.Reason, rl.RunID) {
		t.Fatalf("busy refusal = %+v, want it to name %s", r, rl.RunID)
	}
	var stop protocol.SubagentStopData
	if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: rl.JobID}, &stop); err != nil {
		t.Fatalf("subagent.stop: %v", err)
	}
	if res := waitRuns(t, c, parent, []string{rl.RunID}, "", nil); res.Runs[0].State != protocol.RunCancelled {
		t.Fatalf("relaunched run = %+v", res.Runs[0])
	}
	killChild(t, c, run.AgentID)

	// Retire first, relaunch second: a typed refusal, no run.
	data, err := wsRetire(t, c, run.WorkspaceID, protocol.DispositionKeep)
	if err != nil {
		t.Fatalf("retire once the runs ended: %v", err)
	}
	if data.Workspace.State != protocol.WorkspaceStateRetired {
		t.Fatalf("retire = %+v", data.Workspace)
	}
	_, err = relaunch(c, t, parent, run.AgentID, "sim: say again")
	r = wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalRetired)
	if r.WorkspaceID != run.WorkspaceID {
		t.Fatalf("retired refusal = %+v", r)
	}
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent,
		Targets: []string{run.AgentID}}, &st); err != nil {
		t.Fatalf("subagent.status: %v", err)
	}
	if len(st.Agents) != 1 || st.Agents[0].Run == nil || st.Agents[0].Run.RunID != rl.RunID {
		t.Fatalf("the refused relaunch made a run: %+v", st.Agents)
	}
}
