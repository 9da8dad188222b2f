package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/actorref"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/jobs/remote"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
)

// jobActor owns one job's record while the job is nonterminal and drives
// its runs. Its only I/O is its own record's transactions, done in Receive
// so that transitions are strictly ordered; they never block other actors.
type jobActor struct {
	store    *store.Store
	registry *actor.PID
	coord    *actor.PID
	// workspaces is the workspace actor: it makes the worktrees of
	// isolated runs and measures their diffs (isolation.go).
	workspaces *actor.PID
	log        *slog.Logger
	clock      clock.Clock

	job store.Job
	// requested marks runs whose admission was asked for.
	requested map[string]bool
	// timedOut marks runs whose deadline fired (they end timed_out).
	timedOut map[string]bool
	// deadlines are the pending deadline timers of live runs, stopped when
	// the run ends or the actor stops.
	deadlines map[string]clock.Timer
	// awaiting marks starting runs whose worktree is being made; they are
	// leased once it exists (Materialized).
	awaiting map[string]bool
	// claimed maps each run that asked for its worktree (Materialize, which
	// claims the workspace) to the workspace, until the run is terminal and
	// the claim is released (workspaces.Release).
	claimed map[string]string
	// ending holds the lease ends of isolated runs while their diff stat
	// is measured (DiffStatResult).
	ending map[string]*agent.LeaseEnded
	// remote is the cluster's run records on a cluster node (nil on a
	// single shardd); group runs the follow and the stop writes of
	// anywhere runs (anywhere.go), and unfollow ends the follow.
	remote   *remote.Runs
	group    *xsync.Group
	unfollow context.CancelFunc
	// fetching marks anywhere runs whose record ended while their branch
	// is fetched into their workspace; ended holds those records.
	fetching map[string]bool
	ended    map[string]records.RunRecord
	// timesWritten are the job's ended_at and stopped_at as last written
	// into its cluster record (recordTimes).
	timesWritten [2]int64
	// finished: the job is terminal and the coordinator was told (finish).
	finished bool
	sys      *actor.ActorSystem
	self     *actor.PID
}

