package protocol

// The team commands and events are Shard extensions (docs/protocol.md
// §10.4): a goal a person gives a team, the board of tasks its lead plans
// and its workers build, each in a workspace of its own, the decisions a
// person makes (questions, permissions, merges), the team's memory and its
// feed. They are daemon-level commands like workspace.*: no routing
// agent_id, answered by the team coordinator. The entities mirror the
// AgentCraft v1 dialect's (docs/agentcraft.md) in snake_case, with the same
// enum spellings, so one record serves both.
//
// Privacy: a task's worker prompt is private like a job's task text; it is
// given in team.task.create and never appears in a response or event.
// Titles, descriptions, decisions, memory and the feed are shown to every
// connection that may list agents (one trust level, §4.3), as titles are.

// Team command types (Shard extensions, docs/protocol.md §10.4).
const (
	TypeTeamGoalSubmit     = "team.goal.submit"
	TypeTeamGoalList       = "team.goal.list"
	TypeTeamGoalShow       = "team.goal.show"
	TypeTeamGoalCancel     = "team.goal.cancel"
	TypeTeamTaskCreate     = "team.task.create"
	TypeTeamTaskAction     = "team.task.action"
	TypeTeamDecisionList   = "team.decision.list"
	TypeTeamDecisionAnswer = "team.decision.answer"
	TypeTeamMemoryList     = "team.memory.list"
	TypeTeamMemoryPut      = "team.memory.put"
	TypeTeamMemoryDelete   = "team.memory.delete"
	TypeTeamFeed           = "team.feed"
	TypeTeamMessage        = "team.message"
)

// Team event types: daemon-wide, to every connection, each carrying the
// whole entity as it is now (an upsert by id), sent once it is durable.
const (
	TypeTeamGoalChanged     = "team_goal_changed"
	TypeTeamTaskChanged     = "team_task_changed"
	TypeTeamDecisionChanged = "team_decision_changed"
	TypeTeamMemoryChanged   = "team_memory_changed"
	TypeTeamFeedAdded       = "team_feed_added"
)

// Goal states (the dialect's GoalStatus).
const (
	GoalPlanning  = "planning"
	GoalActive    = "active"
	GoalDone      = "done"
	GoalFailed    = "failed"
	GoalCancelled = "cancelled"
)

// Task states (the dialect's TaskStatus): todo → doing → review → done, or
// blocked / cancelled.
const (
	TaskTodo      = "todo"
	TaskDoing     = "doing"
	TaskReview    = "review"
	TaskDone      = "done"
	TaskBlocked   = "blocked"
	TaskCancelled = "cancelled"
)

// CI states of a task's test command (the dialect's CiStatus).
const (
	CIUnknown = "unknown"
	CIRunning = "running"
	CIPass    = "pass"
	CIFail    = "fail"
)

// Decision kinds and states (the dialect's DecisionKind, DecisionStatus).
const (
	DecisionKindQuestion   = "question"
	DecisionKindPermission = "permission"
	DecisionKindMerge      = "merge"

	DecisionOpen      = "open"
	DecisionAnswered  = "answered"
	DecisionCancelled = "cancelled"
)

// The exact option labels of merge and permission decisions, in order, the
// first the default (docs/agentcraft.md §6; the same in both dialects).
const (
	OptionMerge          = "Merge"
	OptionRequestChanges = "Request changes"
	OptionReject         = "Reject"

	OptionAllowOnce   = "Allow once"
	OptionAlwaysAllow = "Always allow for this agent"
	OptionDeny        = "Deny"
)

// Task actions (the dialect's task.action).
const (
	TaskActionReassign   = "reassign"
	TaskActionCancel     = "cancel"
	TaskActionRetry      = "retry"
	TaskActionPrioritize = "prioritize"
)

// Feed kinds (the dialect's FeedKind).
const (
	FeedGoal     = "goal"
	FeedPlan     = "plan"
	FeedTask     = "task"
	FeedMessage  = "message"
	FeedDecision = "decision"
	FeedMerge    = "merge"
	FeedCI       = "ci"
	FeedMemory   = "memory"
	FeedSystem   = "system"
	FeedError    = "error"
	FeedUser     = "user"
)

// MemoryScopeShared is the memory scope every agent of the team reads; any
// other scope is an agent id.
const MemoryScopeShared = "shared"

