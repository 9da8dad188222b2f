package workspaces

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// ---- create ----

func (w *worker) create(ctx context.Context, req *protocol.WorkspaceCreate) *done {
	g := w.deps.Git
	repo, err := g.Inspect(ctx, req.Cwd)
	if err != nil {
		return failed(inspectErr(req.Cwd, err))
	}
	root, err := canonicalDir(w.deps.Root)
	if err != nil {
		return failed(internal(fmt.Errorf("worktree root: %w", err)))
	}
	unlock, err := w.lock(ctx, repo.CommonDir)
	if err != nil {
		return failed(err)
	}
	defer unlock()

	// Integration target: given (it must resolve), else the main
	// checkout's branch. A detached main checkout has none to default to:
	// refused as base_ref_unknown naming the field to give (a choice).
	target := req.IntegrationTarget
	if target == "" {
		if target, err = repo.RequireBranch(); err != nil {
			return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBaseRefUnknown,
				Reason: "the main checkout is on a detached HEAD; give integration_target"}.Err())
		}
	} else if _, err := g.ResolveCommit(ctx, repo.Root, target); err != nil {
		if errors.Is(err, git.ErrRefUnknown) {
			return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBaseRefUnknown, IntegrationTarget: target,
				Reason: fmt.Sprintf("integration_target %q does not name a commit", target)}.Err())
		}
		return failed(internal(err))
	}
	baseRef, baseSHA := req.BaseRef, repo.HEAD
	if baseRef != "" {
		if baseSHA, err = g.ResolveCommit(ctx, repo.Root, baseRef); err != nil {
			if errors.Is(err, git.ErrRefUnknown) {
				return failed(refuse(protocol.RefusalBaseRefUnknown, "", fmt.Sprintf("base_ref %q does not name a commit", baseRef)))
			}
			return failed(internal(err))
		}
	} else if baseRef = repo.CurrentBranch; baseRef == "" {
		baseRef = "HEAD"
	}
	id := ids.New(ids.Workspace)
	branch := req.Branch
	if branch == "" {
		branch = git.BranchName(req.Label, shortID(id))
	}
	if _, err := g.BranchHead(ctx, repo, branch); err == nil {
		return failed(protocol.WorkspaceRefusal{Kind: protocol.RefusalBranchExists, Branch: branch,
			Reason: fmt.Sprintf("branch %q already exists", branch)}.Err())
	}
	path := worktreePath(root, repo, id)
	if _, err := os.Lstat(path); err == nil {
		return failed(refuse(protocol.RefusalPathTaken, "", "the worktree path is taken"))
	}

	now := w.now()
	rec := store.Workspace{
		WorkspaceID: id, Label: req.Label, Ownership: protocol.OwnershipManaged,
		RepoRoot: repo.Root, CommonDir: repo.CommonDir, WorktreePath: path,
		Branch: branch, BaseRef: baseRef, BaseSHA: baseSHA, IntegrationTarget: target, HeadSHA: baseSHA,
		State: protocol.WorkspaceStateCreating, CreatedAt: now, UpdatedAt: now,
	}
	// The record first (durable): a crash from here on leaves a creating
	// record that startup reconciles.
	if err := w.deps.Store.CreateWorkspace(rec); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return failed(refuse(protocol.RefusalPathTaken, "", "the worktree path belongs to another workspace"))
		}
		return failed(internal(err))
	}
	w.step(StepCreateRecorded)
	rec, err = w.build(ctx, repo, rec)
	if err != nil {
		return failed(err)
	}
	built := rec
	ag := w.newAgent(rec.WorkspaceID, rec.WorktreePath, req.Name, req.Model, req.Provider, req.Mode, req.Title)
	rec, err = w.deps.Store.CreateWorkspaceAgent(id, ag)
	if err != nil {
		cur, gerr := w.deps.Store.GetWorkspace(id)
		if gerr != nil {
			cur = built
		}
		w.rollback(ctx, cur, "storing the workspace's agent failed", true)
		return failed(internal(err))
	}
	w.step(StepCreateAgent)
	return &done{
		data:   protocol.WorkspaceCreateData{AgentID: ag.AgentID, SessionID: ag.SessionID, Workspace: rec.Info()},
		adopt:  []store.Agent{ag},
		events: [][]byte{w.createdEvent(rec), w.attachedEvent(rec, ag)},
	}
}

