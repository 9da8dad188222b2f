package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/team/attend"
)

// The daemon attaches to each lead as an interactive client (a
// team/attend Watcher), so the permission requests and questions of the
// lead and of its workers (delegated to the lead, docs/protocol.md §6.3)
// become decisions; answering one answers the request, and a request
// answered by another client first ends its decision answered with that
// answer (docs/protocol.md §10.4).

// attended carries one event of the Watcher of lead to the actor.
type attended struct {
	lead string
	ev   attend.Event
}

func (*attended) isTeamMessage() {}

// watchLead starts the Watcher of lead unless it runs (Deps.Socket set).
// Safe from any goroutine of the coordinator.
func (co *Coordinator) watchLead(lead string) {
	if co.deps.Socket == "" || lead == "" {
		return
	}
	co.watchMu.Lock()
	defer co.watchMu.Unlock()
	if co.watchers[lead] != nil || co.life.Err() != nil {
		return
	}
	socket := co.deps.Socket
	w, err := attend.Watch(co.life, attend.Options{
		AgentID: lead,
		Dial:    func(ctx context.Context) (*client.Conn, error) { return client.Dial(ctx, socket) },
		Events:  func(ev attend.Event) { co.tell(&attended{lead: lead, ev: ev}) },
	})
	if err != nil {
		co.deps.Logger.Error("team: attend the lead", "agent", lead, "err", err)
		return
	}
	co.watchers[lead] = w
}

// unwatchIdle stops the Watcher of lead once no open goal has it for lead:
// an attached client keeps agent.remove from removing the agent, and a
// lead without a goal asks the team nothing. Called off the mailbox (Close
// waits for the Watcher to stop).
func (co *Coordinator) unwatchIdle(lead string) {
	if lead == "" {
		return
	}
	// Checked under watchMu: a goal that takes the lead meanwhile records
	// it before it calls watchLead, so either it is seen here or its
	// watchLead comes after and starts a new Watcher.
	co.watchMu.Lock()
	gs, err := co.deps.Store.OpenGoals()
	if err != nil || slices.ContainsFunc(gs, func(g store.Goal) bool { return g.LeadAgentID == lead }) {
		co.watchMu.Unlock()
		return
	}
	w := co.watchers[lead]
	delete(co.watchers, lead)
	co.watchMu.Unlock()
	if w != nil {
		w.Close()
	}
}

// watcher returns the Watcher of lead, nil when none runs.
func (co *Coordinator) watcher(lead string) *attend.Watcher {
	co.watchMu.Lock()
	defer co.watchMu.Unlock()
	return co.watchers[lead]
}

// stopWatchers waits for every Watcher to stop (their context, the
// actor's life, is cancelled first).
func (co *Coordinator) stopWatchers() {
	co.watchMu.Lock()
	ws := make([]*attend.Watcher, 0, len(co.watchers))
	for _, w := range co.watchers {
		ws = append(ws, w)
	}
	co.watchMu.Unlock()
	for _, w := range ws {
		<-w.Done()
	}
}

// onAttended handles a Watcher's event on the mailbox: a new request
// becomes a decision, a resolution closes it, in that order per request
// (the second waits for the first's goroutine).
func (co *Coordinator) onAttended(m *attended) {
	switch e := m.ev.(type) {
	case attend.Request:
		if _, seen := co.requests[e.RequestID]; seen {
			return // reported again after a resync
		}
		done := make(chan struct{})
		co.requests[e.RequestID] = done
		if !co.goWork(co.deps.Timeout, func(context.Context) {
			defer close(done)
			co.openRequest(m.lead, e)
		}) {
			close(done)
		}
	case attend.Resolved:
		before := co.requests[e.RequestID]
		delete(co.requests, e.RequestID)
		co.goWork(co.deps.Timeout, func(context.Context) {
			if before != nil {
				<-before
			}
			co.closeRequest(e)
		})
	case attend.Stopped:
		co.watchMu.Lock()
		if w := co.watchers[m.lead]; w != nil {
			select {
			case <-w.Done():
				delete(co.watchers, m.lead)
			default:
			}
		}
		co.watchMu.Unlock()
		if e.Err != nil && co.life.Err() == nil {
			co.deps.Logger.Warn("team: attending the lead stopped", "agent", m.lead, "err", e.Err)
		}
	}
}

