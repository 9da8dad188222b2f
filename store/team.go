package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
)

// The records of a team: goals, their task boards, the decisions queue,
// memory and the activity feed. They are what the AgentCraft v1 dialect
// (docs/agentcraft.md) and Shard's team commands serve, so each carries
// what the dialect's entity of the same name needs (Goal, Task, Decision,
// MemoryEntry, FeedItem), with the same enum spellings; the store keeps
// its own types so that the stored format does not follow a wire dialect. Every write
// commits (group commit, commit.go) before it returns, so a caller
// acknowledges only what is durable. The JSON field names are the stored
// format: add fields with omitempty and never rename one.
//
// Every read is keyed, never a scan of history:
//
//	team_goals           goal_id → Goal
//	team_open_goals      goal_id → empty, while the goal is planning or active
//	team_tasks           goal_id \x00 task_id → Task (a goal's board, in creation order)
//	team_task_goals      task_id → goal_id
//	team_decisions       decision_id → Decision
//	team_goal_decisions  goal_id \x00 decision_id → empty
//	team_open_decisions  decision_id → goal_id, while the decision is open
//	team_memory          scope \x00 memory_id → MemoryEntry
//	team_memory_ids      memory_id → scope
//	team_memory_keys     scope \x00 key → memory_id (a key is unique in its scope)
//	team_feed            goal_id \x00 feed_id → FeedItem (feed ids sort by time;
//	                     goal_id "" holds the team-wide items)
//	team_feed_all        feed_id → goal_id (every item, for the team's latest)
//
// No schema version bump: these buckets are new, so no older build ever
// wrote a team record it left unindexed (the reason versions 2 to 4 were
// bumps). initSchema creates them in an existing file, older builds ignore
// buckets they do not know, and reads treat a missing bucket (an older
// file opened read-only) as empty, as the workspaces buckets do.
const (
	bucketGoals         = "team_goals"
	bucketOpenGoals     = "team_open_goals"
	bucketTasks         = "team_tasks"
	bucketTaskGoals     = "team_task_goals"
	bucketDecisions     = "team_decisions"
	bucketGoalDecisions = "team_goal_decisions"
	bucketOpenDecisions = "team_open_decisions"
	bucketMemory        = "team_memory"
	bucketMemoryIDs     = "team_memory_ids"
	bucketMemoryKeys    = "team_memory_keys"
	bucketFeed          = "team_feed"
	bucketFeedAll       = "team_feed_all"
)

// GoalStatus is where a goal stands; the values are AgentCraft's
// GoalStatus: planning (the lead is planning), active (tasks run), then
// done, failed or cancelled.
type GoalStatus string

// The GoalStatus values.
const (
	GoalPlanning  GoalStatus = "planning"
	GoalActive    GoalStatus = "active"
	GoalDone      GoalStatus = "done"
	GoalFailed    GoalStatus = "failed"
	GoalCancelled GoalStatus = "cancelled"
)

// Valid reports whether s is a GoalStatus.
func (s GoalStatus) Valid() bool {
	switch s {
	case GoalPlanning, GoalActive, GoalDone, GoalFailed, GoalCancelled:
		return true
	}
	return false
}

