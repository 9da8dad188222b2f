package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// isolatedParent is an agent working in repo, attached interactively on c
// (its children's permission requests come up to it).
func isolatedParent(t *testing.T, h *harness, c *client.Conn, repo string) string {
	t.Helper()
	parent := h.create(c, func(a *protocol.AgentCreate) { a.Cwd = repo })
	attach(t, c, parent, "")
	return parent
}

// driveRuns answers every permission request on c (allow) until each of
// runIDs has a terminal subagent_run_changed, and returns those events and
// the raw records seen meanwhile. It waits on events, bounded by a
// generous timeout that only fails the test.
func driveRuns(t *testing.T, c *client.Conn, runIDs ...string) (map[string]*protocol.SubagentRunChanged, []string) {
	t.Helper()
	ended := map[string]*protocol.SubagentRunChanged{}
	var raws []string
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for len(ended) < len(runIDs) {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed: %v", c.Err())
			}
			raws = append(raws, string(e.Raw))
			switch m := e.Msg.(type) {
			case *protocol.PermissionRequest:
				if _, err := c.Request(ctx(t), permResponse(m.AgentID, m.RequestID, protocol.DecisionAllow, "")); err != nil {
					t.Fatalf("permission response: %v", err)
				}
			case *protocol.SubagentRunChanged:
				for _, id := range runIDs {
					if m.RunID == id && m.State.Terminal() {
						ended[id] = m
					}
				}
			}
		case <-timeout.C:
			t.Fatalf("runs not ended: %d of %d", len(ended), len(runIDs))
		}
	}
	return ended, raws
}

// waitReport waits for the completion report of run (the parent's sim
// runtime echoes what it is told) that contains every one of want.
func waitReport(t *testing.T, c *client.Conn, seen []string, runID string, want ...string) {
	t.Helper()
	has := func(raw string) bool {
		if !strings.Contains(raw, "[subagent report] run "+runID) {
			return false
		}
		for _, w := range want {
			if !strings.Contains(raw, w) {
				return false
			}
		}
		return true
	}
	for _, raw := range seen {
		if has(raw) {
			return
		}
	}
	waitFor(t, c, func(e client.Event) bool { return has(string(e.Raw)) })
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// TestIsolatedParallelChildrenEditTheSameFileApart: two parallel children
// rewrite the same tracked file differently, each in its own worktree on
// its own branch: both edits land (committed, on two branches), the main
// checkout is untouched, and each report names the workspace and its diff
// stat.
func TestIsolatedParallelChildrenEditTheSameFileApart(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	parent := isolatedParent(t, h, c, repo)

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyParallel,
		Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{
			{Name: "alpha", Task: `sim: tool write {"path":"README","content":"alpha\n"}` + "\nsim: say alpha done"},
			{Name: "beta", Task: `sim: tool write {"path":"README","content":"beta\n"}` + "\nsim: say beta done"},
		}})
	a, b := job.Runs[0], job.Runs[1]
	if a.WorkspaceID == "" || b.WorkspaceID == "" || a.WorkspaceID == b.WorkspaceID {
		t.Fatalf("created runs = %+v", job.Runs)
	}
	_, seen := driveRuns(t, c, a.RunID, b.RunID)

	res := waitRuns(t, c, parent, []string{job.JobID}, "all", secs(0))
	root, _ := filepath.EvalSymlinks(h.cfg.WorktreeRoot())
	want := map[string]string{a.RunID: "alpha\n", b.RunID: "beta\n"}
	branches := map[string]bool{}
	for _, r := range res.Runs {
		ws := r.Workspace
		if r.State != protocol.RunCompleted || ws == nil || ws.DiffStat == nil {
			t.Fatalf("run = %+v (workspace %+v)", r, ws)
		}
		if d := *ws.DiffStat; d.Files != 1 || d.Additions != 1 || d.Deletions != 1 {
			t.Fatalf("diff stat of %s = %+v, want README +1 -1", r.Name, d)
		}
		if !strings.HasPrefix(ws.Cwd, root+string(filepath.Separator)) || !strings.HasPrefix(ws.Branch, "shard/"+r.Name+"-") {
			t.Fatalf("workspace of %s = %+v", r.Name, ws)
		}
		if got := readFile(t, filepath.Join(ws.Cwd, "README")); got != want[r.RunID] {
			t.Fatalf("README in %s's worktree = %q", r.Name, got)
		}
		// The child runs in the worktree, and says so in AgentInfo.
		var st protocol.AgentListData
		if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: r.AgentID}}, &st); err != nil {
			t.Fatal(err)
		}
		if info := st.Agents[0]; info.Cwd != ws.Cwd || info.WorkspaceID != ws.WorkspaceID {
			t.Fatalf("child info = %+v, want cwd %s workspace %s", info, ws.Cwd, ws.WorkspaceID)
		}
		wsInfo := wsStatus(t, c, ws.WorkspaceID)
		if wsInfo.State != protocol.WorkspaceStateActive || wsInfo.Branch != ws.Branch || len(wsInfo.AgentIDs) != 1 || wsInfo.AgentIDs[0] != r.AgentID {
			t.Fatalf("workspace.status = %+v", wsInfo)
		}
		waitReport(t, c, seen, r.RunID, "workspace: "+ws.WorkspaceID, "branch "+ws.Branch, "cwd "+ws.Cwd,
			"diff: 1 file(s) changed, +1 -1")
		// Committed there, the edit lands on the workspace's branch alone.
		runGit(t, ws.Cwd, "commit", "-q", "-am", r.Name)
		if got := runGit(t, repo, "show", ws.Branch+":README"); got+"\n" != want[r.RunID] {
			t.Fatalf("README on %s = %q", ws.Branch, got)
		}
		branches[ws.Branch] = true
	}
	if len(branches) != 2 {
		t.Fatalf("branches = %v", branches)
	}
	if got := readFile(t, filepath.Join(repo, "README")); got != "hello\n" {
		t.Fatalf("main checkout README = %q", got)
	}
	if got := runGit(t, repo, "show", "main:README"); got != "hello" {
		t.Fatalf("README on main = %q", got)
	}
}

