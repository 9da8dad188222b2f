package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/remote"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
)

// Runs any node may take (docs/protocol.md §13 "Runs on other nodes"). On
// a cluster node, the isolated runs of a single or parallel job whose
// repository has a remote "origin" are "anywhere" runs:
//
//   - create: the commit goroutine pushes each run's branch at the base
//     commit to origin and writes the job's and the runs' cluster records
//     (remote.Publish; the runs held off the claim queue), then commits
//     this node's job record as today, with
//     the runs marked Anywhere. The child agents are not committed here:
//     the node that claims a run hosts its child from the manifest in the
//     run's record. A failure of either write leaves nothing behind and
//     answers the create with the error.
//   - follow: the job actor never starts an anywhere run. It follows the
//     runs' records (remote.Follow, restarted when lost), puts each run
//     still waiting on the claim queue (only a committed job has a job
//     actor, so a create answered with an error never releases a run whose
//     record committed late), and mirrors each
//     change into its own record: the node that claimed a run, starting,
//     active, and the end with its final text, usage, error and diff
//     stat. The terminal transition commits the completion report in the
//     same transaction, as for a local run, and a record seen again finds
//     the run terminal: each run is reported once.
//   - end: before the terminal transition, the run's branch is fetched from
//     origin into its workspace here (workspaces.Materialize with Fetch),
//     so workspace.diff, workspace.merge and the review see its work.
//   - stop, deadline: a compare-and-set of the run's record
//     (remote.RequestStop): a run no node claimed is cancelled there, a
//     claimed one gets StopRequestedAt, which its node follows.
//   - a lost node: whoever declares it dead interrupts its runs in their
//     records; the follow mirrors them interrupted, reported once.
//   - a restart of this node: Reconcile leaves anywhere runs alone (they
//     did not run here), and the follow mirrors what happened meanwhile.

// Messages of the jobs family for anywhere runs.
type (
	// remoteRun: the follow delivered a run record (as it is now).
	remoteRun struct{ run records.RunRecord }
	// remoteStopped: the stop writes of a subagent.stop (cmd) or a
	// deadline (cmd nil) ended.
	remoteStopped struct {
		cmd     *registry.Command
		runIDs  []string
		results map[string]remote.StopResult
		err     error
	}
)

func (*remoteRun) isJobsMessage()     {}
func (*remoteStopped) isJobsMessage() {}

// publish publishes a job's isolated runs to the cluster when the
// repository has a remote "origin" (from the commit goroutine). It marks
// the runs Anywhere and returns the agents to commit on this node (none of
// the children: they live where their runs are claimed) and undo, for a
// local commit that fails after it. Without origin, the runs stay here
// and every agent is committed as today.
func publish(r *remote.Runs, job *store.Job, agents []store.Agent, recs []store.Workspace) ([]store.Agent, func(context.Context), error) {
	if r == nil || len(recs) == 0 {
		return agents, nil, nil
	}
	ctx := context.Background()
	origin, err := r.Origin(ctx, recs[0].RepoRoot)
	if err != nil || origin == "" {
		return agents, nil, err
	}
	// A node that just joined opens its records once the cluster has a
	// quorum: the create waits for them, a while.
	wctx, cancel := context.WithTimeout(ctx, remote.OpenWait)
	defer cancel()
	if r.Wait(wctx) == nil {
		return nil, nil, protocol.Errorf(protocol.CodeTimeout, "the cluster's records did not open in %s", remote.OpenWait)
	}
	children := map[string]store.Agent{}
	for _, a := range agents {
		children[a.AgentID] = a
	}
	branches := map[string]string{}
	for i := range job.Runs {
		run := &job.Runs[i]
		run.Anywhere, run.Node = true, ""
		if run.Workspace != nil {
			branches[run.RunID] = run.Workspace.Branch
		}
	}
	undo, err := r.Publish(ctx, remote.Publication{Job: *job, Children: children, RepoRoot: recs[0].RepoRoot,
		Remote: origin, Base: recs[0].BaseSHA, Branches: branches})
	if err != nil {
		return nil, nil, err
	}
	return nil, undo, nil
}

