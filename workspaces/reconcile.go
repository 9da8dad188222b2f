package workspaces

import (
	"context"
	"errors"
	"os"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// ---- startup reconciliation ----

// reconcile settles what a crash left (the cheap version): a creating
// record is rolled back (its worktree and branch removed only if still
// exactly what the create made) and retired with a tombstone; an active
// record whose worktree vanished becomes missing. Retiring records are
// left as they are (a retry of workspace.retire finishes them). Not done
// here: doctor reporting, sweeping worktrees under the root that no record
// holds.
func (w *worker) reconcile(ctx context.Context) error {
	all, err := w.deps.Store.ListWorkspaces(store.WorkspaceFilter{})
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range all {
		if rec.State != protocol.WorkspaceStateCreating && rec.State != protocol.WorkspaceStateActive {
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
				w.rollback(ctx, cur, "the daemon stopped during the create", false)
			case protocol.WorkspaceStateActive:
				if _, err := os.Stat(cur.WorktreePath); errors.Is(err, os.ErrNotExist) {
					w.markMissing(cur, "the worktree directory is gone")
				}
			}
		}()
	}
	return errors.Join(errs...)
}