// openRequest makes a request of lead's team a decision of the lead's
// newest open goal (of the task the asking worker runs, if any).
func (co *Coordinator) openRequest(lead string, r attend.Request) {
	gs, err := co.deps.Store.OpenGoals()
	if err != nil {
		return
	}
	var g *store.Goal
	for i := range slices.Backward(gs) {
		if gs[i].LeadAgentID == lead {
			g = &gs[i]
			break
		}
	}
	if g == nil {
		return // not a team's question: the lead's other clients answer it
	}
	if d, ok := co.decisionOfRequest(r.RequestID); ok && d.State == store.DecisionOpen {
		return
	}
	taskID := ""
	if ts, err := co.deps.Store.ListTasks(g.GoalID); err == nil {
		for _, t := range ts {
			if t.Assignee == r.AgentID && (t.State == store.TaskDoing || t.State == store.TaskReview) {
				taskID = t.TaskID
			}
		}
		// A worker relaunched for a task may ask before the task is
		// committed doing (startWorker commits after the run started);
		// startWorker also gives the task the decisions its worker opened
		// meanwhile (claimDecisions).
		for _, t := range ts {
			if taskID == "" && t.Assignee == r.AgentID && t.State == store.TaskTodo {
				taskID = t.TaskID
			}
		}
	}
	d := store.Decision{GoalID: g.GoalID, TaskID: taskID, AgentID: r.AgentID, RequestID: r.RequestID, Options: r.Options}
	if r.Kind == attend.KindPermission {
		d.Kind, d.Tool, d.Context = store.DecisionPermission, r.Tool, r.Summary
		d.Prompt = r.Prompt
		if d.Prompt == "" {
			d.Prompt = fmt.Sprintf("Allow %s?", r.Tool)
		}
	} else {
		d.Kind, d.Prompt, d.Context = store.DecisionQuestion, r.Title, r.Message
	}
	d, err = co.deps.Store.CreateDecision(d)
	if err != nil {
		co.deps.Logger.Warn("team: open a decision for a request", "goal", g.GoalID, "err", err)
		return
	}
	co.emit(decisionEvent(d))
	co.feed(store.FeedItem{GoalID: d.GoalID, TaskID: d.TaskID, AgentID: d.AgentID, Kind: store.FeedDecision, Text: string(d.Kind) + ": " + d.Prompt})
}

// closeRequest ends the open decision of a resolved request: answered
// with the answer that won (whoever sent it), or cancelled when nobody
// answered (the headless policy, a timeout, an abort, the runtime's exit).
func (co *Coordinator) closeRequest(r attend.Resolved) {
	d, ok := co.decisionOfRequest(r.RequestID)
	if !ok || d.State != store.DecisionOpen {
		return
	}
	text := ""
	if s, ok := r.Value.(string); ok {
		text = s
	} else if l, ok := r.Value.([]string); ok {
		text = fmt.Sprint(l)
	}
	var err error
	answered := false
	if !r.Missed && (r.Option != "" || text != "") && r.Source != "headless" {
		// The answer a team.decision.answer sent through the Watcher is
		// the person's, as a merge decision's is, or the agent's it named
		// (by_agent_id); another client's is named by its transport.
		by := r.Source
		if r.Mine {
			by = cmp.Or(r.By, byUser) // the agent a team.decision.answer named
		}
		a := store.DecisionAnswer{Text: text, By: by}
		if slices.Contains(d.Options, r.Option) {
			a.Option = r.Option
		}
		if a.Option != "" || a.Text != "" {
			d, err = co.deps.Store.AnswerDecision(d.DecisionID, a)
			answered = err == nil
		}
	}
	if !answered {
		d, err = co.deps.Store.UpdateDecision(d.DecisionID, func(x *store.Decision) error {
			if x.State != store.DecisionOpen {
				return errUnchanged
			}
			x.State = store.DecisionCancelled
			return nil
		})
	}
	if err != nil {
		return
	}
	co.emit(decisionEvent(d))
}

// decisionOfRequest finds the open decision that answers request id.
func (co *Coordinator) decisionOfRequest(id string) (store.Decision, bool) {
	ds, err := co.deps.Store.OpenDecisions()
	if err != nil {
		return store.Decision{}, false
	}
	for _, d := range ds {
		if d.RequestID == id {
			return d, true
		}
	}
	return store.Decision{}, false
}

// answerRequest answers the request behind a permission or question
// decision through the lead's Watcher, first answer wins: a request
// answered first by someone else is CONFLICT (its decision records that
// answer when the resolution arrives).
func (co *Coordinator) answerRequest(ctx context.Context, d store.Decision, m *protocol.TeamDecisionAnswer, by string) error {
	g, err := co.deps.Store.GetGoal(d.GoalID)
	if err != nil {
		return err
	}
	w := co.watcher(g.LeadAgentID)
	if w == nil || d.RequestID == "" {
		return protocol.Errorf(protocol.CodeConflict, "decision %s has no request open to answer", d.DecisionID)
	}
	label := m.Option
	if m.Index != nil {
		label = d.Options[*m.Index]
	}
	if d.Kind == store.DecisionPermission {
		err = w.AnswerPermission(ctx, d.RequestID, label, m.Text)
	} else {
		var v any = m.Text
		if label != "" {
			v = label
		}
		if by == byUser {
			by = ""
		}
		err = w.AnswerQuestionBy(ctx, d.RequestID, v, by)
	}
	if errors.Is(err, attend.ErrAnswered) {
		return protocol.Errorf(protocol.CodeConflict, "decision %s was answered first by another client: %w", d.DecisionID, err)
	}
	return err
}

// claimDecisions gives task t the open decisions its worker opened before
// t was committed doing (a request that raced the start has no task).
func (co *Coordinator) claimDecisions(t store.Task) {
	if t.Assignee == "" {
		return
	}
	ds, err := co.deps.Store.OpenDecisions()
	if err != nil {
		return
	}
	for _, d := range ds {
		if d.GoalID != t.GoalID || d.AgentID != t.Assignee || d.TaskID != "" {
			continue
		}
		d2, err := co.deps.Store.UpdateDecision(d.DecisionID, func(x *store.Decision) error {
			if x.TaskID != "" || x.State != store.DecisionOpen {
				return errUnchanged
			}
			x.TaskID = t.TaskID
			return nil
		})
		if err == nil {
			co.emit(decisionEvent(d2))
		}
	}
}