// relaunchRemote is subagent.relaunch of a child that lives on another
// node: its latest run prev was an anywhere run, so its manifest, session
// and worktree are on the node that claimed it (docs/protocol.md §13
// "Runs on other nodes"). The new job's one run is an anywhere run pinned
// to that node (remote.PublishRelaunch), bound here to the child's
// workspace as a one-node relaunch is (workspaceOf: it goes on in its
// workspace, on its branch, and a retired workspace refuses it), and
// followed and reported like any anywhere run. The commit goroutine
// publishes it, then commits the job here; a refusal there (the child's
// node unavailable) answers the relaunch and leaves nothing.
func (co *Coordinator) relaunchRemote(c actor.Context, cmd *registry.Command, m *protocol.SubagentRelaunch, agentID string, prev *store.Run) {
	var ws *protocol.RunWorkspace
	if prev.Workspace != nil {
		var err error
		if ws, err = co.workspaceBinding(prev.Workspace.WorkspaceID, prev.Workspace.Cwd); err != nil {
			fail(cmd, err)
			return
		}
		if ws != nil && ws.Branch == "" {
			ws.Branch = prev.Workspace.Branch
		}
	}
	prevJob := co.idx.jobOf(prev.RunID)
	now := co.deps.Clock.Now()
	job := store.Job{JobID: ids.New("job"), ParentAgentID: m.ParentAgentID, Strategy: protocol.StrategySingle,
		CreatedAt: now.UnixMilli(), Runs: []store.Run{{
			RunID: ids.New("run"), Name: prev.Name, AgentID: agentID, Alias: prev.Alias, Task: m.Task,
			State: protocol.RunQueued, QueuedAt: now.UnixMilli(), TimeoutMs: co.deps.Limits.RunTimeout.Milliseconds(),
			Workspace: ws, Anywhere: true,
		}}}
	// Index now so a concurrent relaunch of the same agent conflicts.
	co.idx.addLive(&job)
	st, sys, self, rem := co.deps.Store, co.sys, co.self, co.deps.Remote
	started := co.deps.Group.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), remote.OpenWait)
		defer cancel()
		undo, err := rem.PublishRelaunch(ctx, remote.Relaunch{Job: job, PrevJobID: prevJob, PrevRunID: prev.RunID})
		if err == nil {
			if _, err = st.CreateJobWorkspaces(job, nil, nil, nil); err != nil {
				undo(context.Background())
			}
		}
		sys.Root.Send(self, &createDone{cmd: cmd, job: job, err: err})
	})
	if !started {
		co.onCreated(c, &createDone{cmd: cmd, job: job, err: errStopping})
	}
}

// anywhere reports whether the job's runs are followed in the cluster.
func (j *jobActor) anywhere() bool {
	for _, r := range j.job.Runs {
		if r.Anywhere {
			return true
		}
	}
	return false
}

// follow starts following the job's run records, unless the job has
// none to follow. The follow ends with the actor (Stopping).
func (j *jobActor) follow() {
	if j.remote == nil || j.group == nil || !j.anywhere() || view.Terminal(&j.job) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sys, self, rem, jobID := j.sys, j.self, j.remote, j.job.JobID
	if !j.group.Go(func() {
		rem.Follow(ctx, jobID, func(run records.RunRecord) { sys.Root.Send(self, &remoteRun{run: run}) })
	}) {
		cancel()
		return
	}
	j.unfollow = cancel
}

