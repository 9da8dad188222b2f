package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	idgen "github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

func newTaskID() string { return idgen.New(idgen.Task) }

// defaultChanges is the feedback a "Request changes" answer without text
// gives the worker (a choice: the dialect's clients may send the label
// alone).
const defaultChanges = "The reviewer requested changes to your work on this task. Revise it."

// decisionAnswer answers a decision, first answer wins, and carries the
// answer out: a merge decision's Merge, Request changes or Reject. The
// answer is the decision as it is afterwards: open again, with
// refused_reason, when the merge was refused.
func (co *Coordinator) decisionAnswer(ctx context.Context, m *protocol.TeamDecisionAnswer) (any, error) {
	d, err := co.deps.Store.GetDecision(m.DecisionID)
	if err != nil {
		return nil, err
	}
	by, err := co.answerer(d, m.ByAgentID)
	if err != nil {
		return nil, err
	}
	if d.State != store.DecisionOpen {
		return nil, protocol.Errorf(protocol.CodeConflict, "decision %s is %s, no longer open", d.DecisionID, d.State)
	}
	if m.Option == "" && m.Index == nil && (len(d.Options) > 0 && d.Kind != store.DecisionQuestion) {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "option: required (one of %s)", strings.Join(d.Options, ", "))
	}
	if m.Option != "" && !slices.Contains(d.Options, m.Option) {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "option: decision %s offers no option %q", d.DecisionID, m.Option)
	}
	if m.Index != nil && *m.Index >= len(d.Options) {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "index: decision %s has %d option(s)", d.DecisionID, len(d.Options))
	}
	if d.Kind != store.DecisionMerge && d.RequestID != "" && !isBudget(d) {
		// The request is answered first: its answer is what wins.
		if err := co.answerRequest(ctx, d, m, by); err != nil {
			return nil, err
		}
	}
	d, err = co.deps.Store.AnswerDecision(d.DecisionID, store.DecisionAnswer{Index: m.Index, Option: m.Option, Text: m.Text, By: by})
	if errors.Is(err, store.ErrConflict) && d.Kind != store.DecisionMerge {
		// The resolution of the request this answer won recorded it first
		// (and announced it); the feed says who answered all the same.
		if d, err = co.deps.Store.GetDecision(m.DecisionID); err == nil {
			co.feedAnswer(d, m.ByAgentID)
			return protocol.TeamDecisionData{Decision: decisionView(d)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	co.emit(decisionEvent(d))
	co.feedAnswer(d, m.ByAgentID)
	switch {
	case d.Kind == store.DecisionMerge:
		d = co.carryMerge(ctx, d)
	case isBudget(d):
		co.carryBudget(ctx, d)
	}
	return protocol.TeamDecisionData{Decision: decisionView(d)}, nil
}

// feedAnswer adds the feed item of d's answer by agentID ("": the
// person).
func (co *Coordinator) feedAnswer(d store.Decision, agentID string) {
	option := "(text)"
	if d.Answer != nil {
		option = cmp.Or(d.Answer.Option, option)
	}
	co.feed(store.FeedItem{GoalID: d.GoalID, TaskID: d.TaskID, Kind: store.FeedDecision, AgentID: agentID,
		Text: fmt.Sprintf("%s answered: %s", d.Prompt, option)})
}

// answerer is who answers d: the person ("user") when agentID is empty,
// else the agent agentID, which must exist (NOT_FOUND) and may answer only
// a worker's question. Merge and permission decisions are the person's
// review and grants, and the budget question the person's money: an agent
// is refused them (PERMISSION_DENIED) whatever sent the command, so a
// hosted lead can settle its workers' questions but never merge its own
// work (docs/protocol.md §13, "Teams").
func (co *Coordinator) answerer(d store.Decision, agentID string) (string, error) {
	if agentID == "" {
		return byUser, nil
	}
	if _, err := co.deps.Store.GetAgent(agentID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", protocol.Errorf(protocol.CodeNotFound, "by_agent_id: no agent %s", agentID)
		}
		return "", err
	}
	if d.Kind != store.DecisionQuestion || isBudget(d) {
		what := string(d.Kind)
		if isBudget(d) {
			what = "budget"
		}
		return "", protocol.Errorf(protocol.CodePermissionDenied, "decision %s is a %s decision: only a person answers it, an agent answers questions", d.DecisionID, what)
	}
	return agentID, nil
}

// carryMerge carries out a merge decision's answer on its task (in
// review); a refusal reopens the decision with the reason.
func (co *Coordinator) carryMerge(ctx context.Context, d store.Decision) store.Decision {
	t, err := co.deps.Store.GetTask(d.TaskID)
	if err != nil || t.State != store.TaskReview {
		return d // the task moved on (cancelled): nothing to carry out
	}
	g, err := co.deps.Store.GetGoal(t.GoalID)
	if err != nil {
		return co.reopen(d, protocol.AsError(err).Message)
	}
	if co.deps.Link == nil {
		return co.reopen(d, "the team cannot act on workspaces here")
	}
	switch d.Answer.Option {
	case protocol.OptionMerge:
		return co.merge(ctx, g, t, d)
	case protocol.OptionRequestChanges:
		text := cmp.Or(d.Answer.Text, defaultChanges)
		var rel protocol.SubagentRelaunchData
		if err := co.deps.Link.Call(ctx, &protocol.SubagentRelaunch{Header: protocol.Header{Type: protocol.TypeSubagentRelaunch},
			ParentAgentID: g.LeadAgentID, Target: t.Assignee, Task: text}, &rel); err != nil {
			return co.reopen(d, "the worker could not be relaunched: "+protocol.AsError(err).Message)
		}
		t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
			if x.State != store.TaskReview {
				return errUnchanged
			}
			x.State, x.JobID, x.RunID, x.CI = store.TaskDoing, rel.JobID, rel.RunID, nil
			return nil
		})
		if ok {
			co.feed(store.FeedItem{GoalID: t2.GoalID, TaskID: t2.TaskID, AgentID: t2.Assignee, Kind: store.FeedTask, Text: t2.Title + ": changes requested"})
			co.tell(&followTask{taskID: t2.TaskID})
		}
	case protocol.OptionReject:
		co.killWorker(ctx, t)
		if t.WorkspaceID != "" {
			if err := co.deps.Link.Call(ctx, &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire},
				WorkspaceID: t.WorkspaceID, BranchDisposition: protocol.DispositionDeleteConfirmed}, nil); err != nil {
				return co.reopen(d, "the branch could not be abandoned: "+protocol.AsError(err).Message)
			}
		}
		t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
			if x.State != store.TaskReview {
				return errUnchanged
			}
			x.State = store.TaskCancelled
			return nil
		})
		if ok {
			co.feed(store.FeedItem{GoalID: t2.GoalID, TaskID: t2.TaskID, Kind: store.FeedTask, Text: t2.Title + ": rejected, its branch abandoned"})
			co.blockDependents(t2)
			co.refreshGoal(t2.GoalID)
		}
	}
	return d
}

