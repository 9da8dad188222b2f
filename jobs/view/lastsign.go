package view

import (
	"os"
	"path/filepath"

	"github.com/shard-dev/shard/store"
)

// LastSignOfLife tells jobs.Reconcile (and shardctl's offline views) when a run's agent last did anything
// before the previous daemon went away: the newest modification time of
// the files its runtime writes as it works (the session directory's files,
// its stderr log). Reconcile ends an interrupted run there rather than at
// the restart, so a crash's downtime is not counted as the run's time.
// Unknown agents and unreadable files count as no sign (0).
func LastSignOfLife(st *store.Store, sessionsDir, agentLogDir string) func(*store.Run) int64 {
	return func(r *store.Run) int64 {
		var newest int64
		see := func(path string) {
			if fi, err := os.Stat(path); err == nil {
				newest = max(newest, fi.ModTime().UnixMilli())
			}
		}
		see(filepath.Join(agentLogDir, r.AgentID+".log"))
		a, err := st.GetAgent(r.AgentID)
		if err != nil {
			return newest
		}
		dir, ok := a.SessionPath(sessionsDir)
		if !ok {
			return newest
		}
		see(dir)
		if entries, err := os.ReadDir(dir); err == nil {
			for _, e := range entries {
				see(filepath.Join(dir, e.Name()))
			}
		}
		return newest
	}
}
