package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/layout"
)

// maxDoctorItems bounds how many workspaces or paths one finding names.
const maxDoctorItems = 5

// checkWorkspaces reports the workspaces that need a look: records whose
// worktree is missing (state missing, or an active record whose directory
// is gone), records stuck in creating or retiring (startup settles them,
// so while the daemon is stopped they mean it crashed; while it runs, an
// operation may be under way), records in conflict, and directories under
// the configured worktree root that sit where the daemon puts worktrees
// but that no live record holds (the daemon sweeps such a worktree at
// startup only when it is provably its own and empty of work). The records
// come from workspace.list while the daemon runs, else from the store read
// only. Every finding is a warning: nothing is lost, but a person should
// look (shardctl ws ls, ws retire).
func checkWorkspaces(r *doctorReport, ctx context.Context, home string, conn *client.Conn, up bool) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SHARD_HOME=") })
	env = append(env, "SHARD_HOME="+home)
	userHome, _ := os.UserHomeDir()
	cfg, err := config.Load(nil, env, userHome)
	if err != nil {
		r.add("workspaces", checkSkip, "the configuration does not load, so the worktree root is unknown")
		return
	}
	root := cfg.WorktreeRoot()
	recs, where, err := workspaceRecords(ctx, home, conn, up)
	if err != nil {
		r.add("workspaces", checkSkip, "cannot list the workspaces (%s): %v", where, err)
		return
	}
	if up {
		// A cluster node lists every node's workspaces; this home holds
		// only its own, and another node's paths mean nothing here.
		self := ownNode(ctx, conn)
		recs = slices.DeleteFunc(recs, func(ws protocol.WorkspaceInfo) bool { return !ownedBy(self, ws.Node) })
	}
	var missing, stuck, conflict []string
	claimed := map[string]bool{}
	for _, ws := range recs {
		claimed[ws.Cwd] = true
		switch ws.State {
		case protocol.WorkspaceStateMissing:
			missing = append(missing, ws.WorkspaceID)
		case protocol.WorkspaceStateActive:
			if fi, err := os.Stat(ws.Cwd); err != nil || !fi.IsDir() {
				missing = append(missing, ws.WorkspaceID+" ("+ws.Cwd+" is gone)")
			}
		case protocol.WorkspaceStateCreating, protocol.WorkspaceStateRetiring:
			stuck = append(stuck, ws.WorkspaceID+" ("+string(ws.State)+")")
		case protocol.WorkspaceStateConflict:
			conflict = append(conflict, ws.WorkspaceID)
		}
	}
	var unrecorded []string
	canonRoot, err := filepath.EvalSymlinks(root)
	if err == nil {
		cands, err := layout.Scan(canonRoot)
		if err != nil {
			r.add("workspaces", checkSkip, "cannot read the worktree root %s: %v", root, err)
			return
		}
		for _, c := range cands {
			if !claimed[c.Path] {
				what := c.Path
				if !c.Linked {
					what += " (not a git worktree)"
				}
				unrecorded = append(unrecorded, what)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.add("workspaces", checkSkip, "cannot read the worktree root %s: %v", root, err)
		return
	}
	var findings []string
	if len(missing) > 0 {
		findings = append(findings, fmt.Sprintf("%d with a missing worktree or repository: %s (shardctl ws retire ID forgets one)", len(missing), some(missing)))
	}
	if len(stuck) > 0 {
		hint := "the daemon settles them when it starts"
		if up {
			hint = "an operation may be under way; if they stay, restart shardd, which settles them"
		}
		findings = append(findings, fmt.Sprintf("%d stuck mid-operation: %s (%s)", len(stuck), some(stuck), hint))
	}
	if len(conflict) > 0 {
		findings = append(findings, fmt.Sprintf("%d in conflict: %s (shardctl ws show ID says why)", len(conflict), some(conflict)))
	}
	if len(unrecorded) > 0 {
		findings = append(findings, fmt.Sprintf("%d unrecorded under %s: %s (kept: not provably the daemon's, or holding work; remove with git worktree remove once checked)",
			len(unrecorded), root, some(unrecorded)))
	}
	if len(findings) > 0 {
		r.add("workspaces", checkWarn, "%s", strings.Join(findings, "; "))
		return
	}
	r.add("workspaces", checkOK, "%d live workspace(s), nothing unrecorded under %s", len(recs), root)
}

// workspaceRecords returns the live workspaces: from the daemon while it
// runs, else from the store, read only. where says which.
func workspaceRecords(ctx context.Context, home string, conn *client.Conn, up bool) ([]protocol.WorkspaceInfo, string, error) {
	if up {
		var data protocol.WorkspaceListData
		err := conn.Call(ctx, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}}, &data)
		return data.Workspaces, "workspace.list", err
	}
	path := filepath.Join(home, dbName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, path, nil
	}
	st, err := store.Open(path, store.Options{ReadOnly: true, Timeout: offlineLockWait})
	if err != nil {
		return nil, path, err
	}
	defer st.Close()
	all, err := st.ListWorkspaces(store.WorkspaceFilter{})
	if err != nil {
		return nil, path, err
	}
	out := make([]protocol.WorkspaceInfo, 0, len(all))
	for _, w := range all {
		out = append(out, w.Info())
	}
	return out, path, nil
}

// some joins the first few items, saying how many more there are.
func some(items []string) string {
	if len(items) <= maxDoctorItems {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:maxDoctorItems], ", ") + fmt.Sprintf(" and %d more", len(items)-maxDoctorItems)
}
