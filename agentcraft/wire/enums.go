package wire

// An Enum is a closed set of string values of the dialect. The decoders
// reject any other value with CodeBadEnum, so a server never acts on a value
// its clients would not render.
type Enum interface {
	// Valid reports whether the value is one the dialect defines.
	Valid() bool
}

// AgentState is what an agent is doing right now; it drives the nameplate
// dot color, the particles and the animation of the agent in the world.
type AgentState string

// The AgentState values.
const (
	StateIdle        AgentState = "idle"
	StateThinking    AgentState = "thinking"
	StateReading     AgentState = "reading"
	StateEditing     AgentState = "editing"
	StateRunning     AgentState = "running"
	StateTesting     AgentState = "testing"
	StateWaitingUser AgentState = "waiting_user"
	StateBlocked     AgentState = "blocked"
	StateDone        AgentState = "done"
	StateError       AgentState = "error"
)

// Valid reports whether s is an AgentState of the dialect.
func (s AgentState) Valid() bool {
	switch s {
	case StateIdle, StateThinking, StateReading, StateEditing, StateRunning,
		StateTesting, StateWaitingUser, StateBlocked, StateDone, StateError:
		return true
	}
	return false
}

// Station is where in the HQ an agent should walk to; StationUser is next
// to the player (the Decision Podium).
type Station string

// The Station values.
const (
	StationDesk         Station = "desk"
	StationLibrary      Station = "library"
	StationTerminal     Station = "terminal"
	StationTestbench    Station = "testbench"
	StationMergestation Station = "mergestation"
	StationMeeting      Station = "meeting"
	StationLounge       Station = "lounge"
	StationUser         Station = "user"
)

// Valid reports whether s is a Station of the dialect.
func (s Station) Valid() bool {
	switch s {
	case StationDesk, StationLibrary, StationTerminal, StationTestbench,
		StationMergestation, StationMeeting, StationLounge, StationUser:
		return true
	}
	return false
}

// AgentRole tells the team's lead from its workers.
type AgentRole string

// The AgentRole values.
const (
	RoleLead   AgentRole = "lead"
	RoleWorker AgentRole = "worker"
)

// Valid reports whether r is an AgentRole of the dialect.
func (r AgentRole) Valid() bool { return r == RoleLead || r == RoleWorker }

// TaskStatus is the Task Wall column of a task. Cancelled tasks are kept for
// history but are not shown on the wall.
type TaskStatus string

// The TaskStatus values.
const (
	TaskTodo      TaskStatus = "todo"
	TaskDoing     TaskStatus = "doing"
	TaskReview    TaskStatus = "review"
	TaskDone      TaskStatus = "done"
	TaskBlocked   TaskStatus = "blocked"
	TaskCancelled TaskStatus = "cancelled"
)

// Valid reports whether s is a TaskStatus of the dialect.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskTodo, TaskDoing, TaskReview, TaskDone, TaskBlocked, TaskCancelled:
		return true
	}
	return false
}

// CiStatus is the latest CI/test result of a task or a repo.
type CiStatus string

// The CiStatus values.
const (
	CiUnknown CiStatus = "unknown"
	CiRunning CiStatus = "running"
	CiPass    CiStatus = "pass"
	CiFail    CiStatus = "fail"
)

// Valid reports whether s is a CiStatus of the dialect.
func (s CiStatus) Valid() bool {
	switch s {
	case CiUnknown, CiRunning, CiPass, CiFail:
		return true
	}
	return false
}

// LogKind is how an agent monitor renders one log entry.
type LogKind string

// The LogKind values. LogDiff entries use unified +/- line prefixes.
const (
	LogText   LogKind = "text"
	LogTool   LogKind = "tool"
	LogResult LogKind = "result"
	LogError  LogKind = "error"
	LogDiff   LogKind = "diff"
)

