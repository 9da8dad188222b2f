package workspaces_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
	"github.com/shard-dev/shard/workspaces/git"
)

// harness is a workspace actor on a real bbolt store and real git, with a
// probe actor as the registry (it records Adopt and answers AgentStates
// with states) and one client whose records land in an outbox; a second
// outbox on the Hub collects broadcasts.
type harness struct {
	t      *testing.T
	sys    *actor.ActorSystem
	ws     *actor.PID
	st     *store.Store
	root   string
	client *agent.Client
	out    *outbox.Outbox
	bcast  *outbox.Outbox
	adopts chan *registry.Adopt
	states chan map[string]protocol.AgentInfo // the probe answers from the latest value
	seq    int
	queued [][]byte // broadcasts read but not yet matched
}

func requireGit(t *testing.T) {
	t.Helper()
	testhost.Tool(t, "git")
}

func gitIn(t *testing.T, dir string, args ...string) string {
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

func newRepo(t *testing.T) string {
	t.Helper()
	requireGit(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "README")
	gitIn(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "shard.db"), store.Options{NoSync: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// start runs the actor on st (a fresh store when nil) and waits for its
// startup reconciliation.
func start(t *testing.T, st *store.Store, root string) *harness {
	t.Helper()
	return startDeps(t, st, root, nil)
}

// startDeps is start with a hook on the actor's Deps.
func startDeps(t *testing.T, st *store.Store, root string, mutate func(*workspaces.Deps)) *harness {
	t.Helper()
	requireGit(t)
	if st == nil {
		st = openStore(t)
	}
	if root == "" {
		root = filepath.Join(t.TempDir(), "worktrees")
	}
	discard := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }))
	h := &harness{t: t, sys: sys, st: st, root: root, out: outbox.New(outbox.Limits{}), bcast: outbox.New(outbox.Limits{}),
		adopts: make(chan *registry.Adopt, 16), states: make(chan map[string]protocol.AgentInfo, 1)}
	h.states <- nil
	reg := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *registry.Adopt:
			h.adopts <- m
		case *registry.AgentStates:
			cur := <-h.states
			h.states <- cur
			res := &registry.AgentStatesResult{}
			for _, id := range m.AgentIDs {
				if in, ok := cur[id]; ok {
					res.Infos = append(res.Infos, in)
				}
			}
			c.Respond(res)
		}
	}))
	hub := outbox.NewHub()
	hub.Add(h.bcast)
	group := &xsync.Group{}
	reconciled := make(chan error, 1)
	deps := workspaces.Deps{
		Store: st, Registry: reg, Group: group, Logger: discard, Hub: hub, Root: root,
		OnReconciled: func(err error) { reconciled <- err },
	}
	if mutate != nil {
		mutate(&deps)
	}
	h.ws = sys.Root.Spawn(workspaces.Props(deps))
	h.client = &agent.Client{ID: 1, PID: sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})), Out: h.out, Source: "unix"}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(h.ws).Wait()
		group.Close()
		sys.Shutdown()
	})
	select {
	case err := <-reconciled:
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reconciliation did not end")
	}
	return h
}

// call sends cmd as the registry would forward it and returns the response.
func (h *harness) call(cmd protocol.Command) protocol.Response {
	h.t.Helper()
	h.seq++
	raw := protocol.MustMarshal(cmd)
	var hdr protocol.Header
	if err := json.Unmarshal(raw, &hdr); err != nil {
		h.t.Fatal(err)
	}
	hdr.ID = fmt.Sprintf("c%d", h.seq)
	h.sys.Root.Send(h.ws, &registry.Command{Client: h.client, Header: hdr, Cmd: cmd, Raw: raw})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		recs, ok := h.out.Next(ctx)
		if !ok {
			h.t.Fatalf("no response to %s", hdr.Type)
		}
		for _, rec := range recs {
			var r protocol.Response
			if json.Unmarshal(rec, &r) == nil && r.ID == hdr.ID {
				return r
			}
		}
	}
}

