package workspaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// merge merges the workspace's branch into its integration target, checked
// out in the repository's main checkout (workspace.merge, an additive
// extension). git.Client.Merge refuses a dirty main checkout, the wrong
// branch, a conflict or a git operation in progress before anything
// changes, and moves the main checkout only by a fast-forward; this maps
// its refusals onto the wire's typed ones and records the branch's new
// head (a rebase moves it).
func (w *worker) merge(ctx context.Context, req *protocol.WorkspaceMerge) *done {
	rec, unlock, err := w.getLocked(ctx, req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	id := rec.WorkspaceID
	if rec.State == protocol.WorkspaceStateMissing {
		return failed(refuse(protocol.RefusalMissingAuthority, id, "the workspace's worktree or repository is gone or moved"))
	}
	if rec.State != protocol.WorkspaceStateActive {
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is %s", id, rec.State))
	}
	if rec.IntegrationTarget == "" {
		return failed(refuse(protocol.RefusalWrongBranch, id, "the workspace has no integration target"))
	}
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		return failed(refuse(protocol.RefusalMissingAuthority, id, "the worktree directory is gone"))
	}
	g, repo := w.deps.Git, repoOf(rec)
	res, err := g.Merge(ctx, repo, rec.Branch, rec.IntegrationTarget, git.MergeStrategy(req.Strategy), req.Message)
	if err != nil {
		return failed(mergeErr(id, err))
	}
	info := rec.Info()
	if upd, err := w.deps.Store.UpdateWorkspace(id, func(r *store.Workspace) error {
		r.HeadSHA, r.UpdatedAt = res.BranchHead, w.now()
		return nil
	}); err == nil {
		info = upd.Info()
	} else {
		w.deps.Logger.Warn("workspaces: record the branch head after a merge", "workspace_id", id, "err", err)
	}
	return &done{data: protocol.WorkspaceMergeData{
		Workspace: info, Strategy: req.Strategy, IntegrationTarget: rec.IntegrationTarget,
		PreviousSHA: res.TargetBefore, MergedSHA: res.TargetHead,
		Stats: w.numstat(ctx, rec.RepoRoot, res.TargetBefore, res.TargetHead),
	}}
}

// numstat counts what the target gained; a failure to count leaves zeros
// (the merge itself is done and reported).
func (w *worker) numstat(ctx context.Context, dir, from, to string) protocol.DiffStats {
	var st protocol.DiffStats
	out, err := w.deps.Git.Runner().Run(ctx, git.Invocation{Dir: dir, ReadOnly: true,
		Args: []string{"diff", "--numstat", "-z", "--no-renames", from, to, "--"}})
	if err != nil {
		return st
	}
	for _, rec := range strings.Split(string(out), "\x00") {
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			continue
		}
		st.Files++
		a, _ := strconv.Atoi(f[0]) // "-" for a binary file: 0
		d, _ := strconv.Atoi(f[1])
		st.Additions += a
		st.Deletions += d
	}
	return st
}

// mergeErr maps git.Client.Merge's refusals onto the wire's. Refusals with
// no kind of their own (nothing to merge, no committer identity, the
// target moved meanwhile) are CONFLICT with a reason.
func mergeErr(id string, err error) error {
	if ref, ok := errors.AsType[*git.MergeRefusal](err); ok {
		r := protocol.WorkspaceRefusal{WorkspaceID: id, Paths: ref.Paths, PathsTruncated: ref.Count > len(ref.Paths)}
		switch ref.Reason {
		case git.MergeReasonMainDirty:
			r.Kind, r.Reason = protocol.RefusalMainDirty, "the main checkout has uncommitted changes ("+ref.Detail+")"
		case git.MergeReasonWrongBranch:
			r.Kind, r.Reason = protocol.RefusalWrongBranch, "the main checkout is not on the integration target"
			if ref.Note != "" {
				r.Reason += " (it is on " + ref.Note + ")"
			}
		case git.MergeReasonConflict:
			r.Kind, r.Reason = protocol.RefusalMergeConflict, fmt.Sprintf("the merge would conflict in %d path(s)", max(ref.Count, len(ref.Paths)))
		case git.MergeReasonOperationInProgress:
			r.Kind, r.Reason = protocol.RefusalRepositoryBusy, "a "+ref.Detail+" is in progress"
		case git.MergeReasonWorkspaceDirty:
			r.Kind, r.Reason = protocol.RefusalDirty, "the worktree has uncommitted changes (a rebase needs a clean worktree)"
		case git.MergeReasonNothingToMerge:
			return protocol.Errorf(protocol.CodeConflict, "workspace %s: nothing to merge: the branch adds nothing to the integration target (%s)", id, ref.Detail)
		case git.MergeReasonNoIdentity:
			return protocol.Errorf(protocol.CodeConflict, "workspace %s: the repository has no committer identity (%s is not set)", id, ref.Detail)
		default:
			return internal(err)
		}
		if len(r.Paths) > protocol.MaxRefusalPaths {
			r.Paths, r.PathsTruncated = r.Paths[:protocol.MaxRefusalPaths], true
		}
		return r.Err()
	}
	switch {
	case errors.Is(err, git.ErrTargetMoved):
		return protocol.Errorf(protocol.CodeConflict, "workspace %s: the integration target or the branch moved during the merge; nothing was changed, retry: %w", id, err)
	case errors.Is(err, git.ErrBranchNotFound):
		return refuse(protocol.RefusalMissingAuthority, id, "the branch or the integration target is gone")
	case errors.Is(err, git.ErrOperationInProgress):
		return refuse(protocol.RefusalRepositoryBusy, id, "a git operation is in progress in the repository")
	}
	return internal(err)
}