// Valid reports whether k is a LogKind of the dialect.
func (k LogKind) Valid() bool {
	switch k {
	case LogText, LogTool, LogResult, LogError, LogDiff:
		return true
	}
	return false
}

// DecisionKind is what a decision asks the person: a question, a
// permission, or a merge of a task's branch.
type DecisionKind string

// The DecisionKind values.
const (
	DecisionQuestion   DecisionKind = "question"
	DecisionPermission DecisionKind = "permission"
	DecisionMerge      DecisionKind = "merge"
)

// Valid reports whether k is a DecisionKind of the dialect.
func (k DecisionKind) Valid() bool {
	switch k {
	case DecisionQuestion, DecisionPermission, DecisionMerge:
		return true
	}
	return false
}

// DecisionStatus is where a decision stands. DecisionCancelled means it
// became moot (agent stopped, task cancelled); clients render it like an
// answered one.
type DecisionStatus string

// The DecisionStatus values.
const (
	DecisionOpen      DecisionStatus = "open"
	DecisionAnswered  DecisionStatus = "answered"
	DecisionCancelled DecisionStatus = "cancelled"
)

// Valid reports whether s is a DecisionStatus of the dialect.
func (s DecisionStatus) Valid() bool {
	switch s {
	case DecisionOpen, DecisionAnswered, DecisionCancelled:
		return true
	}
	return false
}

// GoalStatus is where a goal stands: planning (the lead is planning), then
// active, then done (every non-cancelled task merged or done); cancelled
// when every task was cancelled or rejected (back to active if the lead adds
// a task); failed when planning failed.
type GoalStatus string

// The GoalStatus values.
const (
	GoalPlanning  GoalStatus = "planning"
	GoalActive    GoalStatus = "active"
	GoalDone      GoalStatus = "done"
	GoalFailed    GoalStatus = "failed"
	GoalCancelled GoalStatus = "cancelled"
)

// Valid reports whether s is a GoalStatus of the dialect.
func (s GoalStatus) Valid() bool {
	switch s {
	case GoalPlanning, GoalActive, GoalDone, GoalFailed, GoalCancelled:
		return true
	}
	return false
}

// FeedKind is what an activity feed item is about.
type FeedKind string

// The FeedKind values.
const (
	FeedGoal     FeedKind = "goal"
	FeedPlan     FeedKind = "plan"
	FeedTask     FeedKind = "task"
	FeedMessage  FeedKind = "message"
	FeedDecision FeedKind = "decision"
	FeedMerge    FeedKind = "merge"
	FeedCi       FeedKind = "ci"
	FeedMemory   FeedKind = "memory"
	FeedSystem   FeedKind = "system"
	FeedError    FeedKind = "error"
	FeedUser     FeedKind = "user"
)

// Valid reports whether k is a FeedKind of the dialect.
func (k FeedKind) Valid() bool {
	switch k {
	case FeedGoal, FeedPlan, FeedTask, FeedMessage, FeedDecision, FeedMerge,
		FeedCi, FeedMemory, FeedSystem, FeedError, FeedUser:
		return true
	}
	return false
}

// NotifyLevel is how loud a notify toast is; NotifyNeedUser means a
// decision is waiting (the mod plays a bell).
type NotifyLevel string

// The NotifyLevel values.
const (
	NotifyInfo     NotifyLevel = "info"
	NotifyWarn     NotifyLevel = "warn"
	NotifyNeedUser NotifyLevel = "need_user"
)

// Valid reports whether l is a NotifyLevel of the dialect.
func (l NotifyLevel) Valid() bool {
	switch l {
	case NotifyInfo, NotifyWarn, NotifyNeedUser:
		return true
	}
	return false
}

// WorktreeStatus is where a task's worktree stands.
type WorktreeStatus string

// The WorktreeStatus values.
const (
	WorktreeActive    WorktreeStatus = "active"
	WorktreeMerged    WorktreeStatus = "merged"
	WorktreeAbandoned WorktreeStatus = "abandoned"
)

