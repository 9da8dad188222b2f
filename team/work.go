package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/team/plan"
)

// leadTitle is the title a lead is given (AgentInfo.title): a client may
// not set display_name on agent.create (docs/protocol.md §10.1), so the
// lead is created unnamed and titled "lead" with agent.update, which also
// keeps the automatic title from quoting the goal's prompt.
const leadTitle = "lead"

// interruptedReason is a task's blocked reason after a daemon restart
// interrupted its worker's run (docs/protocol.md §10.4, restarts).
const interruptedReason = "interrupted by a daemon restart"

// leadSpec is what a goal's lead runs on (team.goal.submit's runtime,
// provider and model).
type leadSpec struct{ runtime, provider, model string }

// tell sends the actor a message from one of its goroutines.
func (co *Coordinator) tell(m Message) {
	if co.sys != nil {
		co.sys.Root.Send(co.self, m)
	}
}

// startLead starts (or reuses) the lead of g's repository and prompts it
// with the goal, off the mailbox. A failure is a feed item: the goal stays
// planning, and its tasks may still be created by hand.
func (co *Coordinator) startLead(g store.Goal, spec leadSpec) {
	if co.deps.Link == nil {
		return
	}
	co.goWork(co.deps.Timeout, func(ctx context.Context) {
		lead, err := co.ensureLead(ctx, g.GoalID, spec)
		if err != nil {
			co.deps.Logger.Warn("team: start the lead", "goal", g.GoalID, "err", err)
			co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedError, Text: "the lead could not start: " + protocol.AsError(err).Message})
			return
		}
		if err := co.deps.Link.Prompt(ctx, lead, plan.GoalPrompt(g.GoalID, g.Text), "team-goal:"+g.GoalID); err != nil {
			co.deps.Logger.Warn("team: prompt the lead", "goal", g.GoalID, "err", err)
			co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedError, AgentID: lead, Text: "the goal could not be given to the lead: " + protocol.AsError(err).Message})
			return
		}
		co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedPlan, AgentID: lead, Text: "the lead plans the goal"})
	})
}

// ensureLead returns goal goalID's lead: its own when it has one that
// exists, else the lead of the last goal of the same repository while that
// agent exists, else a new durable agent in the repository. The goal
// records it (team_goal_changed). One lead starts per repository at a time.
func (co *Coordinator) ensureLead(ctx context.Context, goalID string, spec leadSpec) (string, error) {
	g, err := co.deps.Store.GetGoal(goalID)
	if err != nil {
		return "", err
	}
	unlock := co.leads.lock(g.Cwd)
	defer unlock()
	if g, err = co.deps.Store.GetGoal(goalID); err != nil {
		return "", err
	}
	if g.LeadAgentID != "" && co.agentExists(ctx, g.LeadAgentID) {
		co.watchLead(g.LeadAgentID)
		return g.LeadAgentID, nil
	}
	lead := ""
	gs, err := co.deps.Store.ListGoals()
	if err != nil {
		return "", err
	}
	for _, o := range slices.Backward(gs) {
		if spec != (leadSpec{}) {
			// A submit that says what its lead runs on gets a lead of
			// its own rather than one that runs on something else.
			break
		}
		if o.GoalID == g.GoalID || o.Cwd != g.Cwd || o.LeadAgentID == "" {
			continue
		}
		if co.agentExists(ctx, o.LeadAgentID) {
			lead = o.LeadAgentID
		}
		break // the last goal's lead, or none
	}
	if lead == "" {
		var made protocol.AgentCreateData
		if err := co.deps.Link.Call(ctx, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate},
			Cwd: g.Cwd, Runtime: spec.runtime, Provider: spec.provider, Model: spec.model}, &made); err != nil {
			return "", fmt.Errorf("create the lead: %w", err)
		}
		lead = made.AgentID
		title := leadTitle
		if err := co.deps.Link.Call(ctx, &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: lead}, Title: &title}, nil); err != nil {
			co.deps.Logger.Warn("team: title the lead", "agent", lead, "err", err)
		}
	}
	g, err = co.deps.Store.UpdateGoal(goalID, func(g *store.Goal) error {
		if g.LeadAgentID == lead {
			return errUnchanged
		}
		g.LeadAgentID = lead
		return nil
	})
	switch {
	case err == nil:
		co.emit(goalEvent(g))
	case !errors.Is(err, errUnchanged):
		return "", err
	}
	co.watchLead(lead)
	return lead, nil
}

