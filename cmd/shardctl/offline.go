package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Offline mode (--offline) reads shard.db directly, read-only, while the
// daemon is down: crash forensics. It projects the records exactly as the
// daemon's jobs.list, jobs.show and agent.list would (package jobs holds
// the daemon's projection; shardctl cannot link it, as it pulls in the
// actor system, so the few rules are mirrored here and the e2e tests hold
// the two outputs equal).

// offlineLockWait bounds the wait for the database's lock: a daemon holds
// it exclusively for as long as it runs, so waiting longer never helps.
const offlineLockWait = 500 * time.Millisecond

// daemonUpError says the daemon is running, so --offline cannot read.
type daemonUpError struct{ why string }

func (e *daemonUpError) Error() string {
	return "shardd is running (" + e.why + "); drop --offline to ask it"
}

// openOffline opens the database read-only. It refuses quickly, with exit
// 6, while a daemon answers on the socket or holds the file.
func (o *globalOptions) openOffline(ctx context.Context) (*store.Store, error) {
	path, err := o.dbPath()
	if err != nil {
		return nil, err
	}
	if sock, err := o.socketPath(); err == nil {
		dctx, cancel := context.WithTimeout(ctx, min(o.timeout, offlineLockWait))
		conn, err := client.Dial(dctx, sock)
		cancel()
		if err == nil {
			conn.Close()
			return nil, exitWith(exitDaemonUp, &daemonUpError{why: "it answers on " + sock}, false)
		}
	}
	st, err := store.Open(path, store.Options{ReadOnly: true, Timeout: offlineLockWait})
	switch {
	case errors.Is(err, store.ErrLocked):
		return nil, exitWith(exitDaemonUp, &daemonUpError{why: "it holds " + path}, false)
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("no database at %s (wrong --home?)", path)
	case err != nil:
		return nil, err
	}
	return st, nil
}

