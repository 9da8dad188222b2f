package team

import (
	"slices"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// The projections of the store's team records onto the wire types
// (protocol/team.go). A task's Prompt never leaves the store: taskView
// starts from Task.Public.

func goalView(g store.Goal) protocol.TeamGoal {
	return protocol.TeamGoal{
		GoalID: g.GoalID, Text: g.Text, Status: string(g.Status), LeadAgentID: g.LeadAgentID, Cwd: g.Cwd,
		CostLimitUSD: g.CostLimit, CostUSD: g.Cost, Progress: g.Progress,
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, EndedAt: g.EndedAt,
	}
}

func taskView(t store.Task) protocol.TeamTask {
	t = t.Public()
	v := protocol.TeamTask{
		TaskID: t.TaskID, GoalID: t.GoalID, Title: t.Title, Description: t.Description, State: string(t.State),
		Priority: t.Priority, Deps: t.Deps, Assignee: t.Assignee, BlockedReason: t.BlockedReason, Summary: t.Summary,
		CreatedBy: t.CreatedBy, JobID: t.JobID, RunID: t.RunID, WorkspaceID: t.WorkspaceID, Branch: t.Branch,
		Worktree: t.Worktree, CI: protocol.TeamCI{Status: protocol.CIUnknown},
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Revision: t.Revision,
	}
	if v.Deps == nil {
		v.Deps = []string{}
	}
	if t.Diff != nil {
		v.Diff = &protocol.TeamDiffStats{Files: t.Diff.Files, Additions: t.Diff.Additions, Deletions: t.Diff.Deletions, Ahead: t.Diff.Ahead}
	}
	if t.CI != nil {
		v.CI = protocol.TeamCI{Status: string(t.CI.Status), Summary: t.CI.Summary}
	}
	return v
}

func decisionView(d store.Decision) protocol.TeamDecision {
	v := protocol.TeamDecision{
		DecisionID: d.DecisionID, GoalID: d.GoalID, TaskID: d.TaskID, AgentID: d.AgentID, Kind: string(d.Kind),
		Question: d.Prompt, Context: d.Context, Options: slices.Clone(d.Options), Tool: d.Tool, RequestID: d.RequestID,
		State: string(d.State), RefusedReason: d.RefusedReason, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}
	if v.Options == nil {
		v.Options = []string{}
	}
	if a := d.Answer; a != nil {
		v.Answer = &protocol.TeamAnswer{Option: a.Option, Text: a.Text, By: a.By, At: a.At}
	}
	return v
}

func memoryView(m store.MemoryEntry) protocol.TeamMemoryEntry {
	return protocol.TeamMemoryEntry{MemoryID: m.MemoryID, Scope: m.Scope, Key: m.Key, Title: m.Title, Body: m.Body,
		Author: m.Author, Updated: m.Updated}
}

func feedView(f store.FeedItem) protocol.TeamFeedItem {
	return protocol.TeamFeedItem{FeedID: f.FeedID, GoalID: f.GoalID, Kind: string(f.Kind), Text: f.Text,
		AgentID: f.AgentID, TaskID: f.TaskID, To: f.To, At: f.At}
}

func views[T, V any](in []T, f func(T) V) []V {
	out := make([]V, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}

// The team_* events: each the whole entity as it is now.

func goalEvent(g store.Goal) []byte {
	return protocol.MustMarshal(protocol.TeamGoalChanged{Header: protocol.Header{Type: protocol.TypeTeamGoalChanged}, Goal: goalView(g)})
}

func taskEvent(t store.Task) []byte {
	return protocol.MustMarshal(protocol.TeamTaskChanged{Header: protocol.Header{Type: protocol.TypeTeamTaskChanged}, Task: taskView(t)})
}

func decisionEvent(d store.Decision) []byte {
	return protocol.MustMarshal(protocol.TeamDecisionChanged{Header: protocol.Header{Type: protocol.TypeTeamDecisionChanged}, Decision: decisionView(d)})
}

func memoryEvent(m store.MemoryEntry, deleted bool) []byte {
	return protocol.MustMarshal(protocol.TeamMemoryChanged{Header: protocol.Header{Type: protocol.TypeTeamMemoryChanged}, Entry: memoryView(m), Deleted: deleted})
}

func feedEvent(f store.FeedItem) []byte {
	return protocol.MustMarshal(protocol.TeamFeedAdded{Header: protocol.Header{Type: protocol.TypeTeamFeedAdded}, Item: feedView(f)})
}
