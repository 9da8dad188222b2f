package team

import (
	"context"
	"fmt"
	"slices"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// A goal's budget (docs/protocol.md §10.4, budgets): its cost is what its
// agents spent, the lead's and its workers' AgentInfo.usage.cost, refreshed
// each time a worker's run ends; past cost_limit_usd no new worker starts
// and the goal asks the person, with a question decision offering these
// answers.
const (
	// OptionBudgetContinue lifts the goal's limit: workers start again.
	OptionBudgetContinue = "Continue without a limit"
	// OptionBudgetCancel cancels the goal.
	OptionBudgetCancel = "Cancel the goal"
)

var budgetOptions = []string{OptionBudgetContinue, OptionBudgetCancel}

// isBudget reports whether d is a goal's budget question.
func isBudget(d store.Decision) bool {
	return d.Kind == store.DecisionQuestion && d.RequestID == "" && d.TaskID == "" && slices.Equal(d.Options, budgetOptions)
}

// refreshCost sums what goal goalID's agents spent, records it, and asks
// the person once the goal is past its limit (one open budget question at a
// time).
func (co *Coordinator) refreshCost(ctx context.Context, goalID string) {
	g, err := co.deps.Store.GetGoal(goalID)
	if err != nil || co.deps.Link == nil {
		return
	}
	agents := []string{}
	if g.LeadAgentID != "" {
		agents = append(agents, g.LeadAgentID)
	}
	if ts, err := co.deps.Store.ListTasks(goalID); err == nil {
		for _, t := range ts {
			if t.Assignee != "" && !slices.Contains(agents, t.Assignee) {
				agents = append(agents, t.Assignee)
			}
		}
	}
	cost := 0.0
	for _, id := range agents {
		var st protocol.AgentListData
		err := co.deps.Link.Call(ctx, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &st)
		if protocol.CodeOf(err) == protocol.CodeNotFound {
			continue // removed: what it spent is not known any more
		}
		if err != nil || len(st.Agents) != 1 {
			return // unknown now (the daemon stops): the recorded cost stays
		}
		if u := st.Agents[0].Usage; u != nil {
			cost += u.Cost
		}
	}
	g, err = co.deps.Store.UpdateGoal(goalID, func(g *store.Goal) error {
		if g.Cost == cost {
			return errUnchanged
		}
		g.Cost = cost
		return nil
	})
	if err == nil {
		co.emit(goalEvent(g))
	}
	if err != nil {
		if g, err = co.deps.Store.GetGoal(goalID); err != nil {
			return
		}
	}
	if !g.Open() || g.CostLimit == nil || g.Cost < *g.CostLimit {
		return
	}
	ds, err := co.deps.Store.ListDecisions(goalID)
	if err != nil || slices.ContainsFunc(ds, func(d store.Decision) bool { return isBudget(d) && d.State == store.DecisionOpen }) {
		return
	}
	d, err := co.deps.Store.CreateDecision(store.Decision{GoalID: goalID, Kind: store.DecisionQuestion,
		Prompt:  fmt.Sprintf("The goal spent $%.2f of its $%.2f budget: no new worker starts. Go on?", g.Cost, *g.CostLimit),
		Options: budgetOptions})
	if err != nil {
		co.deps.Logger.Warn("team: open a budget decision", "goal", goalID, "err", err)
		return
	}
	co.emit(decisionEvent(d))
	co.feed(store.FeedItem{GoalID: goalID, Kind: store.FeedDecision, Text: d.Prompt})
}

// carryBudget carries out the answer to a goal's budget question.
func (co *Coordinator) carryBudget(ctx context.Context, d store.Decision) {
	switch d.Answer.Option {
	case OptionBudgetContinue:
		g, err := co.deps.Store.UpdateGoal(d.GoalID, func(g *store.Goal) error { g.CostLimit = nil; return nil })
		if err == nil {
			co.emit(goalEvent(g))
			co.feed(store.FeedItem{GoalID: g.GoalID, Kind: store.FeedGoal, Text: "budget lifted"})
		}
	case OptionBudgetCancel:
		if _, err := co.goalCancel(ctx, &protocol.TeamGoalCancel{GoalID: d.GoalID}); err != nil {
			co.deps.Logger.Warn("team: cancel a goal past its budget", "goal", d.GoalID, "err", err)
		}
	}
}