// Goal is what the person asked a team for, and the team working on it.
type Goal struct {
	GoalID string     `json:"goal_id"` // required; a "goal-" id (internal/ids); the key; never changes
	Text   string     `json:"text"`    // required
	Status GoalStatus `json:"status"`  // required
	// LeadAgentID is the durable agent that plans the goal.
	LeadAgentID string `json:"lead_agent_id,omitempty"`
	// RepoID names the repository (AgentCraft's Repo.ID) and Cwd its main
	// checkout, which workers branch from and merge into.
	RepoID string `json:"repo_id,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
	// CostLimit is the most the goal may spend, in USD; nil is no limit.
	// Past it no new worker starts and the goal asks the person.
	CostLimit *float64 `json:"cost_limit,omitempty"`
	// Cost is what the goal's agents spent so far, in USD.
	Cost float64 `json:"cost,omitempty"`
	// Progress is the fraction of its tasks that are done (0 to 1), as
	// the dialect's Goal.Progress; the caller keeps it.
	Progress  float64 `json:"progress,omitempty"`
	CreatedAt int64   `json:"created_at"`           // epoch milliseconds
	UpdatedAt int64   `json:"updated_at"`           // epoch milliseconds
	EndedAt   int64   `json:"ended_at,omitempty"`   // epoch milliseconds; once done, failed or cancelled
	Revision  int64   `json:"revision"`             // the store counts every write, from 1
	CreatedBy string  `json:"created_by,omitempty"` // a principal or "user"
}

// TaskState is where a task stands on the board. The values are the
// issue's states and AgentCraft's TaskStatus one for one: todo (waiting
// for its dependencies or a worker), doing (a worker runs), review (a merge
// decision waits), done (merged), blocked (needs the person), cancelled
// (kept for history).
type TaskState string

// The TaskState values.
const (
	TaskTodo      TaskState = "todo"
	TaskDoing     TaskState = "doing"
	TaskReview    TaskState = "review"
	TaskDone      TaskState = "done"
	TaskBlocked   TaskState = "blocked"
	TaskCancelled TaskState = "cancelled"
)

// Valid reports whether s is a TaskState.
func (s TaskState) Valid() bool {
	switch s {
	case TaskTodo, TaskDoing, TaskReview, TaskDone, TaskBlocked, TaskCancelled:
		return true
	}
	return false
}

// CIStatus is a task's latest CI (test command) result; the values are
// AgentCraft's CiStatus.
type CIStatus string

// The CIStatus values.
const (
	CIUnknown CIStatus = "unknown"
	CIRunning CIStatus = "running"
	CIPass    CIStatus = "pass"
	CIFail    CIStatus = "fail"
)

// Valid reports whether s is a CIStatus.
func (s CIStatus) Valid() bool {
	switch s {
	case CIUnknown, CIRunning, CIPass, CIFail:
		return true
	}
	return false
}

// CIResult is the outcome of the repository's test command in a task's
// worktree.
type CIResult struct {
	Status CIStatus `json:"status"`
	// Summary is a short plain-text account (the failing test, say).
	Summary string `json:"summary,omitempty"`
}

// DiffStats is how far a task's branch is from its base (AgentCraft's
// Worktree counts).
type DiffStats struct {
	Files     int `json:"files"`
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	Ahead     int `json:"ahead"` // commits on the branch that are not on base
}

// Task is one card of a goal's board.
type Task struct {
	TaskID      string `json:"task_id"` // required; a "task-" id (internal/ids); never changes
	GoalID      string `json:"goal_id"` // required; the goal must exist; never changes
	Title       string `json:"title"`   // required
	Description string `json:"description,omitempty"`
	// Priority: higher starts sooner.
	Priority int `json:"priority,omitempty"`
	// Deps are the ids of tasks of the same goal that must be done before
	// this one starts; they must exist and must not form a cycle.
	Deps []string `json:"deps,omitempty"`
	// Assignee is the worker's agent id, once one is chosen.
	Assignee      string    `json:"assignee,omitempty"`
	State         TaskState `json:"state"` // required
	BlockedReason string    `json:"blocked_reason,omitempty"`
	// Summary is the worker's or lead's account of the result.
	Summary   string `json:"summary,omitempty"`
	CreatedBy string `json:"created_by,omitempty"` // an agent id or "user"
	// Prompt is the worker's task text. It is private like a job's task
	// text: never in a projection, never logged (see Public).
	Prompt string `json:"prompt,omitempty"`
	// JobID and RunID name the subagent job and run once started.
	JobID string `json:"job_id,omitempty"`
	RunID string `json:"run_id,omitempty"`
	// WorkspaceID, Branch and Worktree name the task's workspace.
	WorkspaceID string     `json:"workspace_id,omitempty"`
	Branch      string     `json:"branch,omitempty"`
	Worktree    string     `json:"worktree,omitempty"` // its path
	Diff        *DiffStats `json:"diff,omitempty"`
	CI          *CIResult  `json:"ci,omitempty"`
	CreatedAt   int64      `json:"created_at"` // epoch milliseconds
	UpdatedAt   int64      `json:"updated_at"` // epoch milliseconds
	// Revision counts the record's writes, from 1; the store sets it, so
	// a client can tell a newer card from an older one.
	Revision int64 `json:"revision"`
}

// Public returns the task without its private Prompt: what any projection
// (wire, page, AgentCraft) starts from.
func (t Task) Public() Task {
	t.Prompt = ""
	t.Deps = slices.Clone(t.Deps)
	return t
}

// DecisionKind is what a decision asks; the values are AgentCraft's.
type DecisionKind string

// The DecisionKind values.
const (
	DecisionQuestion   DecisionKind = "question"
	DecisionPermission DecisionKind = "permission"
	DecisionMerge      DecisionKind = "merge"
)

// Valid reports whether k is a DecisionKind.
func (k DecisionKind) Valid() bool {
	switch k {
	case DecisionQuestion, DecisionPermission, DecisionMerge:
		return true
	}
	return false
}

// DecisionState is where a decision stands; the values are AgentCraft's
// DecisionStatus.
type DecisionState string

// The DecisionState values.
const (
	DecisionOpen      DecisionState = "open"
	DecisionAnswered  DecisionState = "answered"
	DecisionCancelled DecisionState = "cancelled"
)

// Valid reports whether s is a DecisionState.
func (s DecisionState) Valid() bool {
	switch s {
	case DecisionOpen, DecisionAnswered, DecisionCancelled:
		return true
	}
	return false
}

// Decision is one entry of the decisions queue.
type Decision struct {
	DecisionID string       `json:"decision_id"` // required; a "decision-" id (internal/ids); never changes
	GoalID     string       `json:"goal_id"`     // required; the goal must exist; never changes
	TaskID     string       `json:"task_id,omitempty"`
	AgentID    string       `json:"agent_id,omitempty"` // the agent waiting on it
	Kind       DecisionKind `json:"kind"`               // required
	// Prompt is the question or body shown to the person.
	Prompt string `json:"prompt"`
	// Context is extra plain text (a merge's summary and diff stat).
	Context string `json:"context,omitempty"`
	// Options are the button labels, the first the default; none for a
	// free-text question. Labels are unique.
	Options []string `json:"options,omitempty"`
	// Tool names the tool of a permission decision.
	Tool   string          `json:"tool,omitempty"`
	State  DecisionState   `json:"state"` // required
	Answer *DecisionAnswer `json:"answer,omitempty"`
	// RefusedReason is why the last merge answered was refused; the
	// decision is open again (ReopenDecision).
	RefusedReason string `json:"refused_reason,omitempty"`
	CreatedAt     int64  `json:"created_at"` // epoch milliseconds
	UpdatedAt     int64  `json:"updated_at"` // epoch milliseconds
}

// DecisionAnswer is how a decision was answered.
type DecisionAnswer struct {
	// Index is the chosen option's index, nil for a free-text answer;
	// Option is its label. AnswerDecision fills either from the other.
	Index  *int   `json:"index,omitempty"`
	Option string `json:"option,omitempty"`
	// Text is the free-text answer or feedback ("Request changes").
	Text string `json:"text,omitempty"`
	// By is who answered: a principal, a client or "user".
	By string `json:"by,omitempty"`
	At int64  `json:"at"` // epoch milliseconds; 0 is now
}

// MemoryScopeShared is the scope of the memory every agent of the team
// reads; any other scope is an agent id.
const MemoryScopeShared = "shared"

// MemoryEntry is one markdown note of the team's memory.
type MemoryEntry struct {
	MemoryID string `json:"memory_id"` // required; a "memory-" id (internal/ids); never changes
	Scope    string `json:"scope"`     // required; MemoryScopeShared or an agent id; never changes
	// Key is the entry's slug, unique within its scope (AgentCraft's id
	// is "<scope>/<key>").
	Key     string `json:"key"` // required
	Title   string `json:"title,omitempty"`
	Body    string `json:"body"`             // markdown
	Author  string `json:"author,omitempty"` // the agent id or "user" that last wrote it
	Updated int64  `json:"updated"`          // epoch milliseconds; 0 is now
}

// FeedKind is what a feed item is about; the values are AgentCraft's.
type FeedKind string

// The FeedKind values.
const (
	FeedGoal     FeedKind = "goal"
	FeedPlan     FeedKind = "plan"
	FeedTask     FeedKind = "task"
	FeedMessage  FeedKind = "message"
	FeedDecision FeedKind = "decision"
	FeedMerge    FeedKind = "merge"
	FeedCI       FeedKind = "ci"
	FeedMemory   FeedKind = "memory"
	FeedSystem   FeedKind = "system"
	FeedError    FeedKind = "error"
	FeedUser     FeedKind = "user"
)

// Valid reports whether k is a FeedKind.
func (k FeedKind) Valid() bool {
	switch k {
	case FeedGoal, FeedPlan, FeedTask, FeedMessage, FeedDecision, FeedMerge, FeedCI, FeedMemory, FeedSystem, FeedError, FeedUser:
		return true
	}
	return false
}

// FeedItem is one line of a goal's activity feed; items are appended,
// never changed.
type FeedItem struct {
	FeedID  string   `json:"feed_id"`           // a "feed-" id (internal/ids); the store mints it, so it sorts by append time
	GoalID  string   `json:"goal_id,omitempty"` // the goal, which must exist; "" for a team-wide item
	Kind    FeedKind `json:"kind"`              // required
	Text    string   `json:"text"`
	AgentID string   `json:"agent_id,omitempty"` // who it is about or from
	TaskID  string   `json:"task_id,omitempty"`
	To      string   `json:"to,omitempty"` // a message's recipient
	At      int64    `json:"at"`           // epoch milliseconds; 0 is now
}

// now is the store's clock for the times a caller left at 0.
func now() int64 { return time.Now().UnixMilli() }

// touch sets an update time fn left as it was to now (never backwards).
func touch(at *int64, was int64) {
	if *at == was {
		*at = max(now(), was)
	}
}

// checkID refuses an id without its kind's prefix.
func checkID(kind, what, id string) error {
	if !idgen.HasPrefix(id, kind) || strings.ContainsRune(id, 0) {
		return fmt.Errorf("%w: %s id %q is not a %s- id", ErrInvalid, what, id, kind)
	}
	return nil
}

func (g *Goal) validate() error {
	if err := checkID(idgen.Goal, "goal", g.GoalID); err != nil {
		return err
	}
	switch {
	case g.Text == "":
		return fmt.Errorf("%w: goal %q has no text", ErrInvalid, g.GoalID)
	case !g.Status.Valid():
		return fmt.Errorf("%w: goal %q has status %q", ErrInvalid, g.GoalID, g.Status)
	case g.CostLimit != nil && *g.CostLimit < 0, g.Cost < 0:
		return fmt.Errorf("%w: goal %q has a negative cost or cost limit", ErrInvalid, g.GoalID)
	}
	return nil
}

func (t *Task) validate() error {
	if err := checkID(idgen.Task, "task", t.TaskID); err != nil {
		return err
	}
	if err := checkID(idgen.Goal, "goal", t.GoalID); err != nil {
		return fmt.Errorf("task %q: %w", t.TaskID, err)
	}
	switch {
	case t.Title == "":
		return fmt.Errorf("%w: task %q has no title", ErrInvalid, t.TaskID)
	case !t.State.Valid():
		return fmt.Errorf("%w: task %q has state %q", ErrInvalid, t.TaskID, t.State)
	case t.CI != nil && !t.CI.Status.Valid():
		return fmt.Errorf("%w: task %q has CI status %q", ErrInvalid, t.TaskID, t.CI.Status)
	}
	for i, d := range t.Deps {
		if d == t.TaskID {
			return fmt.Errorf("%w: task %q depends on itself (cycle %s → %s)", ErrInvalid, t.TaskID, d, d)
		}
		if slices.Contains(t.Deps[:i], d) {
			return fmt.Errorf("%w: task %q lists dependency %q twice", ErrInvalid, t.TaskID, d)
		}
	}
	return nil
}

func (d *Decision) validate() error {
	if err := checkID(idgen.Decision, "decision", d.DecisionID); err != nil {
		return err
	}
	if err := checkID(idgen.Goal, "goal", d.GoalID); err != nil {
		return fmt.Errorf("decision %q: %w", d.DecisionID, err)
	}
	switch {
	case !d.Kind.Valid():
		return fmt.Errorf("%w: decision %q has kind %q", ErrInvalid, d.DecisionID, d.Kind)
	case !d.State.Valid():
		return fmt.Errorf("%w: decision %q has state %q", ErrInvalid, d.DecisionID, d.State)
	case d.State == DecisionAnswered && d.Answer == nil:
		return fmt.Errorf("%w: answered decision %q has no answer", ErrInvalid, d.DecisionID)
	}
	for i, o := range d.Options {
		if o == "" || slices.Contains(d.Options[:i], o) {
			return fmt.Errorf("%w: decision %q has an empty or repeated option %q", ErrInvalid, d.DecisionID, o)
		}
	}
	return nil
}

func (m *MemoryEntry) validate() error {
	if err := checkID(idgen.Memory, "memory", m.MemoryID); err != nil {
		return err
	}
	switch {
	case m.Scope == "" || strings.ContainsRune(m.Scope, 0):
		return fmt.Errorf("%w: memory %q has scope %q", ErrInvalid, m.MemoryID, m.Scope)
	case m.Key == "" || strings.ContainsRune(m.Key, 0):
		return fmt.Errorf("%w: memory %q has key %q", ErrInvalid, m.MemoryID, m.Key)
	}
	return nil
}

// scopedKey is a \x00-joined index key.
func scopedKey(a, b string) []byte { return []byte(a + "\x00" + b) }

// prefixKeys returns the keys of b that start with prefix, copied out of
// bbolt's memory, in order.
func prefixKeys(b *bolt.Bucket, prefix []byte) [][]byte {
	var out [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, bytes.Clone(k))
	}
	return out
}

// goalExists refuses a record of a goal that is not stored.
func goalExists(tx *bolt.Tx, goalID string) error {
	ok, err := exists(tx, bucketGoals, goalID)
	if err == nil && !ok {
		err = fmt.Errorf("%w: goal %q", ErrNotFound, goalID)
	}
	return err
}

// ---- goals ----

// CreateGoal stores a new goal, minting its id when GoalID is empty, and
// returns it as stored (CreatedAt and UpdatedAt default to now). A taken id
// is ErrExists; a record missing a required field or with an unknown
// status is ErrInvalid.
func (s *Store) CreateGoal(g Goal) (Goal, error) {
	if g.GoalID == "" {
		g.GoalID = idgen.New(idgen.Goal)
	}
	if g.CreatedAt == 0 {
		g.CreatedAt = now()
	}
	if g.UpdatedAt == 0 {
		g.UpdatedAt = g.CreatedAt
	}
	g.Revision = 1
	if err := g.validate(); err != nil {
		return Goal{}, err
	}
	err := s.update(func(tx *bolt.Tx) error {
		taken, err := exists(tx, bucketGoals, g.GoalID)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: goal %q", ErrExists, g.GoalID)
		}
		return putGoal(tx, &g)
	})
	if err != nil {
		return Goal{}, wrapOp(err, "create goal %q", g.GoalID)
	}
	return g, nil
}

// GetGoal returns goal id, or an error wrapping ErrNotFound.
func (s *Store) GetGoal(id string) (Goal, error) {
	var g Goal
	err := s.db.View(func(tx *bolt.Tx) error {
		return getTeam(tx, bucketGoals, id, "goal", &g)
	})
	if err != nil {
		return Goal{}, wrapOp(err, "get goal %q", id)
	}
	return g, nil
}

// getTeam reads one record of a team bucket, ErrNotFound when it (or its
// bucket, in an older file) is missing.
func getTeam(tx *bolt.Tx, name, key, what string, v any) error {
	found := false
	if optionalBucket(tx, name) != nil {
		var err error
		if found, err = getJSON(tx, name, key, v); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: %s %q", ErrNotFound, what, key)
	}
	return nil
}

// Open reports whether the goal is still under way (planning or active).
func (g *Goal) Open() bool { return g.Status == GoalPlanning || g.Status == GoalActive }

// putGoal writes g and keeps the open-goals index in step.
func putGoal(tx *bolt.Tx, g *Goal) error {
	open := tx.Bucket([]byte(bucketOpenGoals))
	var err error
	if g.Open() {
		err = open.Put([]byte(g.GoalID), nil)
	} else {
		err = open.Delete([]byte(g.GoalID))
	}
	if err != nil {
		return err
	}
	return putJSON(tx, bucketGoals, g.GoalID, g)
}

// OpenGoals returns the goals under way (planning or active), oldest
// first, through team_open_goals: what startup reconciles (doing tasks go
// back to the board) costs the live goals, not the history.
func (s *Store) OpenGoals() ([]Goal, error) {
	out := []Goal{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketOpenGoals)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			var g Goal
			if err := getTeam(tx, bucketGoals, string(k), "goal", &g); err != nil {
				return err
			}
			out = append(out, g)
			return nil
		})
	})
	if err != nil {
		return nil, wrapOp(err, "open goals")
	}
	return out, nil
}

// ListGoals returns every goal, oldest first (goal ids sort by creation
// time), finished ones included: a history listing. Startup and the
// scheduler read OpenGoals instead.
func (s *Store) ListGoals() ([]Goal, error) {
	out := []Goal{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if optionalBucket(tx, bucketGoals) == nil {
			return nil
		}
		var err error
		out, err = listJSON[Goal](tx, bucketGoals)
		return err
	})
	if err != nil {
		return nil, wrapOp(err, "list goals")
	}
	return out, nil
}

// UpdateGoal reads goal id, lets fn modify it and writes the result, in
// one transaction (see UpdateWorkspace for fn's contract: it may run more
// than once and must not call the Store; an error from it writes nothing
// and is returned wrapped). GoalID may not change; the store bumps
// Revision. It returns the stored goal.
func (s *Store) UpdateGoal(id string, fn func(*Goal) error) (Goal, error) {
	var g Goal
	err := s.update(func(tx *bolt.Tx) error {
		g = Goal{}
		found, err := getJSON(tx, bucketGoals, id, &g)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: goal %q", ErrNotFound, id)
		}
		rev, was := g.Revision, g.UpdatedAt
		if err := fn(&g); err != nil {
			return err
		}
		touch(&g.UpdatedAt, was)
		if g.GoalID != id {
			return fmt.Errorf("%w: goal_id of %q may not change (to %q)", ErrInvalid, id, g.GoalID)
		}
		g.Revision = rev + 1
		if err := g.validate(); err != nil {
			return err
		}
		return putGoal(tx, &g)
	})
	if err != nil {
		return Goal{}, wrapOp(err, "update goal %q", id)
	}
	return g, nil
}

// DeleteGoal removes goal id with its tasks, decisions and feed, in one
// transaction. Memory is the team's, not the goal's, and stays. A missing
// goal is ErrNotFound.
func (s *Store) DeleteGoal(id string) error {
	err := s.update(func(tx *bolt.Tx) error {
		if err := goalExists(tx, id); err != nil {
			return err
		}
		prefix := scopedKey(id, "")
		tasks, err := bucket(tx, bucketTasks)
		if err != nil {
			return err
		}
		taskGoals, err := bucket(tx, bucketTaskGoals)
		if err != nil {
			return err
		}
		for _, k := range prefixKeys(tasks, prefix) {
			if err := taskGoals.Delete(k[len(prefix):]); err != nil {
				return err
			}
			if err := tasks.Delete(k); err != nil {
				return err
			}
		}
		gd, err := bucket(tx, bucketGoalDecisions)
		if err != nil {
			return err
		}
		for _, k := range prefixKeys(gd, prefix) {
			did := k[len(prefix):]
			for _, name := range []string{bucketDecisions, bucketOpenDecisions} {
				if err := tx.Bucket([]byte(name)).Delete(did); err != nil {
					return err
				}
			}
			if err := gd.Delete(k); err != nil {
				return err
			}
		}
		feed, err := bucket(tx, bucketFeed)
		if err != nil {
			return err
		}
		all, err := bucket(tx, bucketFeedAll)
		if err != nil {
			return err
		}
		for _, k := range prefixKeys(feed, prefix) {
			if err := all.Delete(k[len(prefix):]); err != nil {
				return err
			}
			if err := feed.Delete(k); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte(bucketOpenGoals)).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketGoals)).Delete([]byte(id))
	})
	return wrapOp(err, "delete goal %q", id)
}

// ---- tasks ----

// CreateTasks stores new tasks of one goal in one transaction, in order,
// and returns them as stored: an empty TaskID is minted, times default to
// now, Revision is 1. A task's Deps may name tasks stored before or earlier
// in the same call, all of the same goal; a missing dependency, a cycle (named)
// or an unknown state is ErrInvalid, a missing goal ErrNotFound, a taken id
// ErrExists. Nothing is written on error. The sim lead creates a whole plan
// this way, so the board never shows half of it.
func (s *Store) CreateTasks(tasks []Task) ([]Task, error) {
	out := make([]Task, len(tasks))
	t0 := now()
	for i, t := range tasks {
		if t.TaskID == "" {
			t.TaskID = idgen.New(idgen.Task)
		}
		if t.CreatedAt == 0 {
			t.CreatedAt = t0
		}
		if t.UpdatedAt == 0 {
			t.UpdatedAt = t.CreatedAt
		}
		t.Deps = slices.Clone(t.Deps)
		t.Revision = 1
		if err := t.validate(); err != nil {
			return nil, err
		}
		if i > 0 && t.GoalID != out[0].GoalID {
			return nil, fmt.Errorf("%w: tasks %q and %q are of different goals", ErrInvalid, out[0].TaskID, t.TaskID)
		}
		out[i] = t
	}
	if len(out) == 0 {
		return out, nil
	}
	err := s.update(func(tx *bolt.Tx) error {
		if err := goalExists(tx, out[0].GoalID); err != nil {
			return err
		}
		for i := range out {
			taken, err := exists(tx, bucketTaskGoals, out[i].TaskID)
			if err != nil {
				return err
			}
			if taken {
				return fmt.Errorf("%w: task %q", ErrExists, out[i].TaskID)
			}
			if err := putTask(tx, &out[i]); err != nil {
				return err
			}
		}
		for i := range out {
			if err := checkDeps(tx, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp(err, "create tasks")
	}
	return out, nil
}

// CreateTask stores one new task; see CreateTasks.
func (s *Store) CreateTask(t Task) (Task, error) {
	out, err := s.CreateTasks([]Task{t})
	if err != nil {
		return Task{}, err
	}
	return out[0], nil
}

// putTask writes t and its goal index.
func putTask(tx *bolt.Tx, t *Task) error {
	if err := tx.Bucket([]byte(bucketTaskGoals)).Put([]byte(t.TaskID), []byte(t.GoalID)); err != nil {
		return err
	}
	return putJSON(tx, bucketTasks, string(scopedKey(t.GoalID, t.TaskID)), t)
}

// checkDeps refuses t when a dependency is not a task of its goal, or when
// following dependencies from t comes back to t (the error names the
// cycle). Every task written in the transaction is visible.
func checkDeps(tx *bolt.Tx, t *Task) error {
	tasks := tx.Bucket([]byte(bucketTasks))
	for _, d := range t.Deps {
		if tasks.Get(scopedKey(t.GoalID, d)) == nil {
			return fmt.Errorf("%w: task %q depends on %q, which is not a task of goal %q", ErrInvalid, t.TaskID, d, t.GoalID)
		}
	}
	// Depth-first from t's dependencies; path holds the chain followed.
	visited := map[string]bool{}
	var path []string
	var walk func(id string) ([]string, error)
	walk = func(id string) ([]string, error) {
		if id == t.TaskID {
			return append(slices.Clone(path), id), nil
		}
		if visited[id] {
			return nil, nil
		}
		visited[id] = true
		var dep Task
		if _, err := getJSON(tx, bucketTasks, string(scopedKey(t.GoalID, id)), &dep); err != nil {
			return nil, err
		}
		path = append(path, id)
		for _, d := range dep.Deps {
			if c, err := walk(d); c != nil || err != nil {
				return c, err
			}
		}
		path = path[:len(path)-1]
		return nil, nil
	}
	for _, d := range t.Deps {
		path = []string{t.TaskID}
		cycle, err := walk(d)
		if err != nil {
			return err
		}
		if cycle != nil {
			return fmt.Errorf("%w: task %q: dependency cycle %s", ErrInvalid, t.TaskID, strings.Join(cycle, " → "))
		}
	}
	return nil
}

// GetTask returns task id, or an error wrapping ErrNotFound.
func (s *Store) GetTask(id string) (Task, error) {
	var t Task
	err := s.db.View(func(tx *bolt.Tx) error { return getTask(tx, id, &t) })
	if err != nil {
		return Task{}, wrapOp(err, "get task %q", id)
	}
	return t, nil
}

func getTask(tx *bolt.Tx, id string, t *Task) error {
	var goal string
	if b := optionalBucket(tx, bucketTaskGoals); b != nil {
		goal = string(b.Get([]byte(id)))
	}
	if goal == "" {
		return fmt.Errorf("%w: task %q", ErrNotFound, id)
	}
	return getTeam(tx, bucketTasks, string(scopedKey(goal, id)), "task", t)
}

// ListTasks returns the tasks of goal id in creation order (one keyed
// range of team_tasks). An unknown goal has none.
func (s *Store) ListTasks(goalID string) ([]Task, error) {
	out := []Task{}
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = goalTasks(tx, goalID)
		return err
	})
	if err != nil {
		return nil, wrapOp(err, "list tasks of goal %q", goalID)
	}
	return out, nil
}

func goalTasks(tx *bolt.Tx, goalID string) ([]Task, error) {
	out := []Task{}
	b := optionalBucket(tx, bucketTasks)
	if b == nil {
		return out, nil
	}
	prefix := scopedKey(goalID, "")
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var t Task
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("decode task %q: %w", k[len(prefix):], err)
		}
		out = append(out, t)
	}
	return out, nil
}

// ReadyTasks returns the tasks of goal id the scheduler may start: todo,
// with every dependency done. Higher Priority first, then creation order.
// A task whose dependency was cancelled or is blocked is not ready: what
// becomes of it is the lead's (or the person's) call, not the store's.
func (s *Store) ReadyTasks(goalID string) ([]Task, error) {
	all, err := s.ListTasks(goalID)
	if err != nil {
		return nil, err
	}
	state := make(map[string]TaskState, len(all))
	for _, t := range all {
		state[t.TaskID] = t.State
	}
	out := []Task{}
	for _, t := range all {
		if t.State == TaskTodo && !slices.ContainsFunc(t.Deps, func(d string) bool { return state[d] != TaskDone }) {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b Task) int { return cmp.Compare(b.Priority, a.Priority) })
	return out, nil
}

// UpdateTask reads task id, lets fn modify it and writes the result, in
// one transaction (fn's contract as UpdateGoal's). TaskID and GoalID may
// not change; changed Deps are checked as at create (ErrInvalid, naming a
// cycle). The store bumps Revision. It returns the stored task.
func (s *Store) UpdateTask(id string, fn func(*Task) error) (Task, error) {
	var t Task
	err := s.update(func(tx *bolt.Tx) error {
		t = Task{}
		if err := getTask(tx, id, &t); err != nil {
			return err
		}
		goal, rev, deps, was := t.GoalID, t.Revision, slices.Clone(t.Deps), t.UpdatedAt
		if err := fn(&t); err != nil {
			return err
		}
		touch(&t.UpdatedAt, was)
		if t.TaskID != id || t.GoalID != goal {
			return fmt.Errorf("%w: task %q may not change its id or goal", ErrInvalid, id)
		}
		t.Revision = rev + 1
		if err := t.validate(); err != nil {
			return err
		}
		if err := putTask(tx, &t); err != nil {
			return err
		}
		if !slices.Equal(deps, t.Deps) {
			return checkDeps(tx, &t)
		}
		return nil
	})
	if err != nil {
		return Task{}, wrapOp(err, "update task %q", id)
	}
	return t, nil
}

// ---- decisions ----

// CreateDecision stores a new decision of an existing goal (and, when
// TaskID is set, about a task of that goal: else ErrInvalid), minting its
// id when empty, and returns it as stored (state defaults to open; an open
// decision is indexed in team_open_decisions).
func (s *Store) CreateDecision(d Decision) (Decision, error) {
	if d.DecisionID == "" {
		d.DecisionID = idgen.New(idgen.Decision)
	}
	if d.State == "" {
		d.State = DecisionOpen
	}
	if d.CreatedAt == 0 {
		d.CreatedAt = now()
	}
	if d.UpdatedAt == 0 {
		d.UpdatedAt = d.CreatedAt
	}
	d.Options = slices.Clone(d.Options)
	if err := d.validate(); err != nil {
		return Decision{}, err
	}
	err := s.update(func(tx *bolt.Tx) error {
		if err := goalExists(tx, d.GoalID); err != nil {
			return err
		}
		if d.TaskID != "" && tx.Bucket([]byte(bucketTasks)).Get(scopedKey(d.GoalID, d.TaskID)) == nil {
			return fmt.Errorf("%w: decision %q is about %q, which is not a task of goal %q", ErrInvalid, d.DecisionID, d.TaskID, d.GoalID)
		}
		taken, err := exists(tx, bucketDecisions, d.DecisionID)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: decision %q", ErrExists, d.DecisionID)
		}
		if err := tx.Bucket([]byte(bucketGoalDecisions)).Put(scopedKey(d.GoalID, d.DecisionID), nil); err != nil {
			return err
		}
		return putDecision(tx, &d)
	})
	if err != nil {
		return Decision{}, wrapOp(err, "create decision %q", d.DecisionID)
	}
	return d, nil
}

// putDecision writes d and keeps the open index in step.
func putDecision(tx *bolt.Tx, d *Decision) error {
	open := tx.Bucket([]byte(bucketOpenDecisions))
	var err error
	if d.State == DecisionOpen {
		err = open.Put([]byte(d.DecisionID), []byte(d.GoalID))
	} else {
		err = open.Delete([]byte(d.DecisionID))
	}
	if err != nil {
		return err
	}
	return putJSON(tx, bucketDecisions, d.DecisionID, d)
}

// GetDecision returns decision id, or an error wrapping ErrNotFound.
func (s *Store) GetDecision(id string) (Decision, error) {
	var d Decision
	err := s.db.View(func(tx *bolt.Tx) error { return getTeam(tx, bucketDecisions, id, "decision", &d) })
	if err != nil {
		return Decision{}, wrapOp(err, "get decision %q", id)
	}
	return d, nil
}

// OpenDecisions returns every open decision, oldest first: the queue a
// person sees, read through team_open_decisions.
func (s *Store) OpenDecisions() ([]Decision, error) {
	out := []Decision{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketOpenDecisions)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			var d Decision
			if err := getTeam(tx, bucketDecisions, string(k), "decision", &d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, wrapOp(err, "open decisions")
	}
	return out, nil
}

// ListDecisions returns every decision of goal id, oldest first.
func (s *Store) ListDecisions(goalID string) ([]Decision, error) {
	out := []Decision{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketGoalDecisions)
		if b == nil {
			return nil
		}
		prefix := scopedKey(goalID, "")
		for _, k := range prefixKeys(b, prefix) {
			var d Decision
			if err := getTeam(tx, bucketDecisions, string(k[len(prefix):]), "decision", &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp(err, "list decisions of goal %q", goalID)
	}
	return out, nil
}

// UpdateDecision reads decision id, lets fn modify it and writes the
// result, in one transaction (fn's contract as UpdateGoal's; cancel a
// decision this way). DecisionID and GoalID may not change. Answering goes
// through AnswerDecision, which enforces first answer wins.
func (s *Store) UpdateDecision(id string, fn func(*Decision) error) (Decision, error) {
	var d Decision
	err := s.update(func(tx *bolt.Tx) error {
		d = Decision{}
		found, err := getJSON(tx, bucketDecisions, id, &d)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: decision %q", ErrNotFound, id)
		}
		goal, was := d.GoalID, d.UpdatedAt
		if err := fn(&d); err != nil {
			return err
		}
		touch(&d.UpdatedAt, was)
		if d.DecisionID != id || d.GoalID != goal {
			return fmt.Errorf("%w: decision %q may not change its id or goal", ErrInvalid, id)
		}
		if err := d.validate(); err != nil {
			return err
		}
		return putDecision(tx, &d)
	})
	if err != nil {
		return Decision{}, wrapOp(err, "update decision %q", id)
	}
	return d, nil
}

// AnswerDecision answers decision id, first answer wins: it commits only
// if the decision is open, and otherwise fails with ErrConflict saying it
// was already answered (or cancelled). The answer names an option by Index
// or by Option label (the other is filled in; both must agree and exist),
// or is free text; an answer with neither is ErrInvalid. It returns the
// stored decision.
func (s *Store) AnswerDecision(id string, a DecisionAnswer) (Decision, error) {
	if a.At == 0 {
		a.At = now()
	}
	return s.UpdateDecision(id, func(d *Decision) error {
		if d.State != DecisionOpen {
			return fmt.Errorf("%w: decision %q was already %s", ErrConflict, id, d.State)
		}
		ans := a
		switch {
		case ans.Index != nil:
			i := *ans.Index
			if i < 0 || i >= len(d.Options) {
				return fmt.Errorf("%w: decision %q has no option %d", ErrInvalid, id, i)
			}
			if ans.Option != "" && ans.Option != d.Options[i] {
				return fmt.Errorf("%w: decision %q: option %d is %q, not %q", ErrInvalid, id, i, d.Options[i], ans.Option)
			}
			ans.Index, ans.Option = &i, d.Options[i]
		case ans.Option != "":
			i := slices.Index(d.Options, ans.Option)
			if i < 0 {
				return fmt.Errorf("%w: decision %q has no option %q", ErrInvalid, id, ans.Option)
			}
			ans.Index = &i
		case ans.Text == "":
			return fmt.Errorf("%w: an answer to decision %q names no option and has no text", ErrInvalid, id)
		}
		d.State, d.Answer, d.UpdatedAt = DecisionAnswered, &ans, ans.At
		return nil
	})
}

// ReopenDecision opens an answered merge decision again with the reason
// the merge was refused (a dirty checkout, a conflict): the answer is
// cleared, so the next answer wins again. Anything but an answered
// decision is ErrConflict.
func (s *Store) ReopenDecision(id, reason string) (Decision, error) {
	return s.UpdateDecision(id, func(d *Decision) error {
		if d.State != DecisionAnswered {
			return fmt.Errorf("%w: decision %q is %s, not answered", ErrConflict, id, d.State)
		}
		d.State, d.Answer, d.RefusedReason, d.UpdatedAt = DecisionOpen, nil, reason, now()
		return nil
	})
}

// ---- memory ----

// PutMemory writes a memory entry: a new one when no entry of its Scope
// has its Key (an empty MemoryID is minted), else it replaces that entry
// (MemoryID may be left empty, or must match). Updated defaults to now. It
// returns the stored entry.
func (s *Store) PutMemory(m MemoryEntry) (MemoryEntry, error) {
	if m.Updated == 0 {
		m.Updated = now()
	}
	var out MemoryEntry
	err := s.update(func(tx *bolt.Tx) error {
		out = m
		keys := tx.Bucket([]byte(bucketMemoryKeys))
		if prev := string(keys.Get(scopedKey(m.Scope, m.Key))); prev != "" {
			if out.MemoryID != "" && out.MemoryID != prev {
				return fmt.Errorf("%w: key %q of scope %q belongs to memory %q", ErrConflict, m.Key, m.Scope, prev)
			}
			out.MemoryID = prev
		} else if out.MemoryID == "" {
			out.MemoryID = idgen.New(idgen.Memory)
		}
		if err := out.validate(); err != nil {
			return err
		}
		return putMemory(tx, &out)
	})
	if err != nil {
		return MemoryEntry{}, wrapOp(err, "put memory %q", m.Key)
	}
	return out, nil
}

// putMemory writes m over whatever entry had its id, keeping the indexes.
func putMemory(tx *bolt.Tx, m *MemoryEntry) error {
	idsB := tx.Bucket([]byte(bucketMemoryIDs))
	if scope := idsB.Get([]byte(m.MemoryID)); scope != nil {
		var old MemoryEntry
		if _, err := getJSON(tx, bucketMemory, string(scopedKey(string(scope), m.MemoryID)), &old); err != nil {
			return err
		}
		if old.Scope != m.Scope {
			return fmt.Errorf("%w: memory %q may not change its scope", ErrInvalid, m.MemoryID)
		}
		if old.Key != m.Key {
			keys := tx.Bucket([]byte(bucketMemoryKeys))
			if prev := keys.Get(scopedKey(m.Scope, m.Key)); prev != nil && string(prev) != m.MemoryID {
				return fmt.Errorf("%w: key %q of scope %q belongs to memory %q", ErrConflict, m.Key, m.Scope, prev)
			}
			if err := keys.Delete(scopedKey(old.Scope, old.Key)); err != nil {
				return err
			}
		}
	}
	if err := idsB.Put([]byte(m.MemoryID), []byte(m.Scope)); err != nil {
		return err
	}
	if err := tx.Bucket([]byte(bucketMemoryKeys)).Put(scopedKey(m.Scope, m.Key), []byte(m.MemoryID)); err != nil {
		return err
	}
	return putJSON(tx, bucketMemory, string(scopedKey(m.Scope, m.MemoryID)), m)
}

// GetMemory returns memory entry id, or an error wrapping ErrNotFound.
func (s *Store) GetMemory(id string) (MemoryEntry, error) {
	var m MemoryEntry
	err := s.db.View(func(tx *bolt.Tx) error { return getMemory(tx, id, &m) })
	if err != nil {
		return MemoryEntry{}, wrapOp(err, "get memory %q", id)
	}
	return m, nil
}

func getMemory(tx *bolt.Tx, id string, m *MemoryEntry) error {
	var scope string
	if b := optionalBucket(tx, bucketMemoryIDs); b != nil {
		scope = string(b.Get([]byte(id)))
	}
	if scope == "" {
		return fmt.Errorf("%w: memory %q", ErrNotFound, id)
	}
	return getTeam(tx, bucketMemory, string(scopedKey(scope, id)), "memory", m)
}

// ListMemory returns the entries of scope (MemoryScopeShared or an agent
// id), oldest first.
func (s *Store) ListMemory(scope string) ([]MemoryEntry, error) {
	out := []MemoryEntry{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketMemory)
		if b == nil {
			return nil
		}
		prefix := scopedKey(scope, "")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var m MemoryEntry
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decode memory %q: %w", k[len(prefix):], err)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp(err, "list memory of %q", scope)
	}
	return out, nil
}

// UpdateMemory reads entry id, lets fn modify it and writes the result in
// one transaction (fn's contract as UpdateGoal's). MemoryID and Scope may
// not change; a Key another entry of the scope holds is ErrConflict.
// Updated is set to now unless fn set it.
func (s *Store) UpdateMemory(id string, fn func(*MemoryEntry) error) (MemoryEntry, error) {
	var m MemoryEntry
	err := s.update(func(tx *bolt.Tx) error {
		m = MemoryEntry{}
		if err := getMemory(tx, id, &m); err != nil {
			return err
		}
		was := m.Updated
		if err := fn(&m); err != nil {
			return err
		}
		if m.MemoryID != id {
			return fmt.Errorf("%w: memory_id of %q may not change", ErrInvalid, id)
		}
		touch(&m.Updated, was)
		if err := m.validate(); err != nil {
			return err
		}
		return putMemory(tx, &m)
	})
	if err != nil {
		return MemoryEntry{}, wrapOp(err, "update memory %q", id)
	}
	return m, nil
}

// DeleteMemory removes entry id and its index entries. A missing id is
// ErrNotFound.
func (s *Store) DeleteMemory(id string) error {
	err := s.update(func(tx *bolt.Tx) error {
		var m MemoryEntry
		if err := getMemory(tx, id, &m); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketMemoryKeys)).Delete(scopedKey(m.Scope, m.Key)); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketMemoryIDs)).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketMemory)).Delete(scopedKey(m.Scope, id))
	})
	return wrapOp(err, "delete memory %q", id)
}

// ---- feed ----

// AppendFeed appends an item to its goal's feed (GoalID "": the team-wide
// feed, for what belongs to no goal) and returns it as stored: the store
// mints FeedID (any given one is ErrInvalid), so ids sort by append order;
// At defaults to now. A missing goal is ErrNotFound.
func (s *Store) AppendFeed(f FeedItem) (FeedItem, error) {
	if f.FeedID != "" {
		return FeedItem{}, fmt.Errorf("%w: feed item has id %q; the store mints it", ErrInvalid, f.FeedID)
	}
	if f.GoalID != "" {
		if err := checkID(idgen.Goal, "goal", f.GoalID); err != nil {
			return FeedItem{}, fmt.Errorf("feed item: %w", err)
		}
	}
	if !f.Kind.Valid() {
		return FeedItem{}, fmt.Errorf("%w: feed item has kind %q", ErrInvalid, f.Kind)
	}
	if f.At == 0 {
		f.At = now()
	}
	err := s.update(func(tx *bolt.Tx) error {
		if f.GoalID != "" {
			if err := goalExists(tx, f.GoalID); err != nil {
				return err
			}
		}
		// Minted inside the transaction, which commits in queue order, so
		// the keys sort as the items were appended.
		f.FeedID = idgen.New(idgen.Feed)
		if err := tx.Bucket([]byte(bucketFeedAll)).Put([]byte(f.FeedID), []byte(f.GoalID)); err != nil {
			return err
		}
		return putJSON(tx, bucketFeed, string(scopedKey(f.GoalID, f.FeedID)), f)
	})
	if err != nil {
		return FeedItem{}, wrapOp(err, "append feed of goal %q", f.GoalID)
	}
	return f, nil
}

// Feed returns up to limit items of goal id's feed, newest first, older
// than the item before (a FeedID; "" starts at the newest). next is the
// cursor for the following page, "" when there is none. limit <= 0 is
// ErrInvalid.
func (s *Store) Feed(goalID, before string, limit int) (items []FeedItem, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: feed limit %d", ErrInvalid, limit)
	}
	items = []FeedItem{}
	err = s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketFeed)
		if b == nil {
			return nil
		}
		prefix := scopedKey(goalID, "")
		c := b.Cursor()
		var k, v []byte
		if before == "" {
			// The first key past the goal's range, then one back.
			k, v = c.Seek([]byte(goalID + "\x01"))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Seek(scopedKey(goalID, before))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if len(items) == limit {
				next = items[len(items)-1].FeedID
				return nil
			}
			var f FeedItem
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("decode feed item %q: %w", k[len(prefix):], err)
			}
			items = append(items, f)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrapOp(err, "feed of goal %q", goalID)
	}
	return items, next, nil
}

// RecentFeed returns up to limit items of every goal's feed and the
// team-wide one, newest first, older than the item before ("" starts at
// the newest), through team_feed_all: what a client's snapshot shows.
// next and limit are as Feed's.
func (s *Store) RecentFeed(before string, limit int) (items []FeedItem, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: feed limit %d", ErrInvalid, limit)
	}
	items = []FeedItem{}
	err = s.db.View(func(tx *bolt.Tx) error {
		all := optionalBucket(tx, bucketFeedAll)
		if all == nil {
			return nil
		}
		c := all.Cursor()
		var k, v []byte
		if before == "" {
			k, v = c.Last()
		} else if k, v = c.Seek([]byte(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			if len(items) == limit {
				next = items[len(items)-1].FeedID
				return nil
			}
			var f FeedItem
			if err := getTeam(tx, bucketFeed, string(scopedKey(string(v), string(k))), "feed item", &f); err != nil {
				return err
			}
			items = append(items, f)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrapOp(err, "recent feed")
	}
	return items, next, nil
}
