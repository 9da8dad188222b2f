package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
)

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
