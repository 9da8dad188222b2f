package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// gitRepo makes a real repository on branch main with one commit.
func gitRepo(t *testing.T) string {
	t.Helper()
	testhost.Tool(t, "git")
	dir := shortTemp(t)
	runGit(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "add", "README")
	runGit(t, dir, "commit", "-q", "-m", "initial")
	// Canonical, as records are (the temp dir may sit behind a symlink).
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func branchExists(t *testing.T, repo, branch string) bool {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	cmd.Dir = repo
	return cmd.Run() == nil
}

func wsCreate(t *testing.T, c *client.Conn, repo, label string) protocol.WorkspaceCreateData {
	t.Helper()
	var data protocol.WorkspaceCreateData
	if err := c.Call(ctx(t), &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo, Label: label}, &data); err != nil {
		t.Fatalf("workspace.create: %v", err)
	}
	return data
}

func wsRetire(t *testing.T, c *client.Conn, id string, disp protocol.BranchDisposition) (protocol.WorkspaceRetireData, error) {
	t.Helper()
	var data protocol.WorkspaceRetireData
	err := c.Call(ctx(t), &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: id, BranchDisposition: disp}, &data)
	return data, err
}

func wsStatus(t *testing.T, c *client.Conn, id string) protocol.WorkspaceInfo {
	t.Helper()
	var data protocol.WorkspaceStatusData
	if err := c.Call(ctx(t), &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: id}, &data); err != nil {
		t.Fatalf("workspace.status: %v", err)
	}
	return data.Workspace
}

func wantRefusal(t *testing.T, err error, code protocol.ErrorCode, kind protocol.WorkspaceRefusalKind) protocol.WorkspaceRefusal {
	t.Helper()
	if protocol.CodeOf(err) != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	r, ok := protocol.WorkspaceRefusalOf(err)
	if !ok || r.Kind != kind {
		t.Fatalf("refusal = %+v (%v), want kind %s", r, ok, kind)
	}
	return r
}

func isWorkspaceEvent(typ, id string) func(client.Event) bool {
	return func(e client.Event) bool {
		if e.Msg.Head().Type != typ {
			return false
		}
		return strings.Contains(string(e.Raw), `"workspace_id":"`+id+`"`)
	}
}