func (h *harness) ok(cmd protocol.Command, data any) {
	h.t.Helper()
	r := h.call(cmd)
	if !r.Success {
		h.t.Fatalf("%T failed: %+v", cmd, r.Error)
	}
	if data != nil {
		if err := json.Unmarshal(r.Data, data); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) refused(cmd protocol.Command, kind protocol.WorkspaceRefusalKind) protocol.WorkspaceRefusal {
	h.t.Helper()
	r := h.call(cmd)
	if r.Success || r.Error == nil {
		h.t.Fatalf("%T succeeded, want refusal %s", cmd, kind)
	}
	ref, ok := protocol.WorkspaceRefusalOf(r.Error)
	if !ok || ref.Kind != kind || r.Error.Code != kind.Code() {
		h.t.Fatalf("%T error = %+v (refusal %+v), want kind %s", cmd, r.Error, ref, kind)
	}
	return ref
}

// broadcast waits for a broadcast of type typ.
func (h *harness) broadcast(typ string) []byte {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		for i, rec := range h.queued {
			var hd protocol.Header
			if json.Unmarshal(rec, &hd) == nil && hd.Type == typ {
				h.queued = h.queued[i+1:]
				return rec
			}
		}
		h.queued = nil
		recs, ok := h.bcast.Next(ctx)
		if !ok {
			h.t.Fatalf("no %s broadcast", typ)
		}
		h.queued = append(h.queued, recs...)
	}
}

func (h *harness) create(repo, label string) protocol.WorkspaceCreateData {
	h.t.Helper()
	var d protocol.WorkspaceCreateData
	h.ok(&protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo, Label: label}, &d)
	return d
}

func TestCreateRecordsAgentAndAdopts(t *testing.T) {
	repo := newRepo(t)
	h := start(t, nil, "")
	d := h.create(repo, "one")

	rec, err := h.st.GetWorkspace(d.Workspace.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != protocol.WorkspaceStateActive || len(rec.AgentIDs) != 1 || rec.AgentIDs[0] != d.AgentID ||
		rec.CreatedPath == nil || rec.CreatedPath.Ino == 0 || len(rec.CreatedPath.Token) != 32 || rec.CommonDir != filepath.Join(repo, ".git") {
		t.Fatalf("record = %+v", rec)
	}
	a, err := h.st.GetAgent(d.AgentID)
	if err != nil || a.Cwd != rec.WorktreePath || a.SessionID != d.SessionID || a.Mode != "build" {
		t.Fatalf("agent = %+v, %v", a, err)
	}
	select {
	case ad := <-h.adopts:
		if len(ad.Agents) != 1 || ad.Agents[0].AgentID != d.AgentID {
			t.Fatalf("adopt = %+v", ad)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no Adopt")
	}
	if got := gitIn(t, rec.WorktreePath, "rev-parse", "--abbrev-ref", "HEAD"); got != rec.Branch {
		t.Fatalf("worktree on %s, want %s", got, rec.Branch)
	}
	if !strings.Contains(string(h.broadcast(protocol.TypeWorkspaceCreated)), rec.WorkspaceID) {
		t.Fatal("workspace_created names another workspace")
	}
	att := h.broadcast(protocol.TypeWorkspaceAttached)
	if !strings.Contains(string(att), d.AgentID) || !strings.Contains(string(att), d.SessionID) {
		t.Fatalf("workspace_attached = %s", att)
	}
	if strings.Contains(string(att), ".git") {
		t.Fatalf("a projection leaks a git dir: %s", att)
	}

	// attach: another agent in the same worktree.
	var at protocol.WorkspaceAttachData
	h.ok(&protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: rec.WorkspaceID, Mode: "plan"}, &at)
	if at.AgentID == d.AgentID || at.Workspace.AgentCount != 2 {
		t.Fatalf("attach = %+v", at)
	}
	if a, err := h.st.GetAgent(at.AgentID); err != nil || a.Cwd != rec.WorktreePath || a.Mode != "plan" {
		t.Fatalf("attached agent = %+v, %v", a, err)
	}
}

func TestRetireRefusesLiveAndLocked(t *testing.T) {
	repo := newRepo(t)
	h := start(t, nil, "")
	d := h.create(repo, "live")
	id := d.Workspace.WorkspaceID
	retire := &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: id, BranchDisposition: protocol.DispositionKeep}

	<-h.states
	h.states <- map[string]protocol.AgentInfo{d.AgentID: {AgentID: d.AgentID, Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeRunning}}
	if r := h.refused(retire, protocol.RefusalLive); len(r.AgentIDs) != 1 || r.AgentIDs[0] != d.AgentID {
		t.Fatalf("live refusal = %+v", r)
	}
	<-h.states
	h.states <- map[string]protocol.AgentInfo{d.AgentID: {AgentID: d.AgentID, Status: protocol.StatusStreaming, RuntimeState: protocol.RuntimeRunning}}
	h.refused(retire, protocol.RefusalBusy)
	<-h.states
	h.states <- nil

	gitIn(t, repo, "worktree", "lock", "--reason", "testing", d.Workspace.Cwd)
	if r := h.refused(retire, protocol.RefusalLocked); !strings.Contains(r.Reason, "testing") {
		t.Fatalf("locked refusal = %+v", r)
	}
	gitIn(t, repo, "worktree", "unlock", d.Workspace.Cwd)
	var res protocol.WorkspaceRetireData
	h.ok(retire, &res)
	if res.Workspace.State != protocol.WorkspaceStateRetired {
		t.Fatalf("retire = %+v", res)
	}
	// A retired workspace accepts no new agent.
	if r := h.call(&protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: id}); r.Success || r.Error.Code != protocol.CodeConflict {
		t.Fatalf("attach to a retired workspace = %+v", r)
	}
}

