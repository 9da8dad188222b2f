package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// Default and maximum team.feed pages (docs/protocol.md §10.4).
const (
	defaultFeedPage = 50
)

// byUser is who a person's answer or write is recorded as: the protocol
// has one trust level for the clients that may list agents (§4.3), so the
// person is "user" whichever client answered.
const byUser = "user"

// onCommand serves one team.* command the registry forwarded: in a
// goroutine, answered there once what it changed is committed.
func (co *Coordinator) onCommand(c actor.Context, cmd *registry.Command) {
	var f func(ctx context.Context) (any, error)
	kickAfter := false
	switch m := cmd.Cmd.(type) {
	case *protocol.TeamGoalSubmit:
		f = func(ctx context.Context) (any, error) { return co.submit(ctx, m) }
	case *protocol.TeamGoalList:
		f = func(context.Context) (any, error) { return co.goalList(m) }
	case *protocol.TeamGoalShow:
		f = func(context.Context) (any, error) { return co.goalShow(m) }
	case *protocol.TeamGoalCancel:
		f = func(ctx context.Context) (any, error) { return co.goalCancel(ctx, m) }
	case *protocol.TeamTaskCreate:
		f, kickAfter = func(ctx context.Context) (any, error) { return co.taskCreate(ctx, m) }, true
	case *protocol.TeamTaskAction:
		f, kickAfter = func(ctx context.Context) (any, error) { return co.taskAction(ctx, m) }, true
	case *protocol.TeamDecisionList:
		f = func(context.Context) (any, error) { return co.decisionList(m) }
	case *protocol.TeamDecisionAnswer:
		f, kickAfter = func(ctx context.Context) (any, error) { return co.decisionAnswer(ctx, m) }, true
	case *protocol.TeamMemoryList:
		f = func(context.Context) (any, error) { return co.memoryList(m) }
	case *protocol.TeamMemoryPut:
		f = func(context.Context) (any, error) { return co.memoryPut(m) }
	case *protocol.TeamMemoryDelete:
		f = func(context.Context) (any, error) { return co.memoryDelete(m) }
	case *protocol.TeamFeed:
		f = func(context.Context) (any, error) { return co.feedPage(m) }
	case *protocol.TeamMessage:
		f = func(ctx context.Context) (any, error) { return co.message(ctx, m) }
	default:
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not supported by this daemon yet", cmd.Header.Type))
		return
	}
	sys, self := c.ActorSystem(), c.Self()
	ok := co.goWork(co.deps.Timeout, func(ctx context.Context) {
		data, err := f(ctx)
		if err != nil {
			err = codeErr(err)
			if protocol.CodeOf(err) == protocol.CodeInternal {
				co.deps.Logger.Error("team: command failed", "type", cmd.Header.Type, "err", err)
			}
			fail(cmd, err)
			return
		}
		reply(cmd, data)
		if kickAfter {
			sys.Root.Send(self, &kick{})
		}
	})
	if !ok {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "teams are not available (daemon shutting down)"))
	}
}

