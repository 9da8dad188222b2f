package store

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
)

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
	Tool string `json:"tool,omitempty"`
	// RequestID is the permission_request or ui_request a permission or
	// question decision answers.
	RequestID string          `json:"request_id,omitempty"`
	State     DecisionState   `json:"state"` // required
	Answer    *DecisionAnswer `json:"answer,omitempty"`
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