// Valid reports whether s is a WorktreeStatus of the dialect.
func (s WorktreeStatus) Valid() bool {
	switch s {
	case WorktreeActive, WorktreeMerged, WorktreeAbandoned:
		return true
	}
	return false
}

// BackendName names the backend the agents run on, as the dialect knows
// them: "sim" (scripted) or "claude" (a real model).
type BackendName string

// The BackendName values.
const (
	BackendSim    BackendName = "sim"
	BackendClaude BackendName = "claude"
)

// Valid reports whether b is a BackendName of the dialect.
func (b BackendName) Valid() bool { return b == BackendSim || b == BackendClaude }

// AuthStatus is whether the backend can run; AuthFailed is shown loudly
// (an in-world banner) because the backend cannot run.
type AuthStatus string

// The AuthStatus values.
const (
	AuthOK       AuthStatus = "ok"
	AuthFailed   AuthStatus = "failed"
	AuthUnknown  AuthStatus = "unknown"
	AuthChecking AuthStatus = "checking"
)

// Valid reports whether s is an AuthStatus of the dialect.
func (s AuthStatus) Valid() bool {
	switch s {
	case AuthOK, AuthFailed, AuthUnknown, AuthChecking:
		return true
	}
	return false
}

// DiffFileStatus is how a file changed between base and worktree (the
// dialect spells it inline in DiffFile.status; it is named here so that it
// is checked like the other enums).
type DiffFileStatus string

// The DiffFileStatus values.
const (
	FileAdded    DiffFileStatus = "added"
	FileModified DiffFileStatus = "modified"
	FileDeleted  DiffFileStatus = "deleted"
	FileRenamed  DiffFileStatus = "renamed"
)

// Valid reports whether s is a DiffFileStatus of the dialect.
func (s DiffFileStatus) Valid() bool {
	switch s {
	case FileAdded, FileModified, FileDeleted, FileRenamed:
		return true
	}
	return false
}

// DiffLineKind is what one line of a hunk is: added, deleted or context
// (inline in DiffLine.kind in the dialect).
type DiffLineKind string

// The DiffLineKind values.
const (
	LineAdd DiffLineKind = "add"
	LineDel DiffLineKind = "del"
	LineCtx DiffLineKind = "ctx"
)

// Valid reports whether k is a DiffLineKind of the dialect.
func (k DiffLineKind) Valid() bool { return k == LineAdd || k == LineDel || k == LineCtx }

// TaskAction is how a client steers a task from the Task Wall (inline in
// task.action's action field in the dialect).
type TaskAction string

// The TaskAction values.
const (
	TaskReassign   TaskAction = "reassign"
	TaskCancel     TaskAction = "cancel"
	TaskRetry      TaskAction = "retry"
	TaskPrioritize TaskAction = "prioritize"
)

// Valid reports whether a is a TaskAction of the dialect.
func (a TaskAction) Valid() bool {
	switch a {
	case TaskReassign, TaskCancel, TaskRetry, TaskPrioritize:
		return true
	}
	return false
}

// AgentAction is how a client steers an agent (inline in agent.action's
// action field in the dialect). Pause aborts the current turn and keeps the
// task (open questions are withdrawn); resume continues it. Stop takes the
// agent off shift (active=false) until resume or spawn: its turn is aborted,
// its open questions and permission prompts are withdrawn and its doing
// tasks go back to the board. Spawn brings an off-shift agent onto the team.
type AgentAction string

// The AgentAction values.
const (
	AgentPause  AgentAction = "pause"
	AgentResume AgentAction = "resume"
	AgentStop   AgentAction = "stop"
	AgentSpawn  AgentAction = "spawn"
)

// Valid reports whether a is an AgentAction of the dialect.
func (a AgentAction) Valid() bool {
	switch a {
	case AgentPause, AgentResume, AgentStop, AgentSpawn:
		return true
	}
	return false
}
