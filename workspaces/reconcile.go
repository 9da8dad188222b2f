package workspaces

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
	"github.com/shard-dev/shard/workspaces/layout"
)

// ---- startup reconciliation ----

// reconcile settles what a crash (or the user, while the daemon was down)
// left, record by record under each repository's lock:
//
//   - creating: an isolated run's plan of which nothing was made stays
//     planned (stillPlanned; its queued run makes it later); any other
//     create is rolled back (its worktree and branch removed
//     only if still exactly what the create made) and the record retired
//     with a tombstone, or kept as conflict pointing at a worktree that
//     could not be removed;
//   - retiring: a retire whose worktree is gone is finished as it was asked
//     (RetireDisposition; a delete_if_merged proves again); one whose
//     worktree is still there is rolled back to active — git removed
//     nothing, and the client never had an answer;
//   - active: a repository that is gone or moved, or a worktree that
//     vanished, makes the record missing (commands on it then refuse
//     missing_authority; retire forgets it).
//
// Then sweep removes worktrees under the root that no record holds, when
// they are provably the daemon's and empty of work; the rest stays for
// shardctl doctor to report.
func (w *worker) reconcile(ctx context.Context) error {
	all, err := w.deps.Store.ListWorkspaces(store.WorkspaceFilter{})
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range all {
		switch rec.State {
		case protocol.WorkspaceStateCreating, protocol.WorkspaceStateRetiring, protocol.WorkspaceStateActive:
		default:
			continue
		}
		func() {
			unlock, err := w.lock(ctx, rec.CommonDir)
			if err != nil {
				errs = append(errs, err)
				return
			}
			defer unlock()
			cur, err := w.deps.Store.GetWorkspace(rec.WorkspaceID)
			if err != nil {
				errs = append(errs, err)
				return
			}
			switch cur.State {
			case protocol.WorkspaceStateCreating:
				if w.stillPlanned(ctx, cur) {
					// An isolated run's workspace committed with its job
					// and not yet made: nothing of it is on disk, so it
					// stays planned, and the run, still queued, makes it
					// when it starts after the restart — as a queued run
					// without a workspace would simply run later.
					return
				}
				w.rollback(ctx, cur, "the daemon stopped during the create", false)
			case protocol.WorkspaceStateRetiring:
				if d := w.settleRetiring(ctx, cur); d != nil && d.err != nil {
					errs = append(errs, fmt.Errorf("workspace %s: finish the retire: %w", cur.WorkspaceID, d.err))
				}
			case protocol.WorkspaceStateActive:
				if why := vanished(cur); why != "" {
					w.markMissing(cur, why)
				}
			}
		}()
	}
	if err := w.sweep(ctx); err != nil {
		errs = append(errs, fmt.Errorf("sweep the worktree root: %w", err))
	}
	return errors.Join(errs...)
}

// vanished says why an active record lost its authority ("" when it did
// not): the repository's common dir is gone (the repository was moved or
// deleted), or the worktree directory is.
func vanished(rec store.Workspace) string {
	if fi, err := os.Stat(rec.CommonDir); err != nil || !fi.IsDir() {
		return "missing_authority: the repository was moved or deleted"
	}
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		return "missing_authority: the worktree directory is gone"
	}
	return ""
}

// settleRetiring finishes or rolls back a retire a crash cut short.
func (w *worker) settleRetiring(ctx context.Context, rec store.Workspace) *done {
	if _, err := os.Lstat(rec.WorktreePath); errors.Is(err, os.ErrNotExist) {
		disp := rec.RetireDisposition
		if disp == "" {
			disp = protocol.DispositionKeep // an older record: keeping loses nothing
		}
		return w.finishInterrupted(ctx, rec, disp)
	}
	w.unretire(rec.WorkspaceID)
	w.deps.Logger.Warn("workspaces: interrupted retire rolled back", "workspace_id", rec.WorkspaceID)
	return nil
}