// TestWorkspaceLifecycle: create launches an agent in a new worktree whose
// edits land there, not in the main checkout; diff shows them; retire is
// refused while the agent runs and while the worktree is dirty, asks for
// confirmation for an unmerged branch without changing anything, and
// deletes it on delete_confirmed, keeping the head in the tombstone.
func TestWorkspaceLifecycle(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()

	ws := wsCreate(t, c, repo, "feature x")
	info := ws.Workspace
	if ws.AgentID == "" || ws.SessionID == "" || info.State != protocol.WorkspaceStateActive {
		t.Fatalf("create = %+v", ws)
	}
	if !strings.HasPrefix(info.WorkspaceID, "workspace-") || !strings.HasPrefix(info.Branch, "shard/feature-x-") ||
		info.IntegrationTarget != "main" || info.RepositoryCwd != repo || info.BaseSHA == "" {
		t.Fatalf("workspace = %+v", info)
	}
	root, _ := filepath.EvalSymlinks(h.cfg.WorktreeRoot())
	if !strings.HasPrefix(info.Cwd, root+string(filepath.Separator)) {
		t.Fatalf("worktree %s is not under the root %s", info.Cwd, root)
	}
	created := waitFor(t, c, isWorkspaceEvent(protocol.TypeWorkspaceCreated, info.WorkspaceID))
	if created.Msg.Head().ID != "" {
		t.Fatalf("workspace_created carries a correlation id: %s", created.Raw)
	}
	waitFor(t, c, func(e client.Event) bool {
		return isWorkspaceEvent(protocol.TypeWorkspaceAttached, info.WorkspaceID)(e) && strings.Contains(string(e.Raw), ws.SessionID)
	})
	if got := agentCwd(t, c, ws.AgentID); got != info.Cwd {
		t.Fatalf("agent cwd = %s, want the worktree %s", got, info.Cwd)
	}

	// The agent writes into its worktree.
	attach(t, c, ws.AgentID, "")
	prompt(t, c, ws.AgentID, `sim: tool write {"path":"f.txt","content":"x"}`)
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, ws.AgentID)).Msg.(*protocol.PermissionRequest)
	if _, err := c.Request(ctx(t), permResponse(ws.AgentID, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, ws.AgentID))
	if b, err := os.ReadFile(filepath.Join(info.Cwd, "f.txt")); err != nil || string(b) != "x" {
		t.Fatalf("f.txt in the worktree = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(repo, "f.txt")); !os.IsNotExist(err) {
		t.Fatalf("f.txt reached the main checkout: %v", err)
	}

	// Diff shows the untracked file.
	var d protocol.WorkspaceDiffData
	if err := c.Call(ctx(t), &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: info.WorkspaceID}, &d); err != nil {
		t.Fatalf("workspace.diff: %v", err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "f.txt" || d.Files[0].Status != protocol.DiffAdded || d.Stats.Additions != 1 ||
		len(d.Files[0].Hunks) != 1 || d.Files[0].Hunks[0].Lines[0].Text != "x" || d.BaseSHA != info.BaseSHA {
		t.Fatalf("diff = %+v", d)
	}
	// It names what it compared: this workspace's branch at its head (the
	// base: nothing is committed yet) against the integration target, and
	// the file is one git does not track yet.
	if d.WorkspaceID != info.WorkspaceID || d.Branch != info.Branch || d.IntegrationTarget != "main" || d.HeadSHA != info.BaseSHA ||
		!d.Files[0].Untracked || d.Files[0].Truncated || d.Truncated {
		t.Fatalf("diff header = %+v, file %+v", d, d.Files[0])
	}

	// List by the main checkout and by the worktree; status is live.
	for _, cwd := range []string{repo, info.Cwd} {
		var l protocol.WorkspaceListData
		if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, Cwd: cwd}, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Workspaces) != 1 || l.Workspaces[0].WorkspaceID != info.WorkspaceID || l.Workspaces[0].AgentIDs != nil {
			t.Fatalf("list %s = %+v", cwd, l)
		}
	}
	st := wsStatus(t, c, info.WorkspaceID)
	if st.Dirty == nil || !*st.Dirty || st.AgentCount != 1 || len(st.AgentIDs) != 1 || st.AgentIDs[0] != ws.AgentID {
		t.Fatalf("status = %+v", st)
	}

	// The agent's runtime is up: live.
	_, err := wsRetire(t, c, info.WorkspaceID, protocol.DispositionKeep)
	wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalLive)
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: ws.AgentID}, Force: true}); err != nil {
		t.Fatalf("agent.kill: %v", err)
	}
	eventually(t, "runtime stopped", func() bool {
		var l protocol.AgentListData
		err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: ws.AgentID}}, &l)
		return err == nil && (l.Agents[0].RuntimeState == protocol.RuntimeStopped || l.Agents[0].RuntimeState == protocol.RuntimeFailed)
	})
	// No runtime, but this connection still watches the agent: live.
	_, err = wsRetire(t, c, info.WorkspaceID, protocol.DispositionKeep)
	wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalLive)
	if _, err := c.Request(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: ws.AgentID}}); err != nil {
		t.Fatalf("agent.detach: %v", err)
	}

	// Untracked f.txt: dirty.
	_, err = wsRetire(t, c, info.WorkspaceID, protocol.DispositionKeep)
	if r := wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalDirty); len(r.Paths) != 1 || r.Paths[0] != "f.txt" || r.WorkspaceID != info.WorkspaceID {
		t.Fatalf("dirty refusal = %+v", r)
	}

	// Committed but not merged: confirmation required, nothing changes.
	runGit(t, info.Cwd, "add", "f.txt")
	runGit(t, info.Cwd, "commit", "-q", "-m", "f")
	head := runGit(t, info.Cwd, "rev-parse", "HEAD")
	_, err = wsRetire(t, c, info.WorkspaceID, protocol.DispositionDeleteIfMerged)
	r := wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalConfirmationRequired)
	if r.ConfirmationDisposition != protocol.DispositionDeleteConfirmed || r.WorkspaceID != info.WorkspaceID {
		t.Fatalf("confirmation refusal = %+v", r)
	}
	if !branchExists(t, repo, info.Branch) {
		t.Fatal("branch deleted by an unproven retire")
	}
	if _, err := os.Stat(info.Cwd); err != nil {
		t.Fatalf("worktree removed by an unproven retire: %v", err)
	}
	if st := wsStatus(t, c, info.WorkspaceID); st.State != protocol.WorkspaceStateActive || st.HeadSHA != head ||
		st.Ahead == nil || *st.Ahead != 1 || st.Behind == nil || *st.Behind != 0 {
		t.Fatalf("status after refusal = %+v (one commit ahead of main, none behind)", st)
	}
	if r.IntegrationTarget != "main" || r.Branch != info.Branch {
		t.Fatalf("confirmation refusal names branch %q and target %q", r.Branch, r.IntegrationTarget)
	}

	res, err := wsRetire(t, c, info.WorkspaceID, protocol.DispositionDeleteConfirmed)
	if err != nil {
		t.Fatalf("retire delete_confirmed: %v", err)
	}
	tomb := res.Workspace.Tombstone
	if !res.BranchDeleted || res.Proof != protocol.ProofConfirmed || res.Workspace.State != protocol.WorkspaceStateRetired ||
		tomb == nil || tomb.Branch != info.Branch || tomb.HeadSHA != head || !tomb.Deleted {
		t.Fatalf("retire = %+v (tombstone %+v)", res, tomb)
	}
	if branchExists(t, repo, info.Branch) {
		t.Fatal("branch survived delete_confirmed")
	}
	if _, err := os.Stat(info.Cwd); !os.IsNotExist(err) {
		t.Fatalf("worktree survived retire: %v", err)
	}
	waitFor(t, c, isWorkspaceEvent(protocol.TypeWorkspaceRetired, info.WorkspaceID))

	// Retired workspaces are listed only on request.
	var l protocol.WorkspaceListData
	if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}}, &l); err != nil || len(l.Workspaces) != 0 {
		t.Fatalf("list = %+v, %v", l, err)
	}
	if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, IncludeRetired: true}, &l); err != nil || len(l.Workspaces) != 1 {
		t.Fatalf("list include_retired = %+v, %v", l, err)
	}
}

