package team

import (
	"context"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// assignment is where an assigned task goes on: its worker's workspace.
type assignment struct {
	agentID, workspaceID, branch, worktree string
}

// assignable checks that agentID may take task taskID of goal g (an
// assignee given with team.task.create, or a reassigned task's first
// start) and returns where the task then goes on. An agent is bound to one
// workspace, so giving a task to a worker means going on in that worker's
// workspace, on its branch: the worker must be a child of the goal's lead
// with a workspace still active that no other open task (todo, doing,
// review) uses — else one merge would retire the workspace under the
// other task, or stop the worker in the middle of it. Refusals are
// NOT_FOUND (no such agent) and CONFLICT (not a worker of the lead, no
// workspace, or a busy one).
func (co *Coordinator) assignable(ctx context.Context, g store.Goal, agentID, taskID string) (assignment, error) {
	var st protocol.AgentListData
	if err := co.deps.Link.Call(ctx, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: agentID}}, &st); err != nil || len(st.Agents) != 1 {
		return assignment{}, protocol.Errorf(protocol.CodeNotFound, "no agent %s", agentID)
	}
	info := st.Agents[0]
	if g.LeadAgentID == "" || info.ParentAgentID != g.LeadAgentID || info.WorkspaceID == "" {
		return assignment{}, protocol.Errorf(protocol.CodeConflict, "%s is not a worker of goal %s's lead in a workspace of its own", agentID, g.GoalID)
	}
	var ws protocol.WorkspaceStatusData
	if err := co.deps.Link.Call(ctx, &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: info.WorkspaceID}, &ws); err != nil {
		return assignment{}, err
	}
	if ws.Workspace.State != protocol.WorkspaceStateActive {
		return assignment{}, protocol.Errorf(protocol.CodeConflict, "%s's workspace is %s", agentID, ws.Workspace.State)
	}
	tasks, err := co.deps.Store.ListTasks(g.GoalID)
	if err != nil {
		return assignment{}, err
	}
	for _, t := range tasks {
		if t.TaskID == taskID {
			continue
		}
		switch t.State {
		case store.TaskTodo, store.TaskDoing, store.TaskReview:
			if t.WorkspaceID == info.WorkspaceID {
				return assignment{}, protocol.Errorf(protocol.CodeConflict, "%s is busy with task %s (%s)", agentID, t.TaskID, t.State)
			}
		}
		if t.Assignee == agentID && t.RunID != "" && !co.runOver(ctx, t.RunID) {
			// A cancelled task's run stops after the cancel answered.
			return assignment{}, protocol.Errorf(protocol.CodeConflict, "%s is still stopping its run of task %s", agentID, t.TaskID)
		}
	}
	return assignment{agentID: agentID, workspaceID: info.WorkspaceID, branch: ws.Workspace.Branch, worktree: ws.Workspace.Cwd}, nil
}

// assign gives t to the worker of a: the task goes on in its workspace.
func (a assignment) assign(t *store.Task) {
	t.Assignee, t.WorkspaceID, t.Branch, t.Worktree = a.agentID, a.workspaceID, a.branch, a.worktree
}

// runOver reports whether run runID is terminal (false when it cannot be
// read: an assignment waits rather than risk a second run on a worker).
func (co *Coordinator) runOver(ctx context.Context, runID string) bool {
	var job protocol.OpJob
	if err := co.deps.Link.Call(ctx, &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: runID}, &job); err != nil {
		return false
	}
	for _, r := range job.Runs {
		if r.RunID == runID {
			return r.State.Terminal()
		}
	}
	return false
}