func TestStatusOfVanishedWorktreeIsMissing(t *testing.T) {
	repo := newRepo(t)
	h := start(t, nil, "")
	d := h.create(repo, "gone")
	if err := os.RemoveAll(d.Workspace.Cwd); err != nil {
		t.Fatal(err)
	}
	var st protocol.WorkspaceStatusData
	h.ok(&protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: d.Workspace.WorkspaceID}, &st)
	if st.Workspace.State != protocol.WorkspaceStateMissing {
		t.Fatalf("status = %+v", st.Workspace)
	}
	h.broadcast(protocol.TypeWorkspaceConflict)
	h.refused(&protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach}, WorkspaceID: d.Workspace.WorkspaceID}, protocol.RefusalMissingAuthority)
	// Retiring a missing workspace only forgets it.
	var res protocol.WorkspaceRetireData
	h.ok(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: d.Workspace.WorkspaceID, BranchDisposition: protocol.DispositionDeleteConfirmed}, &res)
	if res.Workspace.State != protocol.WorkspaceStateRetired || res.BranchDeleted {
		t.Fatalf("retire of a missing workspace = %+v", res)
	}
}

func TestStartupReconciliation(t *testing.T) {
	repo := newRepo(t)
	st := openStore(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	head := gitIn(t, repo, "rev-parse", "HEAD")
	rec := func(id, state, path, branch string) store.Workspace {
		return store.Workspace{WorkspaceID: id, Ownership: protocol.OwnershipManaged, RepoRoot: repo, CommonDir: filepath.Join(repo, ".git"),
			WorktreePath: path, Branch: branch, BaseSHA: head, HeadSHA: head, IntegrationTarget: "main",
			State: protocol.WorkspaceState(state), CreatedAt: 1, UpdatedAt: 1}
	}
	// A create cut short before git ran; one cut short after it; an active
	// workspace whose worktree vanished.
	never := rec("workspace-never", "creating", filepath.Join(root, "never"), "shard/never")
	half := rec("workspace-half", "creating", filepath.Join(root, "half"), "shard/half")
	gone := rec("workspace-gone", "active", filepath.Join(root, "gone"), "shard/gone")
	gitIn(t, repo, "worktree", "add", "-q", "-b", "shard/half", half.WorktreePath, head)
	for _, r := range []store.Workspace{never, half, gone} {
		if err := st.CreateWorkspace(r); err != nil {
			t.Fatal(err)
		}
	}
	start(t, st, root)

	for _, id := range []string{never.WorkspaceID, half.WorkspaceID} {
		got, err := st.GetWorkspace(id)
		if err != nil || got.State != protocol.WorkspaceStateRetired || got.Tombstone == nil || got.Tombstone.HeadSHA != head {
			t.Fatalf("%s after reconcile = %+v, %v", id, got, err)
		}
	}
	if _, err := os.Stat(half.WorktreePath); !os.IsNotExist(err) {
		t.Fatalf("half-created worktree left behind: %v", err)
	}
	if out := gitIn(t, repo, "branch", "--list", "shard/half"); out != "" {
		t.Fatalf("half-created branch left behind: %q", out)
	}
	if got, err := st.GetWorkspace(gone.WorkspaceID); err != nil || got.State != protocol.WorkspaceStateMissing {
		t.Fatalf("vanished workspace after reconcile = %+v, %v", got, err)
	}
}

// TestDiffAndNothingToMerge: the diff shows the uncommitted change; a merge
// of a branch with no commit of its own is refused (CONFLICT, nothing to
// merge).
func TestDiffAndNothingToMerge(t *testing.T) {
	repo := newRepo(t)
	h := start(t, nil, "")
	d := h.create(repo, "diff")
	if err := os.WriteFile(filepath.Join(d.Workspace.Cwd, "README"), []byte("hi\nthere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var dd protocol.WorkspaceDiffData
	h.ok(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: d.Workspace.WorkspaceID}, &dd)
	if len(dd.Files) != 1 || dd.Files[0].Status != protocol.DiffModified || dd.Stats.Additions != 1 || dd.Stats.Deletions != 0 {
		t.Fatalf("diff = %+v", dd)
	}
	r := h.call(&protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge}, WorkspaceID: d.Workspace.WorkspaceID, Strategy: protocol.MergeMerge})
	if r.Success || r.Error.Code != protocol.CodeConflict || !strings.Contains(r.Error.Message, "nothing to merge") {
		t.Fatalf("merge = %+v", r)
	}
}