func (j *jobActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		j.sys, j.self = c.ActorSystem(), c.Self()
		j.requested, j.timedOut, j.deadlines = map[string]bool{}, map[string]bool{}, map[string]clock.Timer{}
		j.awaiting, j.ending, j.claimed = map[string]bool{}, map[string]*agent.LeaseEnded{}, map[string]string{}
		j.fetching, j.ended = map[string]bool{}, map[string]records.RunRecord{}
		j.schedule(c)
		j.follow()
		j.recordTimes() // a write lost to a restart
	case *admitted:
		j.start(c, m.runID)
	case *agent.LeaseStarted:
		j.transition(c, m.RunID, []protocol.RunState{protocol.RunStarting}, protocol.RunActive, nil)
	case *agent.LeaseEnded:
		j.onEnded(c, m)
	case *workspaces.Materialized:
		if j.fetching[m.RunID] {
			j.onFetched(c, m)
			return
		}
		j.onMaterialized(c, m)
	case *remoteRun:
		j.onRemote(c, m)
	case *remoteStopped:
		j.onRemoteStopped(c, m)
	case *workspaces.DiffStatResult:
		j.onDiffStat(c, m)
	case *agent.LeaseStopping:
		j.onStopping(c, m)
	case *agent.LeaseSteered:
		j.onSteered(c, m)
	case *deadline:
		j.onDeadline(c, m.runID)
	case *stopReq:
		j.onStop(c, m)
	case *actor.Stopping:
		for id := range j.deadlines {
			j.stopDeadline(id)
		}
		if j.unfollow != nil {
			j.unfollow()
		}
	case *actor.Stopped:
		actorref.Release(c) // the coordinator's children may hold this PID
	case *actor.Restarting:
	default:
		j.log.Warn("job actor: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// schedule asks for admission of the runs that may start now: every queued
// run of a parallel/single job, the next queued step of a chain.
func (j *jobActor) schedule(c actor.Context) {
	if view.Terminal(&j.job) {
		j.finish(c)
		return
	}
	for i := range j.job.Runs {
		r := &j.job.Runs[i]
		if j.job.Strategy == protocol.StrategyChain {
			if r.State == protocol.RunCompleted {
				continue
			}
			if r.State == protocol.RunQueued && !j.requested[r.RunID] {
				j.requested[r.RunID] = true
				j.tell(c, &admitReq{jobID: j.job.JobID, runID: r.RunID})
			}
			return // one step at a time
		}
		if r.State == protocol.RunQueued && !j.requested[r.RunID] && !r.Anywhere {
			// An anywhere run is started by the node that claims it.
			j.requested[r.RunID] = true
			j.tell(c, &admitReq{jobID: j.job.JobID, runID: r.RunID})
		}
	}
}

// tell sends the coordinator a message of the family.
func (j *jobActor) tell(c actor.Context, m Message) { c.Send(j.coord, m) }

// stopDeadline stops a run's deadline timer, if any.
func (j *jobActor) stopDeadline(runID string) {
	if t := j.deadlines[runID]; t != nil {
		t.Stop()
		delete(j.deadlines, runID)
	}
}

func (j *jobActor) start(c actor.Context, runID string) {
	var task, agentID string
	var timeout time.Duration
	ok := j.transition(c, runID, []protocol.RunState{protocol.RunQueued}, protocol.RunStarting, func(r *store.Run) {
		now := j.clock.Now()
		r.StartedAt = now.UnixMilli()
		if r.TimeoutMs > 0 {
			r.Deadline = now.Add(time.Duration(r.TimeoutMs) * time.Millisecond).UnixMilli()
		}
		task, agentID, timeout = r.Task, r.AgentID, time.Duration(r.TimeoutMs)*time.Millisecond
	})
	if !ok {
		j.tell(c, &released{jobID: j.job.JobID, runID: runID}) // cancelled meanwhile
		return
	}
	if r := j.job.Run(runID); r != nil && r.Workspace != nil && j.workspaces != nil {
		// Its worktree first (isolation.go); the lease follows.
		j.awaiting[runID] = true
		j.claimed[runID] = r.Workspace.WorkspaceID
		c.Request(j.workspaces, &workspaces.Materialize{WorkspaceID: r.Workspace.WorkspaceID, RunID: runID, AgentID: agentID})
	} else {
		c.Send(j.registry, &agent.Route{AgentID: agentID, Msg: &agent.LeaseStart{RunID: runID, Task: task, Holder: j.self}})
	}
	if timeout > 0 {
		sys, self := j.sys, j.self
		var m Message = &deadline{runID: runID}
		j.deadlines[runID] = j.clock.AfterFunc(timeout, func() { sys.Root.Send(self, m) })
	}
}

func (j *jobActor) onEnded(c actor.Context, m *agent.LeaseEnded) {
	r := j.job.Run(m.RunID)
	if r == nil || r.State.Terminal() || j.ending[m.RunID] != nil {
		return
	}
	if r.Workspace != nil && j.workspaces != nil {
		// The diff stat goes into the run and its report (onDiffStat).
		j.ending[m.RunID] = m
		c.Request(j.workspaces, &workspaces.DiffStat{WorkspaceID: r.Workspace.WorkspaceID, RunID: m.RunID})
		return
	}
	j.endRun(c, m, nil)
}

// endRun commits the terminal transition of a run whose lease ended, with
// its workspace's diff stat when it has one.
func (j *jobActor) endRun(c actor.Context, m *agent.LeaseEnded, stat *protocol.DiffStats) {
	r := j.job.Run(m.RunID)
	if r == nil || r.State.Terminal() {
		return
	}
	to := protocol.RunFailed
	switch {
	case j.timedOut[m.RunID]:
		to = protocol.RunTimedOut
	case m.Completed:
		to = protocol.RunCompleted
	case m.Cancelled || r.StopRequestedAt != 0:
		to = protocol.RunCancelled
	}
	j.transition(c, m.RunID, []protocol.RunState{protocol.RunStarting, protocol.RunActive}, to, func(r *store.Run) {
		r.FinalText = m.FinalText
		if m.Usage != (protocol.RunUsage{}) {
			u := m.Usage
			r.Usage = &u
		}
		if to != protocol.RunCompleted {
			r.Error = m.Error
			if to == protocol.RunTimedOut {
				r.Error = "deadline exceeded"
			}
		}
		if m.StopStage != "" && m.StopStage != "none" {
			r.StopStage = m.StopStage
		}
		r.ExitStatus = m.ExitStatus
		if stat != nil && r.Workspace != nil {
			ws := *r.Workspace
			ws.DiffStat = stat
			r.Workspace = &ws
		}
	})
	j.stopDeadline(m.RunID)
	j.tell(c, &released{jobID: j.job.JobID, runID: m.RunID})
	if j.job.Strategy == protocol.StrategyChain && to != protocol.RunCompleted {
		j.haltChain(c, m.RunID)
	}
	j.schedule(c)
}

// haltChain cancels every queued step after a step that did not complete;
// they are never prompted.
func (j *jobActor) haltChain(c actor.Context, haltedBy string) {
	var queued []string
	for _, r := range j.job.Runs {
		if r.State == protocol.RunQueued {
			queued = append(queued, r.RunID)
		}
	}
	// Recorded even when it was the last step: which step halted the chain.
	j.cancelQueued(c, queued, haltedBy, "chain halted by "+haltedBy)
}

func (j *jobActor) cancelQueued(c actor.Context, runIDs []string, haltedBy, reason string) {
	before := j.job
	now := j.clock.Now().UnixMilli()
	updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
		var reports []store.Report
		for _, id := range runIDs {
			r := job.Run(id)
			if r == nil || r.State != protocol.RunQueued {
				continue
			}
			r.State, r.EndedAt, r.Error = protocol.RunCancelled, now, reason
			if reason == "cancelled" {
				r.StopRequestedAt = now
			}
			reports = append(reports, reportOf(job, r, now))
		}
		if haltedBy != "" && job.HaltedBy == "" {
			job.HaltedBy = haltedBy
		}
		endIfTerminal(job, now)
		return reports, nil
	})
	if err != nil {
		j.log.Error("cancel queued runs", "job_id", j.job.JobID, "err", err)
		return
	}
	j.job = updated
	for _, id := range runIDs {
		if r := before.Run(id); r != nil && r.State == protocol.RunQueued {
			j.tell(c, &runChanged{job: updated, runID: id, prev: protocol.RunQueued})
		}
	}
}