// submit commits a goal (planning), answers it, and starts (or reuses) the
// lead for its repository and prompts it, after the answer.
func (co *Coordinator) submit(ctx context.Context, m *protocol.TeamGoalSubmit) (any, error) {
	cwd := m.Cwd
	if cwd == "" {
		cwd = co.deps.Repo
	}
	if cwd == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "cwd: required (no team.repo is configured)")
	}
	if !filepath.IsAbs(cwd) {
		// The daemon has no meaningful cwd to resolve it against.
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "cwd: must be an absolute path")
	}
	repo, err := co.deps.Git.Inspect(ctx, cwd)
	if err != nil {
		if errors.Is(err, git.ErrNotRepository) || errors.Is(err, git.ErrBareRepository) {
			return nil, protocol.WorkspaceRefusal{Kind: protocol.RefusalNotARepository,
				Reason: fmt.Sprintf("%s is not inside a git repository with a main checkout", cwd)}.Err()
		}
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "cwd %s: %w", cwd, err)
	}
	g, created, err := co.deps.Store.CreateGoalOnce(store.Goal{Text: m.Text, Status: store.GoalPlanning, Cwd: repo.Root,
		CostLimit: m.CostLimitUSD, RequestID: m.RequestID, CreatedBy: byUser})
	if err != nil {
		return nil, err
	}
	if !created {
		return protocol.TeamGoalData{Goal: goalView(g)}, nil
	}
	co.emit(goalEvent(g))
	co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedGoal, Text: "goal submitted"})
	if co.deps.Link == nil {
		return protocol.TeamGoalData{Goal: goalView(g)}, nil
	}
	// The lead is started (or found) before the answer, so that a lead
	// the daemon refuses (an unknown runtime, provider or model) is the
	// submit's error, and the answer names the lead; the goal is then
	// failed, kept for the record. The prompt follows the answer.
	if _, err := co.ensureLead(ctx, g.GoalID, leadSpec{runtime: m.Runtime, provider: m.Provider, model: m.Model}); err != nil {
		if failed, ferr := co.deps.Store.UpdateGoal(g.GoalID, func(g *store.Goal) error {
			g.Status, g.EndedAt = store.GoalFailed, time.Now().UnixMilli()
			return nil
		}); ferr == nil {
			co.emit(goalEvent(failed))
		}
		co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedError, Text: "the lead could not start: " + protocol.AsError(err).Message})
		return nil, err
	}
	if g, err = co.deps.Store.GetGoal(g.GoalID); err != nil {
		return nil, err
	}
	co.startLead(g, leadSpec{})
	return protocol.TeamGoalData{Goal: goalView(g)}, nil
}

func (co *Coordinator) goalList(m *protocol.TeamGoalList) (any, error) {
	var gs []store.Goal
	var err error
	if m.OpenOnly {
		gs, err = co.deps.Store.OpenGoals()
	} else {
		gs, err = co.deps.Store.ListGoals()
	}
	if err != nil {
		return nil, err
	}
	slices.Reverse(gs) // goal ids sort by creation: newest first
	return protocol.TeamGoalListData{Goals: views(gs, goalView)}, nil
}

func (co *Coordinator) goalShow(m *protocol.TeamGoalShow) (any, error) {
	g, err := co.deps.Store.GetGoal(m.GoalID)
	if err != nil {
		return nil, err
	}
	ts, err := co.deps.Store.ListTasks(g.GoalID)
	if err != nil {
		return nil, err
	}
	ds, err := co.deps.Store.ListDecisions(g.GoalID)
	if err != nil {
		return nil, err
	}
	return protocol.TeamGoalShowData{Goal: goalView(g), Tasks: views(ts, taskView), Decisions: views(ds, decisionView)}, nil
}

// goalCancel ends an open goal cancelled: the doing tasks' runs are
// stopped, every open task and decision cancelled. Nothing is deleted (the
// tasks' workspaces stay for a person to look at or retire).
func (co *Coordinator) goalCancel(ctx context.Context, m *protocol.TeamGoalCancel) (any, error) {
	g, err := co.deps.Store.UpdateGoal(m.GoalID, func(g *store.Goal) error {
		if !g.Open() {
			return fmt.Errorf("%w: goal %s is already %s", store.ErrConflict, g.GoalID, g.Status)
		}
		g.Status, g.EndedAt = store.GoalCancelled, time.Now().UnixMilli()
		return nil
	})
	if err != nil {
		return nil, err
	}
	co.emit(goalEvent(g))
	ts, err := co.deps.Store.ListTasks(g.GoalID)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.State == store.TaskDoing {
			co.stopRun(ctx, g.LeadAgentID, t)
		}
		if t.State == store.TaskDone || t.State == store.TaskCancelled {
			continue
		}
		co.setTask(t.TaskID, func(t *store.Task) error {
			if t.State == store.TaskDone || t.State == store.TaskCancelled {
				return errUnchanged
			}
			t.State = store.TaskCancelled
			return nil
		})
	}
	co.cancelDecisions(g.GoalID, "")
	co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedGoal, Text: "goal cancelled"})
	co.unwatchIdle(g.LeadAgentID)
	return protocol.TeamGoalData{Goal: goalView(g)}, nil
}

