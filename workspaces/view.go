package workspaces

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
	"github.com/shard-dev/shard/workspaces/treediff"
)

// maxDiffBytes is the most hunk text a workspace.diff may ask for with
// max_bytes (a choice: 4 MiB fits one response record well under the
// gateway's 8 MiB outbox); without max_bytes the cap is
// treediff.DefaultMaxBytes (1 MiB).
const maxDiffBytes = 4 << 20

// ---- list and status ----

func (w *worker) list(ctx context.Context, req *protocol.WorkspaceList) *done {
	var commonDir string
	if req.Cwd != "" {
		// The repository of cwd, by its common dir: the same from the main
		// checkout and from every worktree, and readable even mid-rebase.
		out, err := w.deps.Git.Runner().Run(ctx, git.Invocation{Dir: req.Cwd, ReadOnly: true,
			Args: []string{"rev-parse", "--path-format=absolute", "--git-common-dir"}})
		if err != nil {
			return failed(refuse(protocol.RefusalNotARepository, "", fmt.Sprintf("%s is not inside a git repository", req.Cwd)))
		}
		if commonDir, err = filepath.EvalSymlinks(strings.TrimSpace(string(out))); err != nil {
			return failed(internal(err))
		}
	}
	all, err := w.deps.Store.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: req.IncludeRetired})
	if err != nil {
		return failed(internal(err))
	}
	out := []protocol.WorkspaceInfo{}
	for _, rec := range all {
		if commonDir == "" || rec.CommonDir == commonDir {
			out = append(out, rec.Info().Summary())
		}
	}
	return &done{data: protocol.WorkspaceListData{Workspaces: out}}
}

func (w *worker) status(ctx context.Context, req *protocol.WorkspaceStatus) *done {
	rec, err := w.get(req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	if rec.State != protocol.WorkspaceStateActive {
		return &done{data: protocol.WorkspaceStatusData{Workspace: rec.Info()}}
	}
	unlock, err := w.lock(ctx, rec.CommonDir)
	if err != nil {
		return failed(err)
	}
	defer unlock()
	if rec, err = w.get(req.WorkspaceID); err != nil {
		return failed(err)
	}
	g, repo := w.deps.Git, repoOf(rec)
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		d := w.markMissing(rec, "the worktree directory is gone")
		if cur, err := w.get(rec.WorkspaceID); err == nil {
			rec = cur
		}
		d.data = protocol.WorkspaceStatusData{Workspace: rec.Info()}
		return d
	}
	info := rec.Info()
	if head, err := g.BranchHead(ctx, repo, rec.Branch); err == nil {
		info.HeadSHA = head
		if head != rec.HeadSHA {
			if upd, err := w.deps.Store.UpdateWorkspace(rec.WorkspaceID, func(r *store.Workspace) error {
				r.HeadSHA, r.UpdatedAt = head, w.now()
				return nil
			}); err == nil {
				info = upd.Info()
			}
		}
		if rec.IntegrationTarget != "" {
			out, err := g.Runner().Run(ctx, git.Invocation{Dir: rec.RepoRoot, ReadOnly: true,
				Args: []string{"rev-list", "--left-right", "--count", "--end-of-options", rec.IntegrationTarget + "..." + head}})
			if err == nil {
				if f := strings.Fields(string(out)); len(f) == 2 {
					behind, e1 := strconv.Atoi(f[0])
					ahead, e2 := strconv.Atoi(f[1])
					if e1 == nil && e2 == nil {
						info.Ahead, info.Behind = &ahead, &behind
					}
				}
			}
		}
	}
	if st, err := g.Status(ctx, rec.WorktreePath); err == nil {
		dirty := !st.Clean()
		info.Dirty = &dirty
	}
	return &done{data: protocol.WorkspaceStatusData{Workspace: info}}
}

// ---- diff ----

func (w *worker) diff(ctx context.Context, req *protocol.WorkspaceDiff) *done {
	rec, err := w.get(req.WorkspaceID)
	if err != nil {
		return failed(err)
	}
	if rec.State == protocol.WorkspaceStateMissing {
		return failed(refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the workspace's worktree or repository is gone or moved"))
	}
	if rec.State != protocol.WorkspaceStateActive {
		return failed(protocol.Errorf(protocol.CodeConflict, "workspace %s is %s", rec.WorkspaceID, rec.State))
	}
	if fi, err := os.Stat(rec.WorktreePath); err != nil || !fi.IsDir() {
		return failed(refuse(protocol.RefusalMissingAuthority, rec.WorkspaceID, "the worktree directory is gone"))
	}
	run := w.deps.Git.Runner()
	out, err := run.Run(ctx, git.Invocation{Dir: rec.WorktreePath, ReadOnly: true,
		Args: []string{"rev-parse", "--verify", "--quiet", "HEAD^{commit}"}})
	if err != nil {
		return failed(internal(fmt.Errorf("worktree head: %w", err)))
	}
	head := strings.TrimSpace(string(out))
	base := rec.BaseSHA
	if rec.IntegrationTarget != "" {
		out, err = run.Run(ctx, git.Invocation{Dir: rec.WorktreePath, ReadOnly: true,
			Args: []string{"merge-base", "--end-of-options", head, rec.IntegrationTarget}})
		if err == nil {
			base = strings.TrimSpace(string(out))
		}
	}
	lim := int64(treediff.DefaultMaxBytes)
	if req.MaxBytes != nil {
		lim = min(*req.MaxBytes, maxDiffBytes)
	}
	res, err := treediff.Workspace(ctx, treediff.ExecRunner("", w.deps.Forks), rec.WorktreePath, base, treediff.Limits{MaxBytes: int(lim)})
	if err != nil {
		return failed(err)
	}
	data := protocol.WorkspaceDiffData{
		WorkspaceID: rec.WorkspaceID, Branch: rec.Branch, IntegrationTarget: rec.IntegrationTarget,
		BaseSHA: base, HeadSHA: head, Files: res.Files, Truncated: res.Truncated,
		Stats: protocol.DiffStats{Files: res.FileCount, Additions: res.Additions, Deletions: res.Deletions},
	}
	return &done{data: data}
}