// onStopping records the escalation stage a live run's stop reached. A
// stop the job did not request (a deadline, a client's agent.kill) gets
// its request time here, so the run reads as stopping, and as stuck once
// the stop takes too long.
func (j *jobActor) onStopping(c actor.Context, m *agent.LeaseStopping) {
	r := j.job.Run(m.RunID)
	if r == nil || r.State.Terminal() || m.Stage == "" || m.Stage == "none" || r.StopStage == m.Stage {
		return
	}
	now := j.clock.Now().UnixMilli()
	updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
		r := job.Run(m.RunID)
		if r == nil || r.State.Terminal() {
			return nil, nil
		}
		if r.StopRequestedAt == 0 {
			r.StopRequestedAt = now
		}
		r.StopStage = m.Stage
		return nil, nil
	})
	if err != nil {
		j.log.Error("record stop stage", "run_id", m.RunID, "err", err)
		return
	}
	j.job = updated
	j.tell(c, &jobUpdated{job: updated})
}

// onSteered records a steer of a run and how it resolved
// (docs/protocol.md §10.3: a person's steer of a leased child is recorded
// against the run, as the parent's are). The run keeps the newest
// protocol.MaxRunSteers. A steer reaching a run already terminal is still
// recorded: it resolved conflict against that run.
func (j *jobActor) onSteered(c actor.Context, m *agent.LeaseSteered) {
	// The steer's answer waits for this (agent.SteerRecorded), whatever
	// happens here.
	defer c.Respond(&agent.SteerRecorded{})
	if j.job.Run(m.RunID) == nil {
		return
	}
	rec := m.Steer
	rec.At = j.clock.Now().UnixMilli()
	updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
		r := job.Run(m.RunID)
		if r == nil {
			return nil, nil
		}
		r.Steers = append(r.Steers, rec)
		if n := len(r.Steers) - protocol.MaxRunSteers; n > 0 {
			r.Steers = append([]protocol.RunSteer(nil), r.Steers[n:]...)
		}
		return nil, nil
	})
	if err != nil {
		j.log.Error("record steer", "run_id", m.RunID, "err", err)
		return
	}
	j.job = updated
	j.tell(c, &jobUpdated{job: updated})
}