// TestIsolatedChainContinuesInOneWorkspace: a chain's second step runs in
// the first step's worktree (a fresh agent bound to the same workspace)
// and sees the file the first step wrote.
func TestIsolatedChainContinuesInOneWorkspace(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	parent := isolatedParent(t, h, c, repo)

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyChain,
		Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{
			{Name: "first", Task: `sim: tool write {"path":"notes.txt","content":"step one\n"}`},
			{Name: "second", Task: `sim: tool edit {"path":"notes.txt","old_string":"step one","new_string":"step two"}`},
		}})
	one, two := job.Runs[0], job.Runs[1]
	if one.WorkspaceID == "" || one.WorkspaceID != two.WorkspaceID || one.AgentID == two.AgentID {
		t.Fatalf("created runs = %+v", job.Runs)
	}
	driveRuns(t, c, one.RunID, two.RunID)
	res := waitRuns(t, c, parent, []string{job.JobID}, "all", secs(0))
	r1, r2 := res.Runs[0], res.Runs[1]
	if r1.State != protocol.RunCompleted || r2.State != protocol.RunCompleted {
		t.Fatalf("runs = %+v", res.Runs)
	}
	if r1.Workspace.Cwd != r2.Workspace.Cwd {
		t.Fatalf("steps worked in %s and %s", r1.Workspace.Cwd, r2.Workspace.Cwd)
	}
	// The edit succeeded only because the first step's file was there.
	if got := readFile(t, filepath.Join(r2.Workspace.Cwd, "notes.txt")); got != "step two\n" {
		t.Fatalf("notes.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("notes.txt reached the main checkout: %v", err)
	}
	ws := wsStatus(t, c, one.WorkspaceID)
	if len(ws.AgentIDs) != 2 || ws.AgentIDs[0] != one.AgentID || ws.AgentIDs[1] != two.AgentID {
		t.Fatalf("workspace agents = %v", ws.AgentIDs)
	}
}

// TestIsolationRefusals: an unknown isolation is INVALID_REQUEST naming the
// field; isolation on a cwd outside any repository is refused with typed
// data and writes nothing.
func TestIsolationRefusals(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil) // a plain temp dir: no repository

	var data protocol.SubagentCreateData
	err := c.Call(ctx(t), &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate), ParentAgentID: parent,
		Name: "x", Task: "sim: say hi", Isolation: "sandbox"}, &data)
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), "isolation") {
		t.Fatalf("isolation sandbox: %v", err)
	}
	err = c.Call(ctx(t), &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate), ParentAgentID: parent,
		Name: "x", Task: "sim: say hi", Isolation: protocol.IsolationWorkspace}, &data)
	wantRefusal(t, err, protocol.CodeInvalidRequest, protocol.RefusalNotARepository)

	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 0 {
		t.Fatalf("a refused create left jobs: %+v", st.Jobs)
	}
	var l protocol.WorkspaceListData
	if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: hdr(protocol.TypeWorkspaceList), IncludeRetired: true}, &l); err != nil || len(l.Workspaces) != 0 {
		t.Fatalf("workspaces = %+v, %v", l, err)
	}
	// isolation "none" is the default, accepted.
	createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "y", Task: "sim: say hi", Isolation: protocol.IsolationNone})
}