// withOffline opens the database, runs fn and closes it again.
func (o *globalOptions) withOffline(ctx context.Context, fn func(st *store.Store) error) error {
	st, err := o.openOffline(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

// offlineJobs answers a jobs.list from the records, as the daemon would.
func offlineJobs(st *store.Store, q *protocol.JobsList, now time.Time, lastSign func(*store.Run) int64) (protocol.JobsListData, error) {
	all, err := st.Jobs()
	if err != nil {
		return protocol.JobsListData{}, err
	}
	sort.Slice(all, func(a, b int) bool { return all[a].JobID > all[b].JobID }) // newest first
	out := protocol.JobsListData{Jobs: []protocol.OpJob{}}
	for _, j := range all {
		if q.ParentAgentID != "" && j.ParentAgentID != q.ParentAgentID {
			continue
		}
		if q.SinceMs != 0 && j.CreatedAt < q.SinceMs {
			continue
		}
		settleCrashed(&j, now, lastSign)
		v := view.OpView(&j, now)
		if q.State != "" && v.State != q.State {
			continue
		}
		if q.Stuck && !view.AnyStuck(v) {
			continue
		}
		out.Jobs = append(out.Jobs, v)
		if q.Limit > 0 && len(out.Jobs) == q.Limit {
			break
		}
	}
	return out, nil
}

// offlineShow resolves a handle as jobs.show does: a job id, a run id, an
// agent id (its current run, else its latest), or an alias (case-
// insensitive NFKC) that only one parent uses.
func offlineShow(st *store.Store, handle string, now time.Time, lastSign func(*store.Run) int64) (protocol.OpJob, error) {
	all, err := st.Jobs()
	if err != nil {
		return protocol.OpJob{}, err
	}
	sort.Slice(all, func(a, b int) bool { return all[a].JobID < all[b].JobID }) // oldest first
	// current is an agent's nonterminal run's job, else its latest run's.
	current := func(match func(r store.Run) bool) map[string]int {
		byAgent := map[string]int{} // agent id → index into all
		live := map[string]bool{}
		for i, j := range all {
			for _, r := range j.Runs {
				if !match(r) || live[r.AgentID] {
					continue
				}
				byAgent[r.AgentID] = i
				if !r.State.Terminal() {
					live[r.AgentID] = true
				}
			}
		}
		return byAgent
	}
	var found []int
	switch {
	case ids.HasPrefix(handle, ids.Job):
		for i, j := range all {
			if j.JobID == handle {
				found = append(found, i)
			}
		}
	case ids.HasPrefix(handle, ids.Run):
		for i, j := range all {
			if j.Run(handle) != nil {
				found = append(found, i)
			}
		}
	case ids.HasPrefix(handle, ids.Agent):
		if i, ok := current(func(r store.Run) bool { return r.AgentID == handle })[handle]; ok {
			found = append(found, i)
		}
	default:
		want := view.NormalizeAlias(handle)
		byAgent := current(func(r store.Run) bool { return r.Alias != "" && view.NormalizeAlias(r.Alias) == want })
		parents := map[string]bool{}
		for _, i := range byAgent {
			parents[all[i].ParentAgentID] = true
			found = append(found, i)
		}
		if len(parents) > 1 {
			return protocol.OpJob{}, protocol.Errorf(protocol.CodeConflict, "alias %q is used by %d parents; use a job, run or agent id", handle, len(parents))
		}
		sort.Ints(found)
		found = found[len(found)-min(len(found), 1):] // one parent: its latest agent of that name
	}
	if len(found) == 0 {
		return protocol.OpJob{}, protocol.Errorf(protocol.CodeNotFound, "no job for %q", handle)
	}
	settleCrashed(&all[found[0]], now, lastSign)
	return view.OpView(&all[found[0]], now), nil
}

// offlineAgent projects an agent manifest like agent.list. Without a daemon
// nothing runs: runtime_state is "stopped" and status is unknown (empty).
func offlineAgent(a store.Agent) protocol.AgentInfo {
	return protocol.AgentInfo{
		AgentID: a.AgentID, Name: a.Name, Cwd: a.Cwd, Model: a.Model, Provider: a.Provider, Mode: a.Mode,
		RuntimeState: protocol.RuntimeStopped, CreatedAt: a.CreatedAt, ParentAgentID: a.ParentAgentID,
		Alias: a.Alias, DefinitionName: a.DefinitionName, DisplayName: a.DisplayName, WorkspaceID: a.WorkspaceID,
		Title: a.Title, Tools: a.Tools, Skills: a.Skills,
	}
}

// settleCrashed shows a job as the next daemon start will record it: the
// daemon is down (--offline refuses otherwise), so a run the records still
// call starting or active is not running — the daemon stopped or crashed
// under it. It reads interrupted (cancelled when a stop was requested),
// ended at its agent's last sign of life, as jobs.Reconcile will make it;
// nothing is written. Without this, a crashed run showed as running with a
// clock ticking through the downtime.
func settleCrashed(j *store.Job, now time.Time, lastSign func(*store.Run) int64) {
	ms := now.UnixMilli()
	for i := range j.Runs {
		r := &j.Runs[i]
		if r.State != protocol.RunStarting && r.State != protocol.RunActive {
			continue
		}
		if r.StopRequestedAt != 0 {
			r.State, r.Error = protocol.RunCancelled, "cancelled; the daemon stopped before the stop finished"
		} else {
			r.State, r.Error = protocol.RunInterrupted, "interrupted: the daemon stopped while it ran"
		}
		end := max(r.StartedAt, r.StopRequestedAt, r.QueuedAt)
		if lastSign != nil {
			end = max(end, lastSign(r))
		}
		if end <= 0 || end > ms {
			end = ms
		}
		r.EndedAt = end
	}
	if j.EndedAt == 0 && view.Terminal(j) {
		for _, r := range j.Runs {
			j.EndedAt = max(j.EndedAt, r.EndedAt)
		}
	}
}

// offlineSigns is view.LastSignOfLife for the home's default layout
// (<home>/sessions, <home>/logs/agents).
func (o *globalOptions) offlineSigns(st *store.Store) func(*store.Run) int64 {
	home, err := o.homeDir()
	if err != nil {
		return nil
	}
	return view.LastSignOfLife(st, filepath.Join(home, "sessions"), filepath.Join(home, "logs", "agents"))
}