func (j *jobActor) onDeadline(c actor.Context, runID string) {
	delete(j.deadlines, runID) // fired
	r := j.job.Run(runID)
	if r == nil || (r.State != protocol.RunStarting && r.State != protocol.RunActive) {
		return
	}
	if r.Anywhere {
		// Its node is asked to stop it; it ends timed out (mirror).
		j.timedOut[runID] = true
		j.log.Info("run deadline exceeded", "run_id", runID)
		j.stopRemote(c, nil, []string{runID})
		return
	}
	if j.awaiting[runID] {
		// Its worktree is still being made: the child was never leased.
		j.endUnleased(c, runID, protocol.RunTimedOut, "deadline exceeded")
		return
	}
	j.timedOut[runID] = true
	j.log.Info("run deadline exceeded", "run_id", runID)
	c.Send(j.registry, &agent.Route{AgentID: r.AgentID, Msg: &agent.LeaseStop{RunID: runID}})
}

// onStop cancels runs: queued ones at once (never spawned), starting and
// active ones through the child's escalation. Stopping an active chain step
// cancels the rest. A second stop is idempotent.
func (j *jobActor) onStop(c actor.Context, m *stopReq) {
	if j.anywhere() {
		j.onStopAnywhere(c, m)
		return
	}
	targets := m.runIDs
	if len(targets) == 0 {
		for _, r := range j.job.Runs {
			targets = append(targets, r.RunID)
		}
	}
	now := j.clock.Now().UnixMilli()
	var queued, live []string
	for _, id := range targets {
		r := j.job.Run(id)
		if r == nil {
			continue
		}
		switch r.State {
		case protocol.RunQueued:
			queued = append(queued, id)
		case protocol.RunStarting, protocol.RunActive:
			live = append(live, id)
		}
	}
	if len(live) > 0 {
		updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
			for _, id := range live {
				if r := job.Run(id); r != nil && r.StopRequestedAt == 0 {
					r.StopRequestedAt, r.StopStage = now, "abort"
				}
			}
			if job.StoppedAt == 0 {
				job.StoppedAt = now
			}
			return nil, nil
		})
		if err != nil {
			m.cmd.Client.Send(protocol.NewErrorResponse(m.cmd.Header.ID, m.cmd.Header.Type, fmt.Errorf("persist stop: %w", err)))
			return
		}
		j.job = updated
		j.tell(c, &jobUpdated{job: updated})
		for _, id := range live {
			r := j.job.Run(id)
			if j.awaiting[id] {
				// Never leased (its worktree is being made): cancelled here.
				j.endUnleased(c, id, protocol.RunCancelled, "cancelled")
				continue
			}
			c.Send(j.registry, &agent.Route{AgentID: r.AgentID, Msg: &agent.LeaseStop{RunID: id}})
		}
		if j.job.Strategy == protocol.StrategyChain {
			// The rest of the chain will never run.
			for _, r := range j.job.Runs {
				if r.State == protocol.RunQueued && !contains(queued, r.RunID) {
					queued = append(queued, r.RunID)
				}
			}
		}
	}
	haltedBy := ""
	if j.job.Strategy == protocol.StrategyChain && len(live) > 0 {
		haltedBy = live[0] // stopping the active step halts the chain
	}
	if len(queued) > 0 || haltedBy != "" {
		j.cancelQueued(c, queued, haltedBy, "cancelled")
	}
	// cancelled lists the runs this stop cancelled (queued ones) or whose
	// cancellation it accepted (live ones), never one an earlier stop
	// ended: a second stop reports nothing, whether or not the job still
	// runs (the coordinator answers the same once the job actor is gone).
	out := protocol.SubagentStopData{Cancelled: []protocol.CancelledRun{}}
	for _, id := range targets {
		if r := j.job.Run(id); r != nil && (contains(live, id) || contains(queued, id)) {
			out.Cancelled = append(out.Cancelled, protocol.CancelledRun{RunID: id, AgentID: r.AgentID, State: r.State})
		}
	}
	if len(m.runIDs) == 0 {
		out.JobID = j.job.JobID
	}
	m.cmd.Client.Send(protocol.NewResponse(m.cmd.Header.ID, m.cmd.Header.Type, out))
	j.schedule(c)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// transition applies a compare-and-set transition of one run, persists it