// TestRetireRefusesBusyWhileRunInFlight: a workspace whose subagent run is
// in flight is refused busy, naming the run; once the run ended it
// retires.
func TestRetireRefusesBusyWhileRunInFlight(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	parent := isolatedParent(t, h, c, repo)

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "sleeper",
		Task: "sim: sleep 30000", Isolation: protocol.IsolationWorkspace})
	run := job.Runs[0]
	waitRunState(t, c, run.RunID, protocol.RunActive)
	_, err := wsRetire(t, c, run.WorkspaceID, protocol.DispositionKeep)
	r := wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalBusy)
	if !strings.Contains(r.Reason, run.RunID) || len(r.AgentIDs) != 1 || r.AgentIDs[0] != run.AgentID {
		t.Fatalf("busy refusal = %+v", r)
	}

	var stop protocol.SubagentStopData
	if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: job.JobID}, &stop); err != nil {
		t.Fatalf("subagent.stop: %v", err)
	}
	res := waitRuns(t, c, parent, []string{run.RunID}, "", nil)
	if res.Runs[0].State != protocol.RunCancelled {
		t.Fatalf("run = %+v", res.Runs[0])
	}
	// The run is over; what is left is the child's runtime (live), which
	// goes once it is killed.
	_, _ = c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: run.AgentID}, Force: true})
	eventually(t, "retired", func() bool {
		_, err := wsRetire(t, c, run.WorkspaceID, protocol.DispositionKeep)
		if k, ok := protocol.WorkspaceRefusalOf(err); ok && k.Kind == protocol.RefusalBusy && strings.Contains(k.Reason, "subagent run") {
			t.Fatalf("still busy after the run ended: %v", err)
		}
		return err == nil
	})
}

// TestIsolatedRestartWithPlannedWorkspace: a job is committed with a
// workspace that no run has made yet (the second run waits behind the
// per-parent cap); the daemon stops hard. After the restart the plan is
// kept (nothing of it was made), the queued run makes its worktree and
// completes in it, the run cut short is interrupted, and its workspace
// stays active with its worktree.
func TestIsolatedRestartWithPlannedWorkspace(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, func(cfg *config.Config) { cfg.Jobs.MaxActivePerParent = 1 })
	c := h.dial()
	parent := isolatedParent(t, h, c, repo)

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyParallel,
		Isolation: protocol.IsolationWorkspace, Tasks: []protocol.TaskSpec{
			{Name: "long", Task: "sim: sleep 30000"}, {Name: "later", Task: "sim: say never"}}})
	long, later := job.Runs[0], job.Runs[1]
	waitRunState(t, c, long.RunID, protocol.RunActive)
	var l protocol.WorkspaceListData
	if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: hdr(protocol.TypeWorkspaceList)}, &l); err != nil {
		t.Fatal(err)
	}
	states := map[string]protocol.WorkspaceState{}
	for _, w := range l.Workspaces {
		states[w.WorkspaceID] = w.State
	}
	if states[long.WorkspaceID] != protocol.WorkspaceStateActive || states[later.WorkspaceID] != protocol.WorkspaceStateCreating {
		t.Fatalf("before the restart: %v", states)
	}
	planned := wsStatus(t, c, later.WorkspaceID)
	h.d.Shutdown(true)

	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	attach(t, c2, parent, "")
	res := waitRuns(t, c2, parent, []string{job.JobID}, "all", nil)
	r1, r2 := res.Runs[0], res.Runs[1]
	if r1.State != protocol.RunInterrupted {
		t.Fatalf("cut-short run = %+v", r1)
	}
	// The plan was committed with the job and nothing of it made: it
	// survives the restart, and the queued run makes its worktree and runs.
	if r2.State != protocol.RunCompleted || r2.Workspace == nil || r2.Workspace.WorkspaceID != later.WorkspaceID {
		t.Fatalf("run of the planned workspace = %+v", r2)
	}
	made := wsStatus(t, c2, later.WorkspaceID)
	if made.State != protocol.WorkspaceStateActive || made.Branch != planned.Branch {
		t.Fatalf("planned workspace after the restart = %+v", made)
	}
	if _, err := os.Stat(made.Cwd); err != nil {
		t.Fatalf("worktree of the planned workspace: %v", err)
	}
	if !branchExists(t, repo, planned.Branch) {
		t.Fatal("branch of the planned workspace is missing")
	}
	kept := wsStatus(t, c2, long.WorkspaceID)
	if kept.State != protocol.WorkspaceStateActive {
		t.Fatalf("workspace of the interrupted run = %+v", kept)
	}
	if _, err := os.Stat(kept.Cwd); err != nil {
		t.Fatalf("worktree of the interrupted run: %v", err)
	}
	if !branchExists(t, repo, kept.Branch) {
		t.Fatal("branch of the interrupted run is gone")
	}
}
