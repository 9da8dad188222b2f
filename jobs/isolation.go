package jobs

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
)

// Isolated runs (subagent.create isolation "workspace", docs/protocol.md
// §10.3). The workspace actor owns the workspaces (workspaces/isolation.go);
// the jobs side is:
//
//   - create: the commit goroutine asks for a plan (one workspace per run
//     of a single or parallel job, one for a whole chain), binds each run
//     and its child agent to its workspace (the agent's cwd is the
//     worktree), and commits the workspace records in the job's own
//     transaction (store.CreateJobWorkspaces). A refusal (the parent's cwd
//     is not in a git repository, …) answers the create and writes
//     nothing.
//   - start: a run bound to a workspace moves queued → starting, then asks
//     the workspace actor to make the worktree (Materialize), and leases
//     the child only once it exists; a failure ends the run failed with
//     the refusal's text. A chain's later steps find the workspace active.
//   - end: when the child's lease ends, the job actor asks for the
//     workspace's diff stat, then commits the terminal transition with the
//     stat in the run and in its completion report.
//   - claim: the Materialize of a run's start claims the workspace, and
//     the run's terminal transition releases it (workspaces.Release, sent
//     by the job actor after its Materialize, so never overtaking it).
//   - retire: the workspace actor refuses busy while a run holds a claim
//     (decided under the repository's lock, like Materialize, so a retire
//     and a run start never both win: workspaces/claims.go), and asks the
//     coordinator which of the workspace's agents have a run in flight
//     (RunsInFlight: a queued chain step has no claim yet).
//   - relaunch: a child whose workspace is retired or retiring is refused
//     at once with the typed refusal "retired" (workspaceOf).

// planMaxWait bounds how long a create waits for its plan (the workspace
// actor holds plans until its startup reconciliation ended).
const planMaxWait = 2 * time.Minute

// planOf is the plan of a job's workspaces: one per run, or one for a
// chain (its steps continue in one worktree, in order).
func planOf(job *store.Job, cwd string) *workspaces.Plan {
	p := &workspaces.Plan{Cwd: cwd, JobID: job.JobID}
	if job.Strategy == protocol.StrategyChain {
		p.Labels = []string{job.Runs[0].Name}
		return p
	}
	for _, r := range job.Runs {
		p.Labels = append(p.Labels, r.Name)
	}
	return p
}

// askPlan asks the workspace actor for a plan (from a goroutine of the
// daemon's group, never from the mailbox).
func askPlan(sys *actor.ActorSystem, ws *actor.PID, p *workspaces.Plan) ([]store.Workspace, error) {
	res, err := sys.Root.RequestFuture(ws, p, planMaxWait).Result()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeTimeout, "planning the run workspaces: %w", err)
	}
	planned, ok := res.(*workspaces.Planned)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInternal, "the workspace actor answered %T", res)
	}
	if planned.Err != nil {
		return nil, planned.Err
	}
	if len(planned.Workspaces) != len(p.Labels) {
		return nil, protocol.Errorf(protocol.CodeInternal, "planned %d workspaces, asked for %d", len(planned.Workspaces), len(p.Labels))
	}
	return planned.Workspaces, nil
}

// bindWorkspaces binds each run, and its new child agent, to its
// workspace: run i to recs[i], or every chain step to recs[0]. The
// agent's cwd becomes the worktree and the record lists the agent.
func bindWorkspaces(job *store.Job, agents []store.Agent, recs []store.Workspace) {
	byAgent := map[string]*store.Agent{}
	for i := range agents {
		byAgent[agents[i].AgentID] = &agents[i]
	}
	for i := range job.Runs {
		r := &job.Runs[i]
		ws := &recs[0]
		if job.Strategy != protocol.StrategyChain {
			ws = &recs[i]
		}
		r.Workspace = &protocol.RunWorkspace{WorkspaceID: ws.WorkspaceID, Branch: ws.Branch, Cwd: ws.WorktreePath}
		if a := byAgent[r.AgentID]; a != nil {
			a.Cwd, a.WorkspaceID = ws.WorktreePath, ws.WorkspaceID
		}
		ws.AgentIDs = append(ws.AgentIDs, r.AgentID)
	}
}

// isRefusal reports an error that is already a protocol error (a plan's
// typed refusal): the create answers with it as it is.
func isRefusal(err error) bool {
	_, ok := errors.AsType[*protocol.Error](err)
	return ok
}

func workspaceIDOf(r *store.Run) string {
	if r.Workspace == nil {
		return ""
	}
	return r.Workspace.WorkspaceID
}