// taskCreate adds a batch of tasks, all or none; the first tasks of a
// planning goal make it active.
func (co *Coordinator) taskCreate(ctx context.Context, m *protocol.TeamTaskCreate) (any, error) {
	g, err := co.deps.Store.GetGoal(m.GoalID)
	if err != nil {
		return nil, err
	}
	if !g.Open() {
		return nil, protocol.Errorf(protocol.CodeConflict, "goal %s is %s", g.GoalID, g.Status)
	}
	by := m.ByAgentID
	if by == "" {
		by = byUser
	}
	batch := make([]store.Task, len(m.Tasks))
	for i, s := range m.Tasks {
		batch[i] = store.Task{TaskID: newTaskID(), GoalID: g.GoalID, Title: s.Title, Description: s.Description,
			Prompt: s.Prompt, Priority: s.Priority, Deps: slices.Clone(s.Deps), State: store.TaskTodo, CreatedBy: by}
		for _, n := range s.After {
			if d := batch[n-1].TaskID; !slices.Contains(batch[i].Deps, d) {
				batch[i].Deps = append(batch[i].Deps, d)
			}
		}
		if s.Assignee == "" {
			continue
		}
		if co.deps.Link == nil {
			return nil, protocol.Errorf(protocol.CodeConflict, "tasks[%d].assignee: no worker can be reached here", i)
		}
		for _, o := range m.Tasks[:i] {
			if o.Assignee == s.Assignee {
				return nil, protocol.Errorf(protocol.CodeConflict, "tasks[%d].assignee: %s is given two tasks of this batch", i, s.Assignee)
			}
		}
		a, err := co.assignable(ctx, g, s.Assignee, "")
		if err != nil {
			return nil, fmt.Errorf("tasks[%d].assignee: %w", i, err)
		}
		a.assign(&batch[i])
	}
	ts, err := co.deps.Store.CreateTasks(batch)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		co.emit(taskEvent(t))
	}
	titles := make([]string, len(ts))
	for i, t := range ts {
		titles[i] = t.Title
	}
	co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedPlan, AgentID: m.ByAgentID,
		Text: fmt.Sprintf("%d task(s) planned: %s", len(ts), strings.Join(titles, "; "))})
	co.refreshGoal(g.GoalID)
	return protocol.TeamTasksData{Tasks: views(ts, taskView)}, nil
}

// taskAction carries out a person's action on one card.
func (co *Coordinator) taskAction(ctx context.Context, m *protocol.TeamTaskAction) (any, error) {
	t, err := co.deps.Store.GetTask(m.TaskID)
	if err != nil {
		return nil, err
	}
	var fn func(*store.Task) error
	switch m.Action {
	case protocol.TaskActionCancel:
		if t.State == store.TaskDone || t.State == store.TaskCancelled {
			return nil, protocol.Errorf(protocol.CodeConflict, "task %s is already %s", t.TaskID, t.State)
		}
		if t.State == store.TaskDoing {
			g, err := co.deps.Store.GetGoal(t.GoalID)
			if err != nil {
				return nil, err
			}
			co.stopRun(ctx, g.LeadAgentID, t)
		}
		fn = func(t *store.Task) error {
			if t.State == store.TaskDone || t.State == store.TaskCancelled {
				return fmt.Errorf("%w: task %s is already %s", store.ErrConflict, t.TaskID, t.State)
			}
			t.State, t.BlockedReason = store.TaskCancelled, ""
			return nil
		}
	case protocol.TaskActionRetry:
		fn = func(t *store.Task) error {
			if t.State != store.TaskBlocked && t.State != store.TaskCancelled {
				return fmt.Errorf("%w: only a blocked or cancelled task is retried; task %s is %s", store.ErrConflict, t.TaskID, t.State)
			}
			t.State, t.BlockedReason = store.TaskTodo, ""
			return nil
		}
	case protocol.TaskActionPrioritize:
		p, err := strconv.Atoi(m.Arg)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidRequest, "arg: a priority is a decimal integer")
		}
		fn = func(t *store.Task) error { t.Priority = p; return nil }
	case protocol.TaskActionReassign:
		if co.deps.Link != nil && !co.agentExists(ctx, m.Arg) {
			return nil, protocol.Errorf(protocol.CodeNotFound, "arg: no agent %s", m.Arg)
		}
		fn = func(t *store.Task) error {
			if t.State == store.TaskDoing || t.State == store.TaskReview {
				return fmt.Errorf("%w: task %s is %s; reassign it once it is not", store.ErrConflict, t.TaskID, t.State)
			}
			t.Assignee = m.Arg
			return nil
		}
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "action: unknown %q", m.Action)
	}
	t, err = co.deps.Store.UpdateTask(t.TaskID, fn)
	if err != nil {
		return nil, err
	}
	co.emit(taskEvent(t))
	co.feed(store.FeedItem{GoalID: t.GoalID, TaskID: t.TaskID, Kind: store.FeedTask, Text: fmt.Sprintf("%s: %s (%s)", t.Title, m.Action, t.State)})
	if m.Action == protocol.TaskActionCancel {
		co.cancelDecisions(t.GoalID, t.TaskID)
		co.blockDependents(t)
	}
	co.refreshGoal(t.GoalID)
	return protocol.TeamTaskData{Task: taskView(t)}, nil
}