// build makes the worktree of a creating record and activates it: git
// worktree add, copy_files, the setup command, the ownership marker, then
// the record active, in that order. On failure it rolls back what it made
// (rollback) and returns the refusal or error to answer with. The caller
// holds the repository's lock. workspace.create and an isolated subagent
// run (materialize) share it.
func (w *worker) build(ctx context.Context, repo git.Repo, rec store.Workspace) (store.Workspace, error) {
	g := w.deps.Git
	id, branch, path, baseSHA := rec.WorkspaceID, rec.Branch, rec.WorktreePath, rec.BaseSHA
	orig := rec // what is on disk is described by this until activation
	created, err := g.CreateWorktree(ctx, repo, path, branch, baseSHA)
	if err != nil {
		var why string
		if refusedBeforeChange(err) {
			// CreateWorktree refused before it changed anything: the branch
			// or path it names is not ours, so nothing on disk is touched.
			why = w.retireFailed(rec, "git refused the worktree", false)
		} else {
			why = w.rollback(ctx, rec, "git worktree add failed", true)
		}
		switch {
		case errors.Is(err, git.ErrBranchExists):
			return store.Workspace{}, protocol.WorkspaceRefusal{Kind: protocol.RefusalBranchExists, WorkspaceID: id, Branch: branch,
				Reason: fmt.Sprintf("branch %q already exists", branch)}.Err()
		case errors.Is(err, git.ErrInvalidBranchName):
			return store.Workspace{}, protocol.Errorf(protocol.CodeInvalidRequest, `field "branch": %q is not a valid branch name`, branch)
		case errors.Is(err, git.ErrRefUnknown):
			return store.Workspace{}, refuse(protocol.RefusalBaseRefUnknown, id, "base_ref does not name a commit")
		case errors.Is(err, git.ErrPathTaken):
			return store.Workspace{}, refuse(protocol.RefusalPathTaken, id, "the worktree path is taken")
		}
		return store.Workspace{}, internal(fmt.Errorf("create worktree (%s): %w", why, err))
	}
	w.step(StepCreateWorktree)
	if err := copyFiles(repo.Root, created.Path, w.deps.CopyFiles); err != nil {
		w.rollback(ctx, recWith(orig, created), "copying workspaces.copy_files failed", true)
		return store.Workspace{}, internal(err)
	}
	if err := w.setup(ctx, id, repo.Root, created.Path); err != nil {
		why := w.rollback(ctx, recWith(orig, created), "workspaces.setup_command failed", true)
		return store.Workspace{}, protocol.Errorf(protocol.CodeConflict, "%w (the create was rolled back: %s)", err, why)
	}
	w.step(StepCreateSetup)
	marker := &store.CreatedPath{Path: created.Path, CreatedAt: w.now()}
	if fi, err := os.Stat(created.Path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			marker.Dev, marker.Ino = uint64(st.Dev), st.Ino
		}
	}
	if tok, err := writeToken(created.Path); err == nil {
		marker.Token = tok
	} else {
		w.deps.Logger.Warn("workspaces: worktree token not written", "workspace_id", id, "err", err)
	}
	w.step(StepCreateToken)
	rec, err = w.deps.Store.UpdateWorkspace(id, func(r *store.Workspace) error {
		if r.State != protocol.WorkspaceStateCreating {
			return fmt.Errorf("%w: workspace %s is %s", store.ErrConflict, id, r.State)
		}
		r.WorktreePath, r.BaseSHA, r.HeadSHA = created.Path, created.Base, created.Base
		r.CreatedPath = marker
		r.State = protocol.WorkspaceStateActive
		r.UpdatedAt = w.now()
		return nil
	})
	if err != nil {
		w.rollback(ctx, recWith(orig, created), "recording the worktree failed", true)
		return store.Workspace{}, internal(err)
	}
	w.step(StepCreateActive)
	return rec, nil
}

// copyFiles copies each listed regular file from the main checkout into
// the new worktree, keeping its mode; missing files, symlinks and
// anything but a regular file are skipped, and a name that would leave
// either root is refused (config validates it already).
func copyFiles(from, to string, names []string) error {
	for _, name := range names {
		rel := filepath.Clean(name)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("copy_files: %q leaves the repository", name)
		}
		src := filepath.Join(from, rel)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("copy_files: %w", err)
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("copy_files: %w", err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("copy_files: %w", err)
		}
	}
	return nil
}