// TestWorkspaceRetireKeepAndMerged: keep removes the worktree and keeps the
// branch; a branch merged into main is deleted with a proof.
func TestWorkspaceRetireKeepAndMerged(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()

	kept := wsCreate(t, c, repo, "kept").Workspace
	res, err := wsRetire(t, c, kept.WorkspaceID, protocol.DispositionKeep)
	if err != nil {
		t.Fatalf("retire keep: %v", err)
	}
	if res.BranchDeleted || res.Workspace.Tombstone == nil || res.Workspace.Tombstone.Deleted || !branchExists(t, repo, kept.Branch) {
		t.Fatalf("retire keep = %+v", res)
	}
	if _, err := os.Stat(kept.Cwd); !os.IsNotExist(err) {
		t.Fatalf("worktree survived retire keep: %v", err)
	}

	merged := wsCreate(t, c, repo, "merged").Workspace
	if err := os.WriteFile(filepath.Join(merged.Cwd, "g.txt"), []byte("g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, merged.Cwd, "add", "g.txt")
	runGit(t, merged.Cwd, "commit", "-q", "-m", "g")
	runGit(t, repo, "merge", "-q", "--no-ff", "-m", "merge", merged.Branch)
	res, err = wsRetire(t, c, merged.WorkspaceID, "") // default: delete_if_merged
	if err != nil {
		t.Fatalf("retire merged: %v", err)
	}
	if !res.BranchDeleted || res.Proof != protocol.ProofAncestor || branchExists(t, repo, merged.Branch) {
		t.Fatalf("retire merged = %+v", res)
	}
}

// TestWorkspaceCreateRefusals: typed refusals for what create cannot use.
func TestWorkspaceCreateRefusals(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	call := func(cmd *protocol.WorkspaceCreate) error {
		cmd.Header = protocol.Header{Type: protocol.TypeWorkspaceCreate}
		return c.Call(ctx(t), cmd, nil)
	}
	wantRefusal(t, call(&protocol.WorkspaceCreate{Cwd: shortTemp(t)}), protocol.CodeInvalidRequest, protocol.RefusalNotARepository)
	wantRefusal(t, call(&protocol.WorkspaceCreate{Cwd: repo, BaseRef: "no-such-ref"}), protocol.CodeInvalidRequest, protocol.RefusalBaseRefUnknown)
	runGit(t, repo, "branch", "taken")
	if r := wantRefusal(t, call(&protocol.WorkspaceCreate{Cwd: repo, Branch: "taken"}), protocol.CodeConflict, protocol.RefusalBranchExists); r.Branch != "taken" {
		t.Fatalf("branch_exists refusal = %+v", r)
	}
	var l protocol.WorkspaceListData
	if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, IncludeRetired: true}, &l); err != nil || len(l.Workspaces) != 0 {
		t.Fatalf("refused creates left records: %+v, %v", l, err)
	}
}