func (co *Coordinator) decisionList(m *protocol.TeamDecisionList) (any, error) {
	var ds []store.Decision
	var err error
	switch {
	case m.GoalID != "":
		if _, err := co.deps.Store.GetGoal(m.GoalID); err != nil {
			return nil, err
		}
		ds, err = co.deps.Store.ListDecisions(m.GoalID)
	case m.OpenOnly:
		ds, err = co.deps.Store.OpenDecisions()
	default:
		var gs []store.Goal
		if gs, err = co.deps.Store.ListGoals(); err == nil {
			for _, g := range gs {
				var gd []store.Decision
				if gd, err = co.deps.Store.ListDecisions(g.GoalID); err != nil {
					break
				}
				ds = append(ds, gd...)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if m.OpenOnly {
		ds = slices.DeleteFunc(ds, func(d store.Decision) bool { return d.State != store.DecisionOpen })
	}
	slices.SortStableFunc(ds, func(a, b store.Decision) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.DecisionID, b.DecisionID))
	})
	return protocol.TeamDecisionListData{Decisions: views(ds, decisionView)}, nil
}

func (co *Coordinator) memoryList(m *protocol.TeamMemoryList) (any, error) {
	var es []store.MemoryEntry
	var err error
	if m.Scope == "" {
		es, err = co.deps.Store.AllMemory()
	} else {
		es, err = co.deps.Store.ListMemory(m.Scope)
	}
	if err != nil {
		return nil, err
	}
	return protocol.TeamMemoryListData{Entries: views(es, memoryView)}, nil
}

func (co *Coordinator) memoryPut(m *protocol.TeamMemoryPut) (any, error) {
	author := m.Author
	if author == "" {
		author = byUser
	}
	e, err := co.deps.Store.PutMemory(store.MemoryEntry{Scope: m.Scope, Key: m.Key, Title: m.Title, Body: m.Body, Author: author})
	if err != nil {
		return nil, err
	}
	co.emit(memoryEvent(e, false))
	co.feed(store.FeedItem{Kind: store.FeedMemory, AgentID: m.Author, Text: fmt.Sprintf("memory %s/%s written", e.Scope, e.Key)})
	return protocol.TeamMemoryData{Entry: memoryView(e)}, nil
}

func (co *Coordinator) memoryDelete(m *protocol.TeamMemoryDelete) (any, error) {
	e, err := co.deps.Store.GetMemory(m.MemoryID)
	if err != nil {
		return nil, err
	}
	if err := co.deps.Store.DeleteMemory(m.MemoryID); err != nil {
		return nil, err
	}
	co.emit(memoryEvent(e, true))
	co.feed(store.FeedItem{Kind: store.FeedMemory, Text: fmt.Sprintf("memory %s/%s deleted", e.Scope, e.Key)})
	return struct{}{}, nil
}

func (co *Coordinator) feedPage(m *protocol.TeamFeed) (any, error) {
	limit := m.Limit
	if limit == 0 {
		limit = defaultFeedPage
	}
	var items []store.FeedItem
	var next string
	var err error
	if m.GoalID != "" {
		if _, err := co.deps.Store.GetGoal(m.GoalID); err != nil {
			return nil, err
		}
		items, next, err = co.deps.Store.Feed(m.GoalID, m.Before, limit)
	} else {
		items, next, err = co.deps.Store.RecentFeed(m.Before, limit)
	}
	if err != nil {
		return nil, err
	}
	return protocol.TeamFeedData{Items: views(items, feedView), NextBefore: next}, nil
}