// recordTimes writes the job's end and stop times into its cluster record
// (remote.RecordJobTimes) off the mailbox, when they changed since the
// last write this actor started: the parent's node owns them, as it owns
// the job. A write that fails is logged; the runs' records are what the
// nodes decide on, and the times are for whoever reads the job's record.
func (j *jobActor) recordTimes() {
	if j.remote == nil || j.group == nil || !j.anywhere() {
		return
	}
	times := [2]int64{j.job.EndedAt, j.job.StoppedAt}
	if times == j.timesWritten || times == [2]int64{} {
		return
	}
	j.timesWritten = times
	rem, jobID, log := j.remote, j.job.JobID, j.log
	j.group.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopWriteTimeout)
		defer cancel()
		if err := rem.RecordJobTimes(ctx, jobID, times[0], times[1]); err != nil {
			log.Warn("the job's end or stop was not written into its cluster record", "job_id", jobID, "err", err)
		}
	})
}

// onRemote mirrors a run's record into the job's record: a claim (its
// node), starting, active, or its end (after its branch is fetched).
func (j *jobActor) onRemote(c actor.Context, m *remoteRun) {
	rec := m.run
	r := j.job.Run(rec.RunID)
	if r == nil || !r.Anywhere || r.State.Terminal() || j.fetching[rec.RunID] {
		return
	}
	switch {
	case rec.State.Terminal():
		if ws := workspaceIDOf(r); ws != "" && j.workspaces != nil && rec.Git != nil && rec.Node != "" {
			// Its work first: the branch it pushed, into its workspace here.
			// A run a node took is brought even with no work pushed (its
			// head the base, or none: interrupted, failed), so that its
			// workspace is made (active, at the branch as origin has it),
			// as a local run's is once it started; only a run no node took
			// leaves its workspace planned, as a local queued run does.
			j.fetching[rec.RunID] = true
			j.ended[rec.RunID] = rec
			j.claimed[rec.RunID] = ws
			c.Request(j.workspaces, &workspaces.Materialize{WorkspaceID: ws, RunID: rec.RunID, AgentID: r.AgentID,
				Fetch: &workspaces.Fetch{Remote: rec.Git.Remote, Branch: rec.Git.Branch, Head: rec.Git.Head}})
			return
		}
		j.mirror(c, rec)
	case rec.State == protocol.RunStarting || rec.State == protocol.RunActive:
		if rec.State != r.State || rec.Node != r.Node {
			j.mirror(c, rec)
		} else if rec.StopStage != "" && rec.StopStage != r.StopStage {
			// A stop's escalation its node went through (a stuck stop
			// shows in jobs.list and jobs.show as a local run's does).
			j.update(func(r *store.Run) {
				r.StopStage = rec.StopStage
				if r.StopRequestedAt == 0 {
					r.StopRequestedAt = rec.StopRequestedAt
				}
			}, rec.RunID, c)
		}
		j.armRemoteDeadline(rec)
	default: // queued: claimed or not
		if rec.Node != r.Node {
			j.update(func(r *store.Run) { r.Node = rec.Node }, rec.RunID, c)
		}
	}
}

// onFetched ends a run whose branch was being fetched into its workspace:
// the work is here now, or it could not be brought (logged; the run still
// ends, its branch is on origin).
func (j *jobActor) onFetched(c actor.Context, m *workspaces.Materialized) {
	rec, ok := j.ended[m.RunID]
	delete(j.fetching, m.RunID)
	delete(j.ended, m.RunID)
	if !ok {
		return
	}
	if m.Err != nil {
		j.log.Warn("the run's branch was not brought into its workspace", "run_id", m.RunID, "err", m.Err)
	}
	j.mirror(c, rec)
}