// agentExists asks the daemon whether agentID is an agent it has.
func (co *Coordinator) agentExists(ctx context.Context, agentID string) bool {
	err := co.deps.Link.Call(ctx, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: agentID}}, nil)
	return err == nil
}

// schedule starts a scheduling pass unless one is in flight (then another
// follows it): the ready tasks of the open goals, highest priority then
// oldest first, as many as workers are free.
func (co *Coordinator) schedule(c actor.Context) {
	if !co.ready || co.deps.Link == nil {
		return
	}
	if co.scheduling {
		co.again = true
		return
	}
	free := co.deps.MaxWorkers - len(co.following)
	if free <= 0 {
		return
	}
	busy := make(map[string]bool, len(co.following))
	for id := range co.following {
		busy[id] = true
	}
	co.scheduling = true
	ok := co.goWork(co.deps.Timeout, func(ctx context.Context) {
		tasks, err := co.pick(free, busy)
		if err != nil {
			co.deps.Logger.Warn("team: scheduling pass", "err", err)
		}
		co.deps.Logger.Debug("team: scheduling pass", "free", free, "ready", len(tasks))
		co.tell(&picked{tasks: tasks})
	})
	if !ok {
		co.scheduling = false
	}
}

// pick returns up to n ready tasks of the open goals not in busy.
func (co *Coordinator) pick(n int, busy map[string]bool) ([]store.Task, error) {
	gs, err := co.deps.Store.OpenGoals()
	if err != nil {
		return nil, err
	}
	var ready []store.Task
	for _, g := range gs {
		if g.CostLimit != nil && g.Cost >= *g.CostLimit {
			continue // past its budget: no new worker (docs/protocol.md §10.4)
		}
		ts, err := co.deps.Store.ReadyTasks(g.GoalID)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if !busy[t.TaskID] {
				ready = append(ready, t)
			}
		}
	}
	slices.SortStableFunc(ready, func(a, b store.Task) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.TaskID, b.TaskID))
	})
	return ready[:min(n, len(ready))], nil
}

func (co *Coordinator) onPicked(c actor.Context, m *picked) {
	co.scheduling = false
	for _, t := range m.tasks {
		if len(co.following) >= co.deps.MaxWorkers {
			break
		}
		co.follow(c, t.TaskID)
	}
	if co.again {
		co.again = false
		co.schedule(c)
	}
}

// follow starts the goroutine that runs a task (todo: its worker is
// started) and follows its run to its end.
func (co *Coordinator) follow(c actor.Context, taskID string) {
	if _, ok := co.following[taskID]; ok {
		return
	}
	co.gen++
	gen := co.gen
	co.following[taskID] = gen
	ok := co.goWork(0, func(ctx context.Context) {
		defer co.tell(&followEnded{taskID: taskID, gen: gen})
		co.runTask(ctx, taskID)
	})
	if !ok {
		delete(co.following, taskID)
	}
}