// failAdd runs real git but reports `worktree add` as failed after it ran:
// a create that broke with its worktree and branch made.
type failAdd struct{ git.Exec }

func (f *failAdd) Run(ctx context.Context, inv git.Invocation) ([]byte, error) {
	out, err := f.Exec.Run(ctx, inv)
	if err == nil && len(inv.Args) > 1 && inv.Args[0] == "worktree" && inv.Args[1] == "add" {
		return out, &git.Error{Args: inv.Args, ExitCode: 128, Stderr: "injected failure"}
	}
	return out, err
}

func TestCreateFailureRollsBack(t *testing.T) {
	repo := newRepo(t)
	h := startDeps(t, nil, "", func(d *workspaces.Deps) { d.Git = git.New(&failAdd{}) })
	r := h.call(&protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo, Label: "broken"})
	if r.Success || r.Error.Code != protocol.CodeInternal {
		t.Fatalf("create = %+v, want INTERNAL_ERROR", r)
	}
	all, err := h.st.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: true})
	if err != nil || len(all) != 1 {
		t.Fatalf("records = %+v, %v", all, err)
	}
	rec := all[0]
	if rec.State != protocol.WorkspaceStateRetired || rec.Tombstone == nil || !rec.Tombstone.Deleted ||
		!strings.Contains(rec.ConflictReason, "worktree removed") {
		t.Fatalf("record after rollback = %+v", rec)
	}
	if _, err := os.Stat(rec.WorktreePath); !os.IsNotExist(err) {
		t.Fatalf("worktree left behind: %v", err)
	}
	if out := gitIn(t, repo, "branch", "--list", rec.Branch); out != "" {
		t.Fatalf("branch left behind: %q", out)
	}
	if out := gitIn(t, repo, "worktree", "list", "--porcelain"); strings.Count(out, "worktree ") != 1 {
		t.Fatalf("worktrees after rollback:\n%s", out)
	}
}

// copy_files: listed files reach the new worktree (missing ones are
// skipped); an ignored copy does not make the worktree dirty for retire.
func TestCopyFiles(t *testing.T) {
	repo := newRepo(t)
	for name, body := range map[string]string{".gitignore": ".env\n", ".env": "SECRET=1\n"} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, repo, "add", ".gitignore")
	gitIn(t, repo, "commit", "-q", "-m", "ignore .env")
	h := startDeps(t, nil, "", func(d *workspaces.Deps) { d.CopyFiles = []string{".env", "missing.txt"} })
	d := h.create(repo, "copy")
	b, err := os.ReadFile(filepath.Join(d.Workspace.Cwd, ".env"))
	if err != nil || string(b) != "SECRET=1\n" {
		t.Fatalf(".env in the worktree = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(d.Workspace.Cwd, ".env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf(".env mode = %v, %v", fi, err)
	}
	var res protocol.WorkspaceRetireData
	h.ok(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: d.Workspace.WorkspaceID, BranchDisposition: protocol.DispositionKeep}, &res)
	if _, err := os.Stat(d.Workspace.Cwd); !os.IsNotExist(err) {
		t.Fatalf("worktree survived retire: %v", err)
	}
}

