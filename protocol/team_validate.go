package protocol

import (
	"math"
	"strconv"
)

// MaxTeamFeedPage bounds one team.feed page.
const MaxTeamFeedPage = 200

// Validate implements Command.
func (c *TeamGoalSubmit) Validate() error {
	if err := bounds(bound{"text", c.Text, MaxTextLen}, bound{"cwd", c.Cwd, MaxPathLen},
		bound{"runtime", c.Runtime, MaxNameLen}, bound{"provider", c.Provider, MaxNameLen},
		bound{"model", c.Model, MaxNameLen}, bound{"request_id", c.RequestID, MaxIDLen}); err != nil {
		return err
	}
	if err := required("text", c.Text); err != nil {
		return err
	}
	if l := c.CostLimitUSD; l != nil && (*l <= 0 || math.IsNaN(*l) || math.IsInf(*l, 0)) {
		return invalid("cost_limit_usd", "must be a positive number of dollars")
	}
	return nil
}

// Validate implements Command.
func (c *TeamGoalList) Validate() error { return nil }

// Validate implements Command.
func (c *TeamGoalShow) Validate() error { return requiredID("goal_id", c.GoalID) }

// Validate implements Command.
func (c *TeamGoalCancel) Validate() error { return requiredID("goal_id", c.GoalID) }

// Validate implements Command.
func (c *TeamTaskCreate) Validate() error {
	if err := requiredID("goal_id", c.GoalID); err != nil {
		return err
	}
	if err := maxLen("by_agent_id", c.ByAgentID, MaxIDLen); err != nil {
		return err
	}
	if len(c.Tasks) == 0 {
		return invalid("tasks", "required")
	}
	if err := maxItems("tasks", len(c.Tasks), MaxTasks); err != nil {
		return err
	}
	for i, t := range c.Tasks {
		at := "tasks[" + strconv.Itoa(i) + "]."
		if err := bounds(bound{at + "title", t.Title, MaxLabelLen}, bound{at + "description", t.Description, MaxTextLen},
			bound{at + "prompt", t.Prompt, MaxTextLen}, bound{at + "assignee", t.Assignee, MaxIDLen}); err != nil {
			return err
		}
		if err := required(at+"title", t.Title); err != nil {
			return err
		}
		if err := required(at+"prompt", t.Prompt); err != nil {
			return err
		}
		if err := maxItems(at+"deps", len(t.Deps), MaxListLen); err != nil {
			return err
		}
		for _, d := range t.Deps {
			if err := requiredID(at+"deps", d); err != nil {
				return err
			}
		}
		for _, n := range t.After {
			// After counts from 1 over this batch, and points back only,
			// so a batch never holds a cycle.
			if n < 1 || n > i {
				return invalid(at+"after", "%d is not the position of an earlier task of this batch (1 to %d)", n, i)
			}
		}
	}
	return nil
}

// Validate implements Command.
func (c *TeamTaskAction) Validate() error {
	if err := requiredID("task_id", c.TaskID); err != nil {
		return err
	}
	if err := required("action", c.Action); err != nil {
		return err
	}
	if err := oneOf("action", c.Action, TaskActionReassign, TaskActionCancel, TaskActionRetry, TaskActionPrioritize); err != nil {
		return err
	}
	if err := maxLen("arg", c.Arg, MaxIDLen); err != nil {
		return err
	}
	switch c.Action {
	case TaskActionReassign:
		return required("arg", c.Arg)
	case TaskActionPrioritize:
		if _, err := strconv.Atoi(c.Arg); err != nil {
			return invalid("arg", "a priority is a decimal integer")
		}
	}
	return nil
}

// Validate implements Command.
func (c *TeamDecisionList) Validate() error { return maxLen("goal_id", c.GoalID, MaxIDLen) }

// Validate implements Command.
func (c *TeamDecisionAnswer) Validate() error {
	if err := requiredID("decision_id", c.DecisionID); err != nil {
		return err
	}
	if err := bounds(bound{"option", c.Option, MaxLabelLen}, bound{"text", c.Text, MaxTextLen},
		bound{"by_agent_id", c.ByAgentID, MaxIDLen}); err != nil {
		return err
	}
	if c.Option != "" && c.Index != nil {
		return invalid("index", "give option or index, not both")
	}
	if c.Index != nil && *c.Index < 0 {
		return invalid("index", "must not be negative")
	}
	return nil
}

// Validate implements Command.
func (c *TeamMemoryList) Validate() error { return maxLen("scope", c.Scope, MaxIDLen) }

// Validate implements Command.
func (c *TeamMemoryPut) Validate() error {
	if err := bounds(bound{"scope", c.Scope, MaxIDLen}, bound{"key", c.Key, MaxNameLen},
		bound{"title", c.Title, MaxLabelLen}, bound{"body", c.Body, MaxTextLen}, bound{"author", c.Author, MaxIDLen}); err != nil {
		return err
	}
	if err := required("scope", c.Scope); err != nil {
		return err
	}
	return required("key", c.Key)
}

// Validate implements Command.
func (c *TeamMemoryDelete) Validate() error { return requiredID("memory_id", c.MemoryID) }

// Validate implements Command.
func (c *TeamFeed) Validate() error {
	if err := bounds(bound{"goal_id", c.GoalID, MaxIDLen}, bound{"before", c.Before, MaxIDLen}); err != nil {
		return err
	}
	if c.Limit < 0 {
		return invalid("limit", "must not be negative")
	}
	return maxItems("limit", c.Limit, MaxTeamFeedPage)
}

// Validate implements Command.
func (c *TeamMessage) Validate() error {
	if err := bounds(bound{"goal_id", c.GoalID, MaxIDLen}, bound{"to", c.To, MaxIDLen},
		bound{"text", c.Text, MaxTextLen}, bound{"from_agent_id", c.FromAgentID, MaxIDLen}); err != nil {
		return err
	}
	if err := required("to", c.To); err != nil {
		return err
	}
	return required("text", c.Text)
}

// requiredID refuses an empty or over-long id.
func requiredID(field, v string) error {
	if err := maxLen(field, v, MaxIDLen); err != nil {
		return err
	}
	return required(field, v)
}