// runTask starts a todo task's worker, or takes up a doing one's run, and
// follows the run to its end.
func (co *Coordinator) runTask(ctx context.Context, taskID string) {
	t, err := co.deps.Store.GetTask(taskID)
	if err != nil {
		co.deps.Logger.Warn("team: read task", "task", taskID, "err", err)
		return
	}
	g, err := co.deps.Store.GetGoal(t.GoalID)
	if err != nil {
		return
	}
	switch t.State {
	case store.TaskTodo:
		if !g.Open() || (g.CostLimit != nil && g.Cost >= *g.CostLimit) {
			return
		}
		var ok bool
		if t, ok = co.startWorker(ctx, g, t); !ok {
			return
		}
	case store.TaskDoing:
	default:
		return
	}
	snap, ok := co.waitRun(ctx, t)
	if !ok {
		return
	}
	co.runEnded(ctx, t, snap)
	co.refreshCost(ctx, t.GoalID)
}

// workerText is a task's worker prompt with the team's shared memory after
// it (docs/protocol.md §10.4).
func (co *Coordinator) workerText(t store.Task) string {
	var b strings.Builder
	b.WriteString(t.Prompt)
	es, err := co.deps.Store.ListMemory(store.MemoryScopeShared)
	if err == nil && len(es) > 0 {
		b.WriteString("\n\n## Team memory\n")
		for _, e := range es {
			title := cmp.Or(e.Title, e.Key)
			fmt.Fprintf(&b, "\n### %s\n\n%s\n", title, e.Body)
		}
	}
	return b.String()
}

// startWorker starts a todo task's run: a subagent run of the goal's lead
// in a workspace of its own (a task that ran before is relaunched on its
// worker, in its workspace, on its branch), then commits the task doing.
// A start that fails blocks the task with the reason.
func (co *Coordinator) startWorker(ctx context.Context, g store.Goal, t store.Task) (store.Task, bool) {
	lead, err := co.ensureLead(ctx, g.GoalID, leadSpec{})
	if ctx.Err() != nil {
		return t, false // the daemon stops: the task waits for the next start
	}
	if err != nil {
		co.block(t, "no lead to run the task: "+protocol.AsError(err).Message)
		return t, false
	}
	text := co.workerText(t)
	var jobID, runID, agentID, workspaceID string
	if t.Assignee != "" && t.WorkspaceID == "" {
		// A reassigned task that never ran goes on in its new worker's
		// workspace (assignable says which, or why not).
		g.LeadAgentID = lead
		a, err := co.assignable(ctx, g, t.Assignee, t.TaskID)
		if err != nil {
			co.block(t, "the assignee cannot take the task: "+protocol.AsError(err).Message)
			return t, false
		}
		a.assign(&t)
	}
	if t.Assignee != "" {
		var rel protocol.SubagentRelaunchData
		err = co.deps.Link.Call(ctx, &protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch},
			ParentAgentID: lead, Target: t.Assignee, Task: text}, &rel)
		jobID, runID, agentID, workspaceID = rel.JobID, rel.RunID, rel.AgentID, t.WorkspaceID
	} else {
		var job protocol.SubagentCreateData
		err = co.deps.Link.Call(ctx, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
			ParentAgentID: lead, Name: runName(t.Title), Task: text, Isolation: protocol.IsolationWorkspace,
			RequestID: fmt.Sprintf("%s-%d", t.TaskID, t.Revision)}, &job)
		if err == nil && len(job.Runs) == 1 {
			r := job.Runs[0]
			jobID, runID, agentID, workspaceID = job.JobID, r.RunID, r.AgentID, r.WorkspaceID
		} else if err == nil {
			err = fmt.Errorf("subagent.create answered %d runs", len(job.Runs))
		}
	}
	if ctx.Err() != nil {
		// The daemon stops: the task stays todo. A job the create made
		// meanwhile is found again by its request_id at the next start.
		return t, false
	}
	if err != nil {
		co.block(t, "the worker could not start: "+protocol.AsError(err).Message)
		return t, false
	}
	// The workspace's branch and worktree are recorded with the job (the
	// worktree is made when the run starts): the card shows them at once.
	var ws protocol.WorkspaceStatusData
	if workspaceID != "" {
		if err := co.deps.Link.Call(ctx, &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus},
			WorkspaceID: workspaceID}, &ws); err != nil {
			co.deps.Logger.Debug("team: read a worker's workspace", "workspace", workspaceID, "err", err)
		}
	}
	t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
		if x.State != store.TaskTodo {
			return errUnchanged
		}
		x.State, x.BlockedReason = store.TaskDoing, ""
		x.JobID, x.RunID, x.Assignee = jobID, runID, agentID
		if workspaceID != "" {
			x.WorkspaceID = workspaceID
			x.Branch, x.Worktree = cmp.Or(t.Branch, x.Branch), cmp.Or(t.Worktree, x.Worktree)
		}
		if w := ws.Workspace; w.WorkspaceID == workspaceID && workspaceID != "" {
			x.Branch, x.Worktree = cmp.Or(w.Branch, x.Branch), cmp.Or(w.Cwd, x.Worktree)
		}
		x.CI = nil
		return nil
	})
	if !ok {
		// Cancelled meanwhile: the run it started goes too.
		t.RunID = runID
		co.stopRun(ctx, lead, t)
		return t, false
	}
	co.claimDecisions(t2)
	co.feed(store.FeedItem{GoalID: t.GoalID, TaskID: t.TaskID, AgentID: agentID, Kind: store.FeedTask, Text: t.Title + ": a worker started"})
	return t2, true
}