// merge merges a task's branch into the main checkout (strategy merge),
// then retires its workspace proving the merge (delete_if_merged): the task
// is done and its dependents may start, branching after the merge.
func (co *Coordinator) merge(ctx context.Context, g store.Goal, t store.Task, d store.Decision) store.Decision {
	if t.Worktree != "" {
		if err := co.commitWork(ctx, t.Worktree, t.Title); err != nil {
			return co.reopen(d, "the worker's changes could not be committed: "+err.Error())
		}
	}
	co.killWorker(ctx, t)
	var res protocol.WorkspaceMergeData
	if err := co.deps.Link.Call(ctx, &protocol.WorkspaceMerge{Header: protocol.Header{Type: protocol.TypeWorkspaceMerge},
		WorkspaceID: t.WorkspaceID, Strategy: protocol.MergeMerge, Message: "Merge task: " + t.Title}, &res); err != nil {
		reason := protocol.AsError(err).Message
		if r, ok := protocol.WorkspaceRefusalOf(err); ok {
			reason = fmt.Sprintf("%s: %s", r.Kind, r.Reason)
		}
		return co.reopen(d, "the merge was refused: "+reason)
	}
	retired := true
	if err := co.deps.Link.Call(ctx, &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire},
		WorkspaceID: t.WorkspaceID, BranchDisposition: protocol.DispositionDeleteIfMerged}, nil); err != nil {
		retired = false
		co.feed(store.FeedItem{GoalID: t.GoalID, TaskID: t.TaskID, Kind: store.FeedError,
			Text: t.Title + ": merged, but its workspace was not retired: " + protocol.AsError(err).Message})
	}
	t2, ok := co.setTask(t.TaskID, func(x *store.Task) error {
		if x.State != store.TaskReview {
			return errUnchanged
		}
		x.State = store.TaskDone
		return nil
	})
	if ok {
		text := fmt.Sprintf("%s: merged into %s (%d file(s), +%d −%d)", t2.Title, cmp.Or(res.IntegrationTarget, "the main checkout"),
			res.Stats.Files, res.Stats.Additions, res.Stats.Deletions)
		if retired {
			text += ", worktree retired"
		}
		co.feed(store.FeedItem{GoalID: t2.GoalID, TaskID: t2.TaskID, AgentID: t2.Assignee, Kind: store.FeedMerge, Text: text})
		co.refreshGoal(g.GoalID)
	}
	return d
}