// mirror commits a run record's state into the job's record as one
// transition from whatever this node last saw (a follow that was lost
// may skip states): with a terminal state, the run's outcome and its
// completion report, in one transaction, exactly once.
func (j *jobActor) mirror(c actor.Context, rec records.RunRecord) {
	to := rec.State
	if to == protocol.RunCancelled && j.timedOut[rec.RunID] {
		to = protocol.RunTimedOut // the stop was this node's deadline
	}
	var prev protocol.RunState
	now := j.clock.Now().UnixMilli()
	updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
		r := job.Run(rec.RunID)
		if r == nil {
			return nil, fmt.Errorf("%w: no run %s", store.ErrNotFound, rec.RunID)
		}
		prev = r.State
		if r.State.Terminal() || r.State == to && r.Node == rec.Node {
			return nil, fmt.Errorf("%w: run %s is %s", store.ErrConflict, rec.RunID, r.State)
		}
		r.State, r.Node = to, rec.Node
		r.StartedAt = max(r.StartedAt, rec.StartedAt)
		if rec.Deadline != 0 {
			r.Deadline = rec.Deadline
		} else if r.Deadline == 0 && r.TimeoutMs > 0 && r.StartedAt > 0 {
			r.Deadline = r.StartedAt + r.TimeoutMs
		}
		if rec.StopStage != "" {
			r.StopStage = rec.StopStage
		}
		if rec.StopRequestedAt != 0 && r.StopRequestedAt == 0 {
			r.StopRequestedAt = rec.StopRequestedAt
		}
		if !to.Terminal() {
			return nil, nil
		}
		r.FinalText, r.Usage, r.Error = rec.FinalText, rec.Usage, rec.Error
		if to == protocol.RunTimedOut {
			r.Error = "deadline exceeded"
		}
		if rec.Workspace != nil && rec.Workspace.DiffStat != nil && r.Workspace != nil {
			ws := *r.Workspace
			st := *rec.Workspace.DiffStat
			ws.DiffStat = &st
			r.Workspace = &ws
		}
		r.EndedAt = rec.EndedAt
		if r.EndedAt == 0 {
			r.EndedAt = now
		}
		endIfTerminal(job, now)
		return []store.Report{reportOf(job, r, now)}, nil
	})
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			j.log.Error("mirror a run's cluster record", "run_id", rec.RunID, "to", to, "err", err)
		}
		return
	}
	j.job = updated
	j.tell(c, &runChanged{job: updated, runID: rec.RunID, prev: prev})
	if !to.Terminal() {
		return
	}
	j.recordTimes()
	j.stopDeadline(rec.RunID)
	if ws := j.claimed[rec.RunID]; ws != "" {
		delete(j.claimed, rec.RunID)
		c.Send(j.workspaces, &workspaces.Release{WorkspaceID: ws, RunID: rec.RunID})
	}
	j.schedule(c)
}

// update persists a change of one run that is not a transition (the node
// that claimed it, a stop's stage) and shows it to jobs.list and
// subagent.status.
func (j *jobActor) update(mutate func(*store.Run), runID string, c actor.Context) {
	updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
		if r := job.Run(runID); r != nil && !r.State.Terminal() {
			mutate(r)
		}
		return nil, nil
	})
	if err != nil {
		j.log.Error("record a run's node or stop stage", "run_id", runID, "err", err)
		return
	}
	j.job = updated
	j.tell(c, &jobUpdated{job: updated})
}

// armRemoteDeadline starts the deadline timer of an anywhere run that
// started, from its start time as its node recorded it. The node running
// it bounds it too; this is the parent's node's own bound, a stop request
// when it passes (onDeadline).
func (j *jobActor) armRemoteDeadline(rec records.RunRecord) {
	if rec.TimeoutMs <= 0 || rec.StartedAt == 0 || j.deadlines[rec.RunID] != nil || j.timedOut[rec.RunID] {
		return
	}
	at := time.UnixMilli(rec.StartedAt).Add(time.Duration(rec.TimeoutMs) * time.Millisecond)
	sys, self := j.sys, j.self
	var m Message = &deadline{runID: rec.RunID}
	j.deadlines[rec.RunID] = j.clock.AfterFunc(max(0, at.Sub(j.clock.Now())), func() { sys.Root.Send(self, m) })
}

// stopWriteTimeout bounds the stop writes of one subagent.stop or
// deadline.
const stopWriteTimeout = 30 * time.Second