// TestWorkspaceSurvivesRestart: a workspace and its agents are durable; after
// a restart attach launches another agent in the same worktree, and a
// worktree deleted while the daemon was down is found missing.
func TestWorkspaceSurvivesRestart(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	keep := wsCreate(t, c, repo, "keep")
	lost := wsCreate(t, c, repo, "lost")
	h.d.Shutdown(false)
	if err := os.RemoveAll(lost.Workspace.Cwd); err != nil {
		t.Fatal(err)
	}

	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	if got := agentCwd(t, c2, keep.AgentID); got != keep.Workspace.Cwd {
		t.Fatalf("agent cwd after restart = %s, want %s", got, keep.Workspace.Cwd)
	}
	var at protocol.WorkspaceAttachData
	if err := c2.Call(ctx(t), &protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: keep.Workspace.WorkspaceID}, &at); err != nil {
		t.Fatalf("workspace.attach: %v", err)
	}
	if at.AgentID == keep.AgentID || at.Workspace.AgentCount != 2 || agentCwd(t, c2, at.AgentID) != keep.Workspace.Cwd {
		t.Fatalf("attach = %+v", at)
	}
	eventually(t, "the vanished worktree is missing", func() bool {
		var st protocol.WorkspaceStatusData
		err := c2.Call(ctx(t), &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: lost.Workspace.WorkspaceID}, &st)
		return err == nil && st.Workspace.State == protocol.WorkspaceStateMissing
	})
	err := c2.Call(ctx(t), &protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: lost.Workspace.WorkspaceID}, nil)
	wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalMissingAuthority)
}

func wsMerge(t *testing.T, c *client.Conn, id string, strategy protocol.MergeStrategy) (protocol.WorkspaceMergeData, error) {
	t.Helper()
	var data protocol.WorkspaceMergeData
	err := c.Call(ctx(t), &protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: id, Strategy: strategy}, &data)
	return data, err
}

// TestWorkspaceMerge: the review loop's end. A dirty main checkout and a
// conflict are refused with typed data and change nothing; a clean squash
// lands the workspace's commit on main, and the branch is then proven
// merged, so retire deletes it.
func TestWorkspaceMerge(t *testing.T) {
	repo := gitRepo(t)
	// Merge commits need an identity of the repository's own (the daemon
	// never invents one).
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()

	ws := wsCreate(t, c, repo, "feature").Workspace
	if err := os.WriteFile(filepath.Join(ws.Cwd, "f.txt"), []byte("feature\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, ws.Cwd, "add", "f.txt")
	runGit(t, ws.Cwd, "commit", "-q", "-m", "feature")
	mainHead := runGit(t, repo, "rev-parse", "HEAD")

	// A dirty main checkout: refused, nothing changes.
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("local edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := wsMerge(t, c, ws.WorkspaceID, protocol.MergeSquash)
	wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalMainDirty)
	if got := runGit(t, repo, "rev-parse", "HEAD"); got != mainHead {
		t.Fatalf("main moved on a refused merge: %s → %s", mainHead, got)
	}
	runGit(t, repo, "checkout", "--", "README")

	res, err := wsMerge(t, c, ws.WorkspaceID, protocol.MergeSquash)
	if err != nil {
		t.Fatalf("workspace.merge squash: %v", err)
	}
	if res.PreviousSHA != mainHead || res.MergedSHA == mainHead || res.MergedSHA != runGit(t, repo, "rev-parse", "HEAD") {
		t.Fatalf("merge = %+v (main head %s)", res, runGit(t, repo, "rev-parse", "HEAD"))
	}
	if res.Stats.Files != 1 || res.Stats.Additions != 1 {
		t.Fatalf("merge stats = %+v, want 1 file, 1 addition", res.Stats)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "f.txt")); err != nil || string(b) != "feature\n" {
		t.Fatalf("main checkout after the merge: f.txt = %q, %v", b, err)
	}
	ret, err := wsRetire(t, c, ws.WorkspaceID, protocol.DispositionDeleteIfMerged)
	if err != nil || !ret.BranchDeleted || branchExists(t, repo, ws.Branch) {
		t.Fatalf("retire after the squash = %+v, %v", ret, err)
	}

	// A conflict: refused with the path, main and the branch unchanged.
	other := wsCreate(t, c, repo, "conflict").Workspace
	if err := os.WriteFile(filepath.Join(other.Cwd, "README"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, other.Cwd, "commit", "-q", "-am", "theirs")
	branchHead := runGit(t, other.Cwd, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "commit", "-q", "-am", "ours")
	mainHead = runGit(t, repo, "rev-parse", "HEAD")
	_, err = wsMerge(t, c, other.WorkspaceID, protocol.MergeMerge)
	r := wantRefusal(t, err, protocol.CodeConflict, protocol.RefusalMergeConflict)
	if len(r.Paths) != 1 || r.Paths[0] != "README" {
		t.Fatalf("conflict refusal paths = %v, want [README]", r.Paths)
	}
	if got := runGit(t, repo, "rev-parse", "HEAD"); got != mainHead {
		t.Fatalf("main moved on a conflicting merge")
	}
	if got := runGit(t, other.Cwd, "rev-parse", "HEAD"); got != branchHead {
		t.Fatalf("branch moved on a conflicting merge")
	}
	if st := runGit(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("main checkout left dirty by a refused merge:\n%s", st)
	}
}