// maxSetupOutput bounds the setup command's output kept for the error.
const maxSetupOutput = 4 << 10

// setup runs Deps.SetupCommand in the new worktree, if one is configured.
func (w *worker) setup(ctx context.Context, id, repoRoot, dir string) error {
	argv := strings.Fields(w.deps.SetupCommand)
	if len(argv) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SHARD_WORKSPACE_ID="+id, "SHARD_WORKSPACE_CWD="+dir, "SHARD_REPOSITORY_CWD="+repoRoot)
	cmd.WaitDelay = 2 * time.Second
	var combined bytes.Buffer
	cmd.Stdout, cmd.Stderr = &combined, &combined
	err := w.deps.Forks.Run(cmd)
	out := combined.Bytes()
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		err = cerr // killed: its time ran out, or the daemon is stopping
	}
	if len(out) > maxSetupOutput {
		out = out[len(out)-maxSetupOutput:]
	}
	return fmt.Errorf("setup command %q failed: %w: %s", argv[0], err, strings.TrimSpace(string(out)))
}

// recWith is the record to roll back: what create first wrote, with the
// worktree path git made (canonical, possibly spelt differently).
func recWith(rec store.Workspace, created git.Created) store.Workspace {
	if created.Path != "" {
		rec.WorktreePath = created.Path
	}
	return rec
}

// rollback undoes a create that failed after its record was durable:
// it removes the worktree and the branch only if they are still exactly
// what the create made (the worktree registered at the recorded path on
// the recorded branch and clean, the branch at the base commit; git's own
// `worktree remove` without --force refuses anything else again), then
// retires the record with a tombstone saying nothing was kept. A worktree
// it cannot remove stays recorded: the record goes to conflict, pointing
// at it, with ConflictReason saying why, so no worktree is left without a
// record (retire takes it from there once the user looked). It returns
// what it did (also logged). The caller holds the repository's lock. A
// command the daemon's shutdown interrupted rolls nothing back: its record
// stays for startup reconciliation.
//
// ours says that only this create wrote into the worktree (git's checkout,
// copy_files, the setup command; no agent ever ran there), so that a
// dirty worktree is removed with --force: what makes it dirty is ours.
// Startup reconciliation passes false: after a crash nobody can say who
// touched it since, except that untracked copies of copy_files identical
// to the main checkout's are known to be the create's own (copiesOnly).
func (w *worker) rollback(ctx context.Context, rec store.Workspace, cause string, ours bool) string {
	if interrupted(ctx) {
		// The daemon is stopping and killed this command's processes:
		// the record stays creating, for startup reconciliation to roll
		// back as after a crash (a killed git proves nothing about what
		// is on disk).
		why := cause + "; interrupted by the daemon's shutdown, left to startup reconciliation"
		w.deps.Logger.Warn("workspaces: create interrupted", "workspace_id", rec.WorkspaceID, "why", why)
		return why
	}
	g, repo := w.deps.Git, repoOf(rec)
	notes := []string{cause}
	chk, err := g.CheckRetire(ctx, repo, git.Recorded{Path: rec.WorktreePath, Branch: rec.Branch})
	force := errors.Is(err, git.ErrDirty) && (ours || copiesOnly(rec.RepoRoot, rec.WorktreePath, w.deps.CopyFiles, chk.Status))
	left := ""
	switch {
	case err == nil || force:
		if err := g.RemoveWorktree(ctx, repo, rec.WorktreePath, force); err != nil {
			left = err.Error()
		} else {
			notes = append(notes, "worktree removed")
		}
	case errors.Is(err, git.ErrMissingAuthority):
		if _, serr := os.Lstat(rec.WorktreePath); serr == nil {
			left = err.Error() // the repository is gone or moved, the directory is not
		} else if g.RemoveWorktree(ctx, repo, rec.WorktreePath, false) == nil {
			// A registration whose directory is gone would keep the
			// branch checked out, so it goes first.
			notes = append(notes, "stale worktree registration removed")
		}
	default:
		left = err.Error()
	}
	if left != "" {
		notes = append(notes, "worktree left in place: "+left)
		return w.conflictFailed(rec, strings.Join(notes, "; "))
	}
	deleted := false
	if head, err := g.BranchHead(ctx, repo, rec.Branch); err == nil {
		if head == rec.BaseSHA {
			// Still at the base: it holds no work of anyone's.
			if err := g.DeleteBranch(ctx, repo, rec.Branch, head, git.Deletion{Confirmed: true}); err == nil {
				deleted = true
				notes = append(notes, "branch deleted")
			} else {
				notes = append(notes, "branch kept: "+err.Error())
			}
		} else {
			notes = append(notes, "branch kept: it moved off the base commit")
		}
	}
	return w.retireFailed(rec, strings.Join(notes, "; "), deleted)
}