// sweep removes the worktrees under the root that no live record holds,
// when each is provably the daemon's — at our path for its repository,
// on a branch named as we name them, with our token in its admin dir (the
// one a retired record of that path remembers, if any) — and empty of
// work: clean (CheckRetire: linked back, not locked, no submodules, no
// dirt) and with no commit that no other branch holds (at a retired
// record's base, or contained in another local branch). The branch goes
// with it. Anything else is left alone (shardctl doctor reports it).
func (w *worker) sweep(ctx context.Context) error {
	root, err := filepath.EvalSymlinks(w.deps.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	cands, err := layout.Scan(root)
	if err != nil || len(cands) == 0 {
		return err
	}
	all, err := w.deps.Store.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: true})
	if err != nil {
		return err
	}
	live, retired := map[string]bool{}, map[string]store.Workspace{}
	for _, r := range all {
		if r.Live() {
			live[r.WorktreePath] = true
		} else {
			retired[r.WorktreePath] = r
		}
	}
	for _, c := range cands {
		if live[c.Path] || !c.Linked || c.Token == "" {
			continue
		}
		rec, known := retired[c.Path]
		if known && rec.CreatedPath != nil && rec.CreatedPath.Token != "" && rec.CreatedPath.Token != c.Token {
			continue
		}
		w.sweepOne(ctx, root, c, rec, known)
	}
	return nil
}

// sweepOne removes one unrecorded worktree if it is provably ours and
// empty of work (see sweep), under its repository's lock.
func (w *worker) sweepOne(ctx context.Context, root string, c layout.Candidate, rec store.Workspace, known bool) {
	g := w.deps.Git
	admin, err := layout.AdminDir(c.Path)
	if err != nil || filepath.Base(filepath.Dir(admin)) != "worktrees" {
		return
	}
	commonDir, err := filepath.EvalSymlinks(filepath.Dir(filepath.Dir(admin)))
	if err != nil {
		return
	}
	unlock, err := w.lock(ctx, commonDir)
	if err != nil {
		return
	}
	defer unlock()
	list, err := g.ListWorktrees(ctx, c.Path)
	if err != nil || len(list) == 0 || !list[0].Main {
		return
	}
	repo := git.Repo{Root: list[0].Path, CommonDir: commonDir}
	id := filepath.Base(c.Path)
	var wt git.Worktree
	for _, e := range list {
		if e.Path == c.Path {
			wt = e
		}
	}
	branch := wt.Branch
	switch {
	case wt.Path == "" || branch == "":
		return
	case layout.WorktreePath(root, repo.Root, id) != c.Path:
		return // not where we would have put a worktree of this repository
	case known && branch != rec.Branch:
		return
	case !known && (!strings.HasPrefix(branch, git.BranchPrefix) || !strings.HasSuffix(branch, shortID(id))):
		return // not a name we generate (a name the user chose needs the record)
	}
	if _, err := g.CheckRetire(ctx, repo, git.Recorded{Path: c.Path, Branch: branch}); err != nil {
		return
	}
	head, err := g.BranchHead(ctx, repo, branch)
	if err != nil || !(known && head == rec.BaseSHA) && !w.heldElsewhere(ctx, repo, branch, head) {
		return // it has commits of its own: work, not ours to drop
	}
	if err := g.RemoveWorktree(ctx, repo, c.Path, false); err != nil {
		w.deps.Logger.Warn("workspaces: unrecorded worktree not swept", "workspace_id", id, "err", err)
		return
	}
	if err := g.DeleteBranch(ctx, repo, branch, head, git.Deletion{Confirmed: true}); err != nil {
		w.deps.Logger.Warn("workspaces: branch of a swept worktree kept", "workspace_id", id, "err", err)
	}
	w.deps.Logger.Info("workspaces: swept an unrecorded worktree", "workspace_id", id)
}

// heldElsewhere reports whether another local branch contains head, so
// that deleting branch loses no commit.
func (w *worker) heldElsewhere(ctx context.Context, repo git.Repo, branch, head string) bool {
	out, err := w.deps.Git.Runner().Run(ctx, git.Invocation{Dir: repo.Root, ReadOnly: true,
		Args: []string{"for-each-ref", "--format=%(refname)", "--contains", head, "refs/heads/"}})
	if err != nil {
		return false
	}
	for _, ref := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ref != "" && ref != "refs/heads/"+branch {
			return true
		}
	}
	return false
}

// stillPlanned reports whether a creating record is an isolated run's plan
// (store.Workspace.JobID) of which nothing was made: no worktree directory
// and no branch. Anything else, or a repository that cannot be inspected,
// is a create cut short, rolled back by the caller.
func (w *worker) stillPlanned(ctx context.Context, rec store.Workspace) bool {
	if rec.JobID == "" {
		return false
	}
	if _, err := os.Lstat(rec.WorktreePath); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	repo, err := w.deps.Git.Inspect(ctx, rec.RepoRoot)
	if err != nil || repo.CommonDir != rec.CommonDir {
		return false
	}
	_, err = w.deps.Git.BranchHead(ctx, repo, rec.Branch)
	return errors.Is(err, git.ErrBranchNotFound)
}