// workspaceOf is the workspace binding of a relaunched child: it goes on
// working in its workspace (its cwd is the worktree), never elsewhere. A
// workspace retired or being retired refuses the relaunch with the typed
// refusal "retired", a missing one with "missing_authority". This check is
// early, not the guarantee: a retire that wins after it is caught at the
// run's start, under the repository's lock (workspaces/claims.go), and the
// run ends failed with the same refusal.
func (co *Coordinator) workspaceOf(am store.Agent) (*protocol.RunWorkspace, error) {
	return co.workspaceBinding(am.WorkspaceID, am.Cwd)
}

// workspaceBinding is workspaceOf for workspace id, whose worktree here
// is cwd ("" id: none).
func (co *Coordinator) workspaceBinding(id, cwd string) (*protocol.RunWorkspace, error) {
	if id == "" {
		return nil, nil
	}
	b := &protocol.RunWorkspace{WorkspaceID: id, Cwd: cwd}
	rec, err := co.deps.Store.GetWorkspace(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// A record gone (none is ever deleted today) counts as retired.
		return nil, workspaces.RetiredRefusal(id, protocol.WorkspaceStateRetired)
	case err != nil:
		return nil, protocol.Errorf(protocol.CodeInternal, "read workspace %s: %w", id, err)
	}
	switch rec.State {
	case protocol.WorkspaceStateRetired, protocol.WorkspaceStateRetiring:
		return nil, workspaces.RetiredRefusal(rec.WorkspaceID, rec.State)
	case protocol.WorkspaceStateMissing:
		return nil, protocol.WorkspaceRefusal{Kind: protocol.RefusalMissingAuthority, WorkspaceID: rec.WorkspaceID,
			Reason: "the workspace's worktree or repository is gone"}.Err()
	}
	b.Branch = rec.Branch
	return b, nil
}

// runsInFlight answers the workspace actor's question before a retire.
func (co *Coordinator) runsInFlight(m *workspaces.RunsInFlight) *workspaces.RunsInFlightResult {
	out := &workspaces.RunsInFlightResult{Runs: map[string]string{}}
	for _, a := range m.AgentIDs {
		if r := co.idx.liveRun(a); r != nil {
			out.Runs[a] = r.RunID
		}
	}
	return out
}

// ---- the job actor's side ----

// onMaterialized leases the child of a starting run once its worktree
// exists, or ends the run failed when it cannot be made.
func (j *jobActor) onMaterialized(c actor.Context, m *workspaces.Materialized) {
	if !j.awaiting[m.RunID] {
		return // stopped or timed out meanwhile
	}
	delete(j.awaiting, m.RunID)
	r := j.job.Run(m.RunID)
	if r == nil || r.State != protocol.RunStarting {
		return
	}
	if m.Err != nil {
		j.log.Warn("run workspace not made", "run_id", m.RunID, "err", m.Err)
		j.endUnleased(c, m.RunID, protocol.RunFailed, "the run's workspace could not be made: "+m.Err.Error())
		return
	}
	c.Send(j.registry, &agent.Route{AgentID: r.AgentID, Msg: &agent.LeaseStart{RunID: r.RunID, Task: r.Task, Holder: j.self}})
}

// onDiffStat ends an isolated run whose lease ended, with its
// workspace's diff stat (none when it could not be measured: the run
// still ends, and its report says so).
func (j *jobActor) onDiffStat(c actor.Context, m *workspaces.DiffStatResult) {
	le := j.ending[m.RunID]
	if le == nil {
		return
	}
	delete(j.ending, m.RunID)
	var stat *protocol.DiffStats
	if m.Err == nil {
		s := m.Stats
		stat = &s
	} else {
		j.log.Warn("run workspace diff stat", "run_id", m.RunID, "err", m.Err)
	}
	j.endRun(c, le, stat)
}

// endUnleased ends a starting run whose child was never leased (its
// worktree was being made): stopped, timed out, or its workspace failed.
func (j *jobActor) endUnleased(c actor.Context, runID string, to protocol.RunState, reason string) {
	delete(j.awaiting, runID)
	if !j.transition(c, runID, []protocol.RunState{protocol.RunStarting}, to, func(r *store.Run) { r.Error = reason }) {
		return
	}
	j.stopDeadline(runID)
	j.tell(c, &released{jobID: j.job.JobID, runID: runID})
	if j.job.Strategy == protocol.StrategyChain {
		j.haltChain(c, runID)
	}
	j.schedule(c)
}