// runName is a worker run's name: the task's title, cut to 64 runes (the
// title is public already; the prompt never is).
func runName(title string) string {
	if r := []rune(title); len(r) > 64 {
		return string(r[:64])
	}
	return title
}

// waitRun waits for a doing task's run to end (subagent.wait of the lead,
// without a bound). A wait the daemon could not answer is asked again; ok
// is false when the coordinator stops or the run is unknown (the task is
// blocked then).
func (co *Coordinator) waitRun(ctx context.Context, t store.Task) (protocol.RunSnapshot, bool) {
	backoff := 100 * time.Millisecond
	for {
		g, err := co.deps.Store.GetGoal(t.GoalID)
		if err != nil {
			return protocol.RunSnapshot{}, false
		}
		var res protocol.SubagentWaitData
		err = co.deps.Link.Call(ctx, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait},
			ParentAgentID: g.LeadAgentID, Handles: []string{t.RunID}, Mode: "all"}, &res)
		if ctx.Err() != nil {
			return protocol.RunSnapshot{}, false
		}
		if err == nil && len(res.Runs) == 1 && res.Runs[0].State.Terminal() {
			return res.Runs[0], true
		}
		if protocol.CodeOf(err) == protocol.CodeNotFound {
			co.blockDoing(t, "its worker's run is gone: "+protocol.AsError(err).Message)
			return protocol.RunSnapshot{}, false
		}
		if err != nil {
			co.deps.Logger.Warn("team: wait for a worker's run", "task", t.TaskID, "err", err)
		}
		select {
		case <-ctx.Done():
			return protocol.RunSnapshot{}, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// runEnded moves a doing task on once its run ended: completed → review
// (the worker's changes committed, CI, diff stat, a merge decision);
// anything else → blocked with the reason.
func (co *Coordinator) runEnded(ctx context.Context, t store.Task, snap protocol.RunSnapshot) {
	cur, err := co.deps.Store.GetTask(t.TaskID)
	if err != nil || cur.State != store.TaskDoing || cur.RunID != snap.RunID {
		return // cancelled, or moved on meanwhile
	}
	switch snap.State {
	case protocol.RunCompleted:
		co.review(ctx, cur, snap)
	case protocol.RunInterrupted:
		co.blockDoing(cur, interruptedReason)
	case protocol.RunCancelled:
		co.blockDoing(cur, "its worker's run was cancelled")
	default:
		co.blockDoing(cur, fmt.Sprintf("its worker's run %s: %s", snap.State, cmp.Or(snap.Error, "no reason given")))
	}
}

// review commits the worker's changes in its worktree, runs CI, records
// the diff stat and opens the task's merge decision.
func (co *Coordinator) review(ctx context.Context, t store.Task, snap protocol.RunSnapshot) {
	worktree, branch := t.Worktree, t.Branch
	var diff *store.DiffStats
	if w := snap.Workspace; w != nil {
		worktree, branch = cmp.Or(w.Cwd, worktree), cmp.Or(w.Branch, branch)
		if w.DiffStat != nil {
			diff = &store.DiffStats{Files: w.DiffStat.Files, Additions: w.DiffStat.Additions, Deletions: w.DiffStat.Deletions}
		}
	}
	if worktree != "" {
		if err := co.commitWork(ctx, worktree, t.Title); err != nil {
			co.feed(store.FeedItem{GoalID: t.GoalID, TaskID: t.TaskID, Kind: store.FeedError, Text: t.Title + ": the worker's changes are not committed: " + err.Error()})
		}
		if diff != nil {
			diff.Ahead = co.ahead(ctx, worktree)
		}
	}
	ci := store.CIResult{Status: store.CIUnknown}
	if co.deps.CICommand != "" && worktree != "" {
		co.setTask(t.TaskID, func(x *store.Task) error {
			x.CI, x.Worktree, x.Branch = &store.CIResult{Status: store.CIRunning}, worktree, branch
			return nil
		})
		ci = co.runCI(ctx, worktree)
		if ctx.Err() != nil {
			return // the daemon stops: the next start reviews the run again
		}
		co.feed(store.FeedItem{GoalID: t.GoalID, TaskID: t.TaskID, Kind: store.FeedCI, Text: fmt.Sprintf("%s: CI %s", t.Title, ci.Status)})
	}
	t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
		if x.State != store.TaskDoing || x.RunID != snap.RunID {
			return errUnchanged
		}
		x.State, x.Worktree, x.Branch, x.Diff, x.CI = store.TaskReview, worktree, branch, diff, &ci
		return nil
	})
	if !ok {
		return
	}
	co.openMergeDecision(t2)
}