// stopRemote writes the stop of anywhere runs into their records off the
// mailbox; remoteStopped comes back (and answers cmd, when a client
// asked).
func (j *jobActor) stopRemote(c actor.Context, cmd *registry.Command, runIDs []string) {
	sys, self, rem, jobID := j.sys, j.self, j.remote, j.job.JobID
	now := j.clock.Now().UnixMilli()
	started := j.group != nil && rem != nil && j.group.Go(func() {
		out := &remoteStopped{cmd: cmd, runIDs: runIDs, results: map[string]remote.StopResult{}}
		// Bounded: a cluster without a quorum answers the stop with an
		// error rather than holding it (and the daemon's shutdown).
		ctx, cancel := context.WithTimeout(context.Background(), stopWriteTimeout)
		defer cancel()
		for _, id := range runIDs {
			res, err := rem.RequestStop(ctx, jobID, id, now, "cancelled")
			if err != nil {
				out.err = err
				break
			}
			out.results[id] = res
		}
		sys.Root.Send(self, out)
	})
	if !started {
		j.onRemoteStopped(c, &remoteStopped{cmd: cmd, runIDs: runIDs, err: errStopping})
	}
}

// onRemoteStopped records the stops written: a run cancelled in its
// record ends here at once (the follow finds it ended later), a stop
// requested is recorded on the run, which ends when its node ends it.
// A client's stop is answered now.
func (j *jobActor) onRemoteStopped(c actor.Context, m *remoteStopped) {
	var cancelled []string
	for _, id := range m.runIDs {
		res, ok := m.results[id]
		if !ok {
			continue
		}
		if res.Cancelled || res.Run.State.Terminal() {
			j.onRemote(c, &remoteRun{run: res.Run})
			if res.Cancelled {
				cancelled = append(cancelled, id)
			}
			continue
		}
		if res.Requested {
			now := res.Run.StopRequestedAt
			updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
				if r := job.Run(id); r != nil && !r.State.Terminal() && r.StopRequestedAt == 0 {
					r.StopRequestedAt, r.StopStage = now, res.Run.StopStage
				}
				if m.cmd != nil && job.StoppedAt == 0 {
					job.StoppedAt = now
				}
				return nil, nil
			})
			if err == nil {
				j.job = updated
				j.tell(c, &jobUpdated{job: updated})
				j.recordTimes()
			}
			cancelled = append(cancelled, id)
		}
	}
	if m.cmd == nil {
		if m.err != nil {
			j.log.Warn("a run's deadline passed, and its stop was not written", "err", m.err)
		}
		return
	}
	if m.err != nil && len(cancelled) == 0 {
		fail(m.cmd, m.err)
		return
	}
	out := protocol.SubagentStopData{Cancelled: []protocol.CancelledRun{}}
	for _, id := range cancelled {
		if r := j.job.Run(id); r != nil {
			out.Cancelled = append(out.Cancelled, protocol.CancelledRun{RunID: id, AgentID: r.AgentID, State: r.State})
		}
	}
	if stop, ok := m.cmd.Cmd.(*protocol.SubagentStop); ok && stop.Handle == j.job.JobID {
		out.JobID = j.job.JobID
	}
	reply(m.cmd, out)
}

// onStopAnywhere is subagent.stop of an anywhere job: the runs not ended
// yet, or already asked to stop, are stopped through their records.
func (j *jobActor) onStopAnywhere(c actor.Context, m *stopReq) {
	targets := m.runIDs
	if len(targets) == 0 {
		for _, r := range j.job.Runs {
			targets = append(targets, r.RunID)
		}
	}
	var live []string
	for _, id := range targets {
		if r := j.job.Run(id); r != nil && !r.State.Terminal() && r.StopRequestedAt == 0 {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		out := protocol.SubagentStopData{Cancelled: []protocol.CancelledRun{}}
		if len(m.runIDs) == 0 {
			out.JobID = j.job.JobID
		}
		reply(m.cmd, out)
		return
	}
	j.stopRemote(c, m.cmd, live)
}