// TeamGoal is a goal and the team working on it.
type TeamGoal struct {
	GoalID      string `json:"goal_id"`
	Text        string `json:"text"`
	Status      string `json:"status"`
	LeadAgentID string `json:"lead_agent_id,omitempty"`
	// Cwd is the repository's main checkout: workers branch from it and
	// merge into it.
	Cwd string `json:"cwd,omitempty"`
	// CostLimitUSD is the most the goal may spend; omitted: no limit.
	CostLimitUSD *float64 `json:"cost_limit_usd,omitempty"`
	// CostUSD is what the goal's agents spent so far.
	CostUSD float64 `json:"cost_usd"`
	// Progress is the fraction of its tasks that are done, 0 to 1.
	Progress  float64 `json:"progress"`
	CreatedAt int64   `json:"created_at"`
	UpdatedAt int64   `json:"updated_at"`
	EndedAt   int64   `json:"ended_at,omitempty"`
}

// TeamTask is one card of a goal's board, without its private prompt.
type TeamTask struct {
	TaskID        string   `json:"task_id"`
	GoalID        string   `json:"goal_id"`
	Title         string   `json:"title"`
	Description   string   `json:"description,omitempty"`
	State         string   `json:"state"`
	Priority      int      `json:"priority"`
	Deps          []string `json:"deps"`
	Assignee      string   `json:"assignee,omitempty"` // the worker's agent_id
	BlockedReason string   `json:"blocked_reason,omitempty"`
	Summary       string   `json:"summary,omitempty"`
	CreatedBy     string   `json:"created_by,omitempty"`
	JobID         string   `json:"job_id,omitempty"`
	RunID         string   `json:"run_id,omitempty"`
	WorkspaceID   string   `json:"workspace_id,omitempty"`
	Branch        string   `json:"branch,omitempty"`
	Worktree      string   `json:"worktree,omitempty"`
	// Diff is how far the task's branch is from its base when its worker
	// last finished.
	Diff *TeamDiffStats `json:"diff,omitempty"`
	// CI is the repository's test command's result in the worktree; state
	// "unknown" when the repository has none.
	CI        TeamCI `json:"ci"`
	CreatedAt int64  `json:"created_at"`
	UpdatedAt int64  `json:"updated_at"`
	// Revision counts the task's writes: of two cards, the higher is newer.
	Revision int64 `json:"revision"`
}

// TeamDiffStats is a task branch's distance from its base.
type TeamDiffStats struct {
	Files     int `json:"files"`
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	Ahead     int `json:"ahead"`
}

// TeamCI is a task's test command result.
type TeamCI struct {
	Status  string `json:"status"`
	Summary string `json:"summary,omitempty"` // the output's last lines
}

// TeamDecision is one entry of the decisions queue.
type TeamDecision struct {
	DecisionID string `json:"decision_id"`
	GoalID     string `json:"goal_id"`
	TaskID     string `json:"task_id,omitempty"`
	AgentID    string `json:"agent_id,omitempty"` // the agent waiting on it
	Kind       string `json:"kind"`
	Question   string `json:"question"`
	Context    string `json:"context,omitempty"`
	// Options are the labels, the first the default; empty for a
	// free-text question.
	Options []string `json:"options"`
	Tool    string   `json:"tool,omitempty"` // a permission decision's tool
	// RequestID is the permission_request or ui_request the decision
	// answers (permission and question decisions).
	RequestID     string      `json:"request_id,omitempty"`
	State         string      `json:"state"`
	Answer        *TeamAnswer `json:"answer,omitempty"`
	RefusedReason string      `json:"refused_reason,omitempty"`
	CreatedAt     int64       `json:"created_at"`
	UpdatedAt     int64       `json:"updated_at"`
}

// TeamAnswer is how a decision was answered. By is who answered: "user"
// for the person through team.decision.answer, the agent's id for an
// agent's answer (by_agent_id), or the transport of another client that
// answered the request itself ("unix", "websocket").
type TeamAnswer struct {
	Option string `json:"option,omitempty"`
	Text   string `json:"text,omitempty"`
	By     string `json:"by,omitempty"`
	At     int64  `json:"at"`
}

// TeamMemoryEntry is one markdown note of the team's memory.
type TeamMemoryEntry struct {
	MemoryID string `json:"memory_id"`
	Scope    string `json:"scope"` // "shared" or an agent id
	Key      string `json:"key"`   // unique in its scope
	Title    string `json:"title,omitempty"`
	Body     string `json:"body"`
	Author   string `json:"author,omitempty"`
	Updated  int64  `json:"updated"`
}