// killWorker stops the worker's runtime (agent.kill answers once it is
// gone): a workspace whose agent runs is not retired (live).
func (co *Coordinator) killWorker(ctx context.Context, t store.Task) {
	if t.Assignee == "" {
		return
	}
	if err := co.deps.Link.Call(ctx, &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: t.Assignee}}, nil); err != nil {
		co.deps.Logger.Debug("team: stop a worker's runtime", "agent", t.Assignee, "err", err)
	}
}

// reopen opens an answered merge decision again with the reason its answer
// could not be carried out, and returns it.
func (co *Coordinator) reopen(d store.Decision, reason string) store.Decision {
	d2, err := co.deps.Store.ReopenDecision(d.DecisionID, reason)
	if err != nil {
		co.deps.Logger.Error("team: reopen a decision", "decision", d.DecisionID, "err", err)
		return d
	}
	co.emit(decisionEvent(d2))
	co.feed(store.FeedItem{GoalID: d2.GoalID, TaskID: d2.TaskID, Kind: store.FeedError, Text: d2.Prompt + " reopened: " + reason})
	return d2
}

// message records a team message and delivers it: to "user", a feed item
// only; to the lead (or "all": the lead, unless the text starts with
// "@name" naming a worker of the goal), or an agent id: a worker with a
// doing task is steered as its lead steers it (into its turn), any other
// agent prompted.
func (co *Coordinator) message(ctx context.Context, m *protocol.TeamMessage) (any, error) {
	var g store.Goal
	var err error
	if m.GoalID != "" {
		if g, err = co.deps.Store.GetGoal(m.GoalID); err != nil {
			return nil, err
		}
	} else if gs, err := co.deps.Store.OpenGoals(); err == nil && len(gs) > 0 {
		g = gs[len(gs)-1]
	}
	to := m.To
	kind := store.FeedMessage
	switch to {
	case "user":
		kind = store.FeedUser
	case "lead", "all":
		if g.LeadAgentID == "" {
			return nil, protocol.Errorf(protocol.CodeNotFound, "no goal with a lead to send the message to")
		}
		to = g.LeadAgentID
		if m.To == "all" && strings.HasPrefix(m.Text, "@") && g.GoalID != "" {
			name, _, _ := strings.Cut(strings.TrimPrefix(m.Text, "@"), " ")
			if id := co.workerNamed(ctx, g, name); id != "" {
				to = id
			}
		}
	}
	if kind == store.FeedMessage && co.deps.Link != nil && !co.agentExists(ctx, to) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "to: no agent %s", to)
	}
	item, err := co.deps.Store.AppendFeed(store.FeedItem{GoalID: g.GoalID, Kind: kind, AgentID: m.FromAgentID, To: to, Text: m.Text})
	if err != nil {
		return nil, err
	}
	co.emit(feedEvent(item))
	if kind == store.FeedMessage && co.deps.Link != nil {
		if err := co.deliver(ctx, g, to, m.Text); err != nil {
			return nil, err
		}
	}
	return protocol.TeamFeedItemData{Item: feedView(item)}, nil
}

// workerNamed finds the worker of g whose alias or title is name.
func (co *Coordinator) workerNamed(ctx context.Context, g store.Goal, name string) string {
	ts, err := co.deps.Store.ListTasks(g.GoalID)
	if err != nil || name == "" {
		return ""
	}
	for _, t := range ts {
		if t.Assignee == "" {
			continue
		}
		var st protocol.AgentListData
		if err := co.deps.Link.Call(ctx, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: t.Assignee}}, &st); err != nil || len(st.Agents) != 1 {
			continue
		}
		a := st.Agents[0]
		if strings.EqualFold(a.Alias, name) || strings.EqualFold(a.Title, name) || strings.EqualFold(a.Name, name) {
			return t.Assignee
		}
	}
	return ""
}

// deliver gives agent `to` the message: a worker of a doing task of g is
// steered into its run's turn by the lead, any other agent prompted.
func (co *Coordinator) deliver(ctx context.Context, g store.Goal, to, text string) error {
	if g.GoalID != "" && g.LeadAgentID != "" {
		if ts, err := co.deps.Store.ListTasks(g.GoalID); err == nil {
			for _, t := range ts {
				if t.Assignee == to && t.State == store.TaskDoing && t.RunID != "" {
					var res protocol.SubagentSteerData
					err := co.deps.Link.Call(ctx, &protocol.SubagentSteer{Header: protocol.Header{Type: protocol.TypeSubagentSteer},
						ParentAgentID: g.LeadAgentID, Target: t.RunID, Message: text}, &res)
					if err == nil && res.Status == protocol.SteerInjected {
						return nil
					}
					return protocol.Errorf(protocol.CodeConflict, "the worker's turn ended before the message reached it")
				}
			}
		}
	}
	return co.deps.Link.Prompt(ctx, to, text, "")
}
