package store

import (
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
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
	// RequestID is the submit's request_id: a repeat answers this goal
	// (CreateGoalOnce).
	RequestID string `json:"request_id,omitempty"`
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

// CreateGoalOnce is CreateGoal for a goal with a RequestID: when a goal was
// created with that request id before, it returns that goal and created
// false, writing nothing (a retried team.goal.submit). Without a RequestID
// it is CreateGoal.
func (s *Store) CreateGoalOnce(g Goal) (out Goal, created bool, err error) {
	if g.RequestID == "" || strings.ContainsRune(g.RequestID, 0) {
		out, err = s.CreateGoal(g)
		return out, err == nil, err
	}
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
		return Goal{}, false, err
	}
	err = s.update(func(tx *bolt.Tx) error {
		out, created = g, true
		reqs := tx.Bucket([]byte(bucketGoalRequests))
		if prev := string(reqs.Get([]byte(g.RequestID))); prev != "" {
			created = false
			return getTeam(tx, bucketGoals, prev, "goal", &out)
		}
		taken, err := exists(tx, bucketGoals, g.GoalID)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: goal %q", ErrExists, g.GoalID)
		}
		if err := reqs.Put([]byte(g.RequestID), []byte(g.GoalID)); err != nil {
			return err
		}
		return putGoal(tx, &g)
	})
	if err != nil {
		return Goal{}, false, wrapOp(err, "create goal %q", g.GoalID)
	}
	return out, created, nil
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
		var g Goal
		if _, err := getJSON(tx, bucketGoals, id, &g); err != nil {
			return err
		}
		if g.RequestID != "" {
			if err := tx.Bucket([]byte(bucketGoalRequests)).Delete([]byte(g.RequestID)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte(bucketGoals)).Delete([]byte(id))
	})
	return wrapOp(err, "delete goal %q", id)
}