// TeamFeedItem is one line of the team's activity feed.
type TeamFeedItem struct {
	FeedID  string `json:"feed_id"` // sorts by append time
	GoalID  string `json:"goal_id,omitempty"`
	Kind    string `json:"kind"`
	Text    string `json:"text"`
	AgentID string `json:"agent_id,omitempty"`
	TaskID  string `json:"task_id,omitempty"`
	To      string `json:"to,omitempty"`
	At      int64  `json:"at"`
}

// ---- Commands ----

// TeamGoalSubmit gives the team a goal. The daemon commits it (planning),
// starts or reuses the lead for Cwd and hands it the goal; the answer does
// not wait for the plan.
type TeamGoalSubmit struct {
	Header
	Text string `json:"text"`
	// Cwd is the repository's main checkout (omitted: the config's
	// team.repo); it must be in a git repository.
	Cwd          string   `json:"cwd,omitempty"`
	CostLimitUSD *float64 `json:"cost_limit_usd,omitempty"`
	// Runtime, Provider and Model choose what the lead runs on, as on
	// agent.create (omitted: the defaults).
	Runtime  string `json:"runtime,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// RequestID makes a retried submit answer the goal it created.
	RequestID string `json:"request_id,omitempty"`
}

// TeamGoalData answers team.goal.submit and team.goal.cancel.
type TeamGoalData struct {
	Goal TeamGoal `json:"goal"`
}

// TeamGoalList lists goals, newest first; OpenOnly keeps the planning and
// active ones.
type TeamGoalList struct {
	Header
	OpenOnly bool `json:"open_only,omitempty"`
}

// TeamGoalListData answers team.goal.list.
type TeamGoalListData struct {
	Goals []TeamGoal `json:"goals"`
}

// TeamGoalShow reads one goal's whole board.
type TeamGoalShow struct {
	Header
	GoalID string `json:"goal_id"`
}

// TeamGoalShowData answers team.goal.show: the goal, its tasks in creation
// order and its decisions, oldest first.
type TeamGoalShowData struct {
	Goal      TeamGoal       `json:"goal"`
	Tasks     []TeamTask     `json:"tasks"`
	Decisions []TeamDecision `json:"decisions"`
}

// TeamGoalCancel cancels a goal: its doing tasks' runs are stopped, its
// other open tasks and open decisions cancelled. Nothing is deleted.
type TeamGoalCancel struct {
	Header
	GoalID string `json:"goal_id"`
}

// TeamTaskSpec is one task of a team.task.create batch.
type TeamTaskSpec struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Prompt is the worker's task text: private (§10.3).
	Prompt   string `json:"prompt"`
	Priority int    `json:"priority,omitempty"`
	// Deps are ids of existing tasks of the goal; After are 1-based
	// positions of earlier specs of the same batch. Both must be done
	// before this task starts.
	Deps  []string `json:"deps,omitempty"`
	After []int    `json:"after,omitempty"`
	// Assignee gives the task to a worker of the goal's lead whose
	// workspace is still active and used by no other open task (its own
	// task ended unmerged: blocked or cancelled): the task goes on there,
	// on that worker's branch, as an agent is bound to one workspace.
	// Omitted: a new worker in a new workspace.
	Assignee string `json:"assignee,omitempty"`
}

// TeamTaskCreate adds tasks to a goal's board, all or none. ByAgentID is
// the agent creating them (the lead's team tool sets it; omitted: the
// person).
type TeamTaskCreate struct {
	Header
	GoalID    string         `json:"goal_id"`
	ByAgentID string         `json:"by_agent_id,omitempty"`
	Tasks     []TeamTaskSpec `json:"tasks"`
}

// TeamTasksData answers team.task.create: the tasks as stored, in order.
type TeamTasksData struct {
	Tasks []TeamTask `json:"tasks"`
}

// TeamTaskAction steers one task from the board: reassign (Arg: an agent
// id), cancel, retry (a blocked or cancelled task back to todo) or
// prioritize (Arg: the priority as a decimal string, as the dialect sends
// it).
type TeamTaskAction struct {
	Header
	TaskID string `json:"task_id"`
	Action string `json:"action"`
	Arg    string `json:"arg,omitempty"`
}

// TeamTaskData answers team.task.action.
type TeamTaskData struct {
	Task TeamTask `json:"task"`
}

// TeamDecisionList lists decisions, oldest first: a goal's (GoalID), or
// the open ones of every goal (OpenOnly), or both filters together.
type TeamDecisionList struct {
	Header
	GoalID   string `json:"goal_id,omitempty"`
	OpenOnly bool   `json:"open_only,omitempty"`
}

// TeamDecisionListData answers team.decision.list.
type TeamDecisionListData struct {
	Decisions []TeamDecision `json:"decisions"`
}

// TeamDecisionAnswer answers an open decision: Option is one of its labels,
// or Index a 0-based position in its options (exactly one of them, except
// for a free-text question, which takes Text alone). Text is the person's
// words: a question's answer, the feedback of "Request changes", a reason
// for "Deny". The first answer wins; a later one is CONFLICT.
//
// ByAgentID is the agent answering (Shard's MCP server sets it for a
// hosted agent's team_answer; omitted: the person). An agent must exist
// and may answer only question decisions: merges and permissions are the
// person's (PERMISSION_DENIED). The decision's answer.by and the feed
// item then name that agent.
type TeamDecisionAnswer struct {
	Header
	DecisionID string `json:"decision_id"`
	Option     string `json:"option,omitempty"`
	Index      *int   `json:"index,omitempty"`
	Text       string `json:"text,omitempty"`
	ByAgentID  string `json:"by_agent_id,omitempty"`
}

// TeamDecisionData answers team.decision.answer: the decision as it is
// once the answer was carried out (a refused merge: open again, with
// refused_reason).
type TeamDecisionData struct {
	Decision TeamDecision `json:"decision"`
}

// TeamMemoryList lists memory entries: one scope's, or every entry when
// Scope is omitted.
type TeamMemoryList struct {
	Header
	Scope string `json:"scope,omitempty"`
}

// TeamMemoryListData answers team.memory.list.
type TeamMemoryListData struct {
	Entries []TeamMemoryEntry `json:"entries"`
}

// TeamMemoryPut writes the entry of Key in Scope (created, or replaced).
type TeamMemoryPut struct {
	Header
	Scope  string `json:"scope"`
	Key    string `json:"key"`
	Title  string `json:"title,omitempty"`
	Body   string `json:"body"`
	Author string `json:"author,omitempty"` // an agent id; omitted: the person
}

// TeamMemoryData answers team.memory.put.
type TeamMemoryData struct {
	Entry TeamMemoryEntry `json:"entry"`
}

// TeamMemoryDelete removes one entry.
type TeamMemoryDelete struct {
	Header
	MemoryID string `json:"memory_id"`
}

// TeamFeed reads the feed newest first: one goal's (GoalID) or the whole
// team's; Before is a feed_id to page from, Limit at most 200 (default 50).
type TeamFeed struct {
	Header
	GoalID string `json:"goal_id,omitempty"`
	Before string `json:"before,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// TeamFeedData answers team.feed; NextBefore is set while older items
// remain.
type TeamFeedData struct {
	Items      []TeamFeedItem `json:"items"`
	NextBefore string         `json:"next_before,omitempty"`
}

// TeamMessage sends a message within the team. To is an agent id, "lead"
// (the goal's lead), "all" (the lead, routed by a leading "@name" of the
// text to the agent so named) or "user" (the person: a feed item and a
// notice). FromAgentID is the sending agent (omitted: the person). A
// message to an agent is delivered into its turn when one runs, otherwise
// as a prompt.
type TeamMessage struct {
	Header
	GoalID      string `json:"goal_id,omitempty"`
	To          string `json:"to"`
	Text        string `json:"text"`
	FromAgentID string `json:"from_agent_id,omitempty"`
}

// TeamFeedItemData answers team.message with the feed item it made.
type TeamFeedItemData struct {
	Item TeamFeedItem `json:"item"`
}

// ---- Events ----

// TeamGoalChanged: a goal was created or changed.
type TeamGoalChanged struct {
	Header
	Goal TeamGoal `json:"goal"`
}

// TeamTaskChanged: a task was created or changed.
type TeamTaskChanged struct {
	Header
	Task TeamTask `json:"task"`
}

// TeamDecisionChanged: a decision was opened, answered, reopened or
// cancelled. A decision waiting on a person is what clients surface (the
// page notifies).
type TeamDecisionChanged struct {
	Header
	Decision TeamDecision `json:"decision"`
}

// TeamMemoryChanged: a memory entry was written, or deleted (Deleted).
type TeamMemoryChanged struct {
	Header
	Entry   TeamMemoryEntry `json:"entry"`
	Deleted bool            `json:"deleted,omitempty"`
}

// TeamFeedAdded: a feed item was appended.
type TeamFeedAdded struct {
	Header
	Item TeamFeedItem `json:"item"`
}