// openMergeDecision opens the merge decision of a task in review.
func (co *Coordinator) openMergeDecision(t store.Task) {
	var parts []string
	if t.Branch != "" {
		parts = append(parts, "branch "+t.Branch)
	}
	if d := t.Diff; d != nil {
		parts = append(parts, fmt.Sprintf("%d file(s), +%d −%d, %d commit(s) ahead", d.Files, d.Additions, d.Deletions, d.Ahead))
	}
	if t.CI != nil {
		parts = append(parts, "CI "+string(t.CI.Status))
	}
	ctxText := strings.Join(parts, "; ")
	d, err := co.deps.Store.CreateDecision(store.Decision{GoalID: t.GoalID, TaskID: t.TaskID, AgentID: t.Assignee,
		Kind: store.DecisionMerge, Prompt: fmt.Sprintf("Merge %q?", t.Title), Context: ctxText,
		Options: []string{protocol.OptionMerge, protocol.OptionRequestChanges, protocol.OptionReject}})
	if err != nil {
		co.deps.Logger.Error("team: open a merge decision", "task", t.TaskID, "err", err)
		return
	}
	co.emit(decisionEvent(d))
	co.feed(store.FeedItem{GoalID: t.GoalID, TaskID: t.TaskID, AgentID: t.Assignee, Kind: store.FeedDecision, Text: t.Title + ": ready for review"})
}

// recoverReview gives a task in review after a restart what a person
// decides with: its merge decision, opened if the crash came before it,
// or opened again if an answer to it was not carried out.
func (co *Coordinator) recoverReview(t store.Task) {
	ds, err := co.deps.Store.ListDecisions(t.GoalID)
	if err != nil {
		return
	}
	var last *store.Decision
	for i := range ds {
		if ds[i].TaskID == t.TaskID && ds[i].Kind == store.DecisionMerge {
			last = &ds[i]
		}
	}
	switch {
	case last == nil || last.State == store.DecisionCancelled:
		co.openMergeDecision(t)
	case last.State == store.DecisionAnswered:
		co.reopen(*last, interruptedReason)
	}
}