// errUnchanged makes setTask write nothing: the task is already where the
// caller would put it.
var errUnchanged = errors.New("team: unchanged")

// setTask updates a task and announces it; it reports the stored task and
// whether it changed. Failures other than errUnchanged are logged.
func (co *Coordinator) setTask(id string, fn func(*store.Task) error) (store.Task, bool) {
	t, err := co.deps.Store.UpdateTask(id, fn)
	if err != nil {
		if !errors.Is(err, errUnchanged) {
			co.deps.Logger.Warn("team: update task", "task", id, "err", err)
		}
		return t, false
	}
	co.emit(taskEvent(t))
	return t, true
}

// cancelDecisions cancels the open decisions of a goal (of one of its
// tasks when taskID is set).
func (co *Coordinator) cancelDecisions(goalID, taskID string) {
	ds, err := co.deps.Store.ListDecisions(goalID)
	if err != nil {
		co.deps.Logger.Warn("team: list decisions", "goal", goalID, "err", err)
		return
	}
	for _, d := range ds {
		if d.State != store.DecisionOpen || (taskID != "" && d.TaskID != taskID) {
			continue
		}
		d, err := co.deps.Store.UpdateDecision(d.DecisionID, func(d *store.Decision) error {
			if d.State != store.DecisionOpen {
				return errUnchanged
			}
			d.State = store.DecisionCancelled
			return nil
		})
		if err == nil {
			co.emit(decisionEvent(d))
		}
	}
}

// blockDependents blocks the todo tasks that depend on t, which will
// never be done (cancelled or rejected): what becomes of them is the
// person's (or the lead's) call.
func (co *Coordinator) blockDependents(t store.Task) {
	ts, err := co.deps.Store.ListTasks(t.GoalID)
	if err != nil {
		return
	}
	for _, d := range ts {
		if d.State != store.TaskTodo || !slices.Contains(d.Deps, t.TaskID) {
			continue
		}
		reason := fmt.Sprintf("depends on %q, which was %s", t.Title, t.State)
		if d, ok := co.setTask(d.TaskID, func(x *store.Task) error {
			if x.State != store.TaskTodo {
				return errUnchanged
			}
			x.State, x.BlockedReason = store.TaskBlocked, reason
			return nil
		}); ok {
			co.feed(store.FeedItem{GoalID: d.GoalID, TaskID: d.TaskID, Kind: store.FeedTask, Text: d.Title + " blocked: " + reason})
		}
	}
}

// refreshGoal recomputes a goal's status and progress from its board
// (docs/protocol.md §10.4): active from its first task; done once none of
// its tasks is todo, doing, review or blocked and one is done; progress
// the fraction of its tasks, cancelled ones left out, that are done.
func (co *Coordinator) refreshGoal(goalID string) {
	ts, err := co.deps.Store.ListTasks(goalID)
	if err != nil {
		co.deps.Logger.Warn("team: list tasks", "goal", goalID, "err", err)
		return
	}
	counted, done, open := 0, 0, 0
	for _, t := range ts {
		switch t.State {
		case store.TaskCancelled:
			continue
		case store.TaskDone:
			done++
		default:
			open++
		}
		counted++
	}
	progress := 0.0
	if counted > 0 {
		progress = float64(done) / float64(counted)
	}
	finished := false
	g, err := co.deps.Store.UpdateGoal(goalID, func(g *store.Goal) error {
		if !g.Open() {
			return errUnchanged
		}
		was, wasProgress := g.Status, g.Progress
		if len(ts) > 0 && g.Status == store.GoalPlanning {
			g.Status = store.GoalActive
		}
		if open == 0 && done > 0 {
			g.Status, g.EndedAt = store.GoalDone, time.Now().UnixMilli()
			finished = true
		}
		g.Progress = progress
		if g.Status == was && g.Progress == wasProgress {
			return errUnchanged
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errUnchanged) {
			co.deps.Logger.Warn("team: update goal", "goal", goalID, "err", err)
		}
		return
	}
	co.emit(goalEvent(g))
	if finished {
		co.feed(store.FeedItem{GoalID: goalID, Kind: store.FeedGoal, Text: "goal done"})
		co.unwatchIdle(g.LeadAgentID)
	}
}