// A retire cut short after git removed the worktree (state retiring, no
// worktree) is finished by the next retire; the branch, which has a commit
// of its own, is kept: delete_if_merged proves again and fails.
func TestRetireFinishesAnInterruptedRetire(t *testing.T) {
	repo := newRepo(t)
	h := start(t, nil, "")
	d := h.create(repo, "cut")
	id := d.Workspace.WorkspaceID
	if err := os.WriteFile(filepath.Join(d.Workspace.Cwd, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, d.Workspace.Cwd, "add", "work.txt")
	gitIn(t, d.Workspace.Cwd, "commit", "-q", "-m", "work")
	work := gitIn(t, d.Workspace.Cwd, "rev-parse", "HEAD")
	if _, err := h.st.UpdateWorkspace(id, func(r *store.Workspace) error {
		r.State = protocol.WorkspaceStateRetiring
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "worktree", "remove", d.Workspace.Cwd)
	var res protocol.WorkspaceRetireData
	h.ok(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: id}, &res)
	if res.Workspace.State != protocol.WorkspaceStateRetired || res.BranchDeleted || res.Workspace.Tombstone == nil ||
		res.Workspace.Tombstone.HeadSHA != work {
		t.Fatalf("retire = %+v", res)
	}
	if out := gitIn(t, repo, "branch", "--list", d.Workspace.Branch); out == "" {
		t.Fatal("branch deleted without confirmation")
	}
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// setup_command runs in the new worktree with the workspace's id; a failing
// one rolls the create back, removing even the files it wrote.
func TestSetupCommand(t *testing.T) {
	testhost.Tool(t, "sh")
	repo := newRepo(t)
	ok := script(t, `printf %s "$SHARD_WORKSPACE_ID" > setup-ran`)
	h := startDeps(t, nil, "", func(d *workspaces.Deps) { d.SetupCommand = ok })
	d := h.create(repo, "setup")
	if b, err := os.ReadFile(filepath.Join(d.Workspace.Cwd, "setup-ran")); err != nil || string(b) != d.Workspace.WorkspaceID {
		t.Fatalf("setup-ran = %q, %v", b, err)
	}

	repo2 := newRepo(t)
	bad := script(t, "echo boom; touch junk; exit 3")
	h2 := startDeps(t, nil, "", func(d *workspaces.Deps) { d.SetupCommand = bad })
	r := h2.call(&protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo2, Label: "bad"})
	if r.Success || r.Error.Code != protocol.CodeConflict || !strings.Contains(r.Error.Message, "boom") {
		t.Fatalf("create with a failing setup = %+v", r)
	}
	all, err := h2.st.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: true})
	if err != nil || len(all) != 1 || all[0].State != protocol.WorkspaceStateRetired {
		t.Fatalf("records = %+v, %v", all, err)
	}
	if _, err := os.Stat(all[0].WorktreePath); !os.IsNotExist(err) {
		t.Fatalf("worktree of a failed setup left behind: %v", err)
	}
	if out := gitIn(t, repo2, "branch", "--list", all[0].Branch); out != "" {
		t.Fatalf("branch of a failed setup left behind: %q", out)
	}
	if n, err := h2.st.ListAgents(); err != nil || len(n) != 0 {
		t.Fatalf("agents after a failed setup = %+v, %v", n, err)
	}
}

// A worktree replaced behind the daemon's back (same path, same branch,
// a new directory) is unsafe to retire.
func TestRetireRefusesAReplacedWorktree(t *testing.T) {
	repo := newRepo(t)
	h := start(t, nil, "")
	d := h.create(repo, "swap")
	gitIn(t, repo, "worktree", "remove", d.Workspace.Cwd)
	gitIn(t, repo, "worktree", "add", "-q", d.Workspace.Cwd, d.Workspace.Branch)
	h.refused(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: d.Workspace.WorkspaceID,
		BranchDisposition: protocol.DispositionKeep}, protocol.RefusalUnsafe)
	if _, err := os.Stat(d.Workspace.Cwd); err != nil {
		t.Fatalf("a refused retire removed the worktree: %v", err)
	}
}