// block moves a todo task to blocked with reason.
func (co *Coordinator) block(t store.Task, reason string) {
	co.deps.Logger.Info("team: task blocked", "task", t.TaskID, "reason", reason)
	if t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
		if x.State != store.TaskTodo {
			return errUnchanged
		}
		x.State, x.BlockedReason = store.TaskBlocked, reason
		return nil
	}); ok {
		co.feed(store.FeedItem{GoalID: t2.GoalID, TaskID: t2.TaskID, Kind: store.FeedError, Text: t2.Title + " blocked: " + reason})
	}
}

// blockDoing moves a doing task (of the same run) to blocked with reason.
func (co *Coordinator) blockDoing(t store.Task, reason string) {
	co.deps.Logger.Info("team: task blocked", "task", t.TaskID, "reason", reason)
	if t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
		if x.State != store.TaskDoing || x.RunID != t.RunID {
			return errUnchanged
		}
		x.State, x.BlockedReason = store.TaskBlocked, reason
		return nil
	}); ok {
		co.feed(store.FeedItem{GoalID: t2.GoalID, TaskID: t2.TaskID, AgentID: t2.Assignee, Kind: store.FeedError, Text: t2.Title + " blocked: " + reason})
		co.refreshGoal(t2.GoalID)
	}
}

// stopRun stops a doing task's run (subagent.stop of the lead); a failure
// is logged: the run ends by itself or is already over.
func (co *Coordinator) stopRun(ctx context.Context, lead string, t store.Task) {
	if co.deps.Link == nil || t.RunID == "" || lead == "" {
		return
	}
	if err := co.deps.Link.Call(ctx, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop},
		ParentAgentID: lead, Handle: t.RunID}, nil); err != nil {
		co.deps.Logger.Warn("team: stop a worker's run", "task", t.TaskID, "err", err)
	}
}

// recover reconciles the open goals at start (docs/protocol.md §10.4,
// restarts): each doing task's run is followed again — the daemon's own
// reconciliation left it interrupted, so its task goes back to the board
// blocked, never replayed; open permission and question decisions, whose
// requests died with the runtimes, are cancelled; a goal still planning
// without a lead gets one.
func (co *Coordinator) recover(c actor.Context) {
	co.goWork(co.deps.Timeout, func(ctx context.Context) {
		if ds, err := co.deps.Store.OpenDecisions(); err == nil {
			for _, d := range ds {
				if d.Kind == store.DecisionMerge || isBudget(d) {
					continue // not a runtime's request: still a person's to answer
				}
				if d, err := co.deps.Store.UpdateDecision(d.DecisionID, func(d *store.Decision) error {
					if d.State != store.DecisionOpen {
						return errUnchanged
					}
					d.State = store.DecisionCancelled
					return nil
				}); err == nil {
					co.emit(decisionEvent(d))
				}
			}
		}
		var doing []string
		gs, err := co.deps.Store.OpenGoals()
		if err != nil {
			co.deps.Logger.Error("team: read open goals", "err", err)
		}
		for _, g := range gs {
			ts, err := co.deps.Store.ListTasks(g.GoalID)
			if err != nil {
				continue
			}
			for _, t := range ts {
				switch t.State {
				case store.TaskDoing:
					doing = append(doing, t.TaskID)
				case store.TaskReview:
					co.recoverReview(t)
				}
			}
			if g.Status == store.GoalPlanning && len(ts) == 0 && co.deps.Link != nil {
				// A goal the crash caught before its plan: its lead is
				// started and prompted again (the prompt's dedupe key
				// keeps a lead that had it from getting it twice).
				co.startLead(g, leadSpec{})
			}
			co.watchLead(g.LeadAgentID)
		}
		co.tell(&recovered{taskIDs: doing})
	})
}