// (with a completion report when it is terminal) and tells the coordinator.
func (j *jobActor) transition(c actor.Context, runID string, from []protocol.RunState, to protocol.RunState, mutate func(*store.Run)) bool {
	var prev protocol.RunState
	now := j.clock.Now().UnixMilli()
	updated, err := j.store.UpdateJob(j.job.JobID, func(job *store.Job) ([]store.Report, error) {
		r := job.Run(runID)
		if r == nil {
			return nil, fmt.Errorf("%w: no run %s", store.ErrNotFound, runID)
		}
		prev = r.State
		okFrom := false
		for _, f := range from {
			okFrom = okFrom || r.State == f
		}
		if !okFrom || !view.CanTransition(r.State, to) {
			return nil, fmt.Errorf("%w: run %s is %s, not %v", store.ErrConflict, runID, r.State, from)
		}
		r.State = to
		if mutate != nil {
			mutate(r)
		}
		if !to.Terminal() {
			return nil, nil
		}
		r.EndedAt = now
		endIfTerminal(job, now)
		return []store.Report{reportOf(job, r, now)}, nil
	})
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			j.log.Error("run transition", "run_id", runID, "to", to, "err", err)
		}
		return false
	}
	j.job = updated
	j.tell(c, &runChanged{job: updated, runID: runID, prev: prev})
	if ws := j.claimed[runID]; ws != "" && to.Terminal() {
		// After Materialize, from this same actor: the workspace actor
		// sees the claim before its release.
		delete(j.claimed, runID)
		c.Send(j.workspaces, &workspaces.Release{WorkspaceID: ws, RunID: runID})
	}
	return true
}

func endIfTerminal(job *store.Job, now int64) {
	if job.EndedAt == 0 && view.Terminal(job) {
		job.EndedAt = now
	}
}

func reportOf(job *store.Job, r *store.Run, now int64) store.Report {
	return store.Report{
		RunID: r.RunID, JobID: job.JobID, ParentAgentID: job.ParentAgentID, AgentID: r.AgentID,
		Alias: r.Alias, Name: r.Name, State: r.State, Error: r.Error, FinalText: r.FinalText, CreatedAt: now,
		Workspace: r.Workspace,
	}
}

// finish tells the coordinator that the job is terminal; the coordinator
// ends this actor (onFinished), so that no command it forwarded is lost. A
// terminal job still answers what reaches it meanwhile (a second stop
// cancels nothing).
func (j *jobActor) finish(c actor.Context) {
	if j.finished {
		return
	}
	j.finished = true
	c.Send(j.coord, &finished{jobID: j.job.JobID})
}