// copiesOnly reports a status whose only dirt is untracked copies of
// copy_files entries with the main checkout's content: what the create
// itself wrote.
func copiesOnly(repoRoot, worktree string, names []string, st git.Status) bool {
	if len(st.Staged)+len(st.Unstaged)+len(st.Unmerged) > 0 || len(st.Untracked) == 0 {
		return false
	}
	listed := map[string]bool{}
	for _, n := range names {
		listed[filepath.ToSlash(filepath.Clean(n))] = true
	}
	for _, p := range st.Untracked {
		if !listed[p] {
			return false
		}
		a, err1 := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(p)))
		b, err2 := os.ReadFile(filepath.Join(worktree, filepath.FromSlash(p)))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

// conflictFailed records a failed create whose worktree could not be
// removed as conflict: the record keeps pointing at the worktree (and its
// branch), ConflictReason says what happened.
func (w *worker) conflictFailed(rec store.Workspace, why string) string {
	_, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
		r.WorktreePath = rec.WorktreePath
		r.State = protocol.WorkspaceStateConflict
		r.ConflictReason = "create failed: " + why
		r.UpdatedAt = w.now()
		return nil
	})
	if err != nil {
		why += "; record not updated: " + err.Error()
	}
	w.deps.Logger.Warn("workspaces: create not rolled back", "workspace_id", rec.WorkspaceID, "what", why)
	return why
}

// refusedBeforeChange reports a CreateWorktree refusal, which it makes
// before it changes anything.
func refusedBeforeChange(err error) bool {
	for _, s := range []error{git.ErrBranchExists, git.ErrInvalidBranchName, git.ErrRefUnknown, git.ErrPathTaken, git.ErrPathNotAbsolute} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// retireFailed retires the record of a failed create with a tombstone of
// its branch at the base commit, and ConflictReason saying what happened
// (a choice: the record is kept, not deleted, so the failure stays
// visible with include_retired). It returns that explanation.
func (w *worker) retireFailed(rec store.Workspace, why string, deleted bool) string {
	_, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
		r.State = protocol.WorkspaceStateRetired
		r.ConflictReason = "create failed: " + why
		r.RetiredAt, r.UpdatedAt = w.now(), w.now()
		r.Tombstone = &store.WorkspaceTombstone{Branch: r.Branch, HeadSHA: r.BaseSHA, Deleted: deleted}
		return nil
	})
	if err != nil {
		why += "; record not retired: " + err.Error()
	}
	w.deps.Logger.Warn("workspaces: create rolled back", "workspace_id", rec.WorkspaceID, "what", why)
	return why
}

// ---- attach ----

func (w *worker) attach(ctx context.Context, req *protocol.WorkspaceAttach) *done {
	rec, unlock, err := w.getLocked(ctx, req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	switch rec.State {
	case protocol.WorkspaceStateActive:
	case protocol.WorkspaceStateMissing:
		return failed(refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the workspace's worktree or repository is gone"))
	default:
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is %s", rec.WorkspaceID, rec.State))
	}
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		d := w.markMissing(rec, "the worktree directory is gone")
		d.err = refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the worktree directory is gone")
		return d
	}
	ag := w.newAgent(rec.WorkspaceID, rec.WorktreePath, req.Name, req.Model, req.Provider, req.Mode, req.Title)
	rec, err = w.deps.Store.CreateWorkspaceAgent(rec.WorkspaceID, ag)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is going away: %w", req.WorkspaceID, err))
		}
		return failed(internal(err))
	}
	return &done{
		data:   protocol.WorkspaceAttachData{AgentID: ag.AgentID, SessionID: ag.SessionID, Workspace: rec.Info()},
		adopt:  []store.Agent{ag},
		events: [][]byte{w.attachedEvent(rec, ag)},
	}
}
