package daemontool

import (
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// Actions in a team, each one team.* command (docs/protocol.md §10.4).
const (
	ActionCreateTasks = "create_tasks" // team.task.create
	ActionMemoryList  = "memory_list"  // team.memory.list
	ActionMemoryWrite = "memory_write" // team.memory.put
	ActionMessage     = "message"      // team.message
	ActionGoals       = "goals"        // team.goal.list
	ActionBoard       = "board"        // team.goal.show
	ActionDecisions   = "decisions"    // team.decision.list
	ActionAnswer      = "answer"       // team.decision.answer
)

// ScopeSelf names the calling agent's own memory scope in the arguments;
// the daemon knows scopes by agent id.
const ScopeSelf = "self"

// TeamCommand builds and validates the team.* command of action for a
// model's arguments, agent being the calling agent (by_agent_id, author,
// from_agent_id; an answer is the agent's, which the daemon allows for
// question decisions only). Arguments the action does not use are ignored:
//
//	create_tasks:  goal_id, tasks:[{title, prompt, description?, priority?,
//	               deps?:[task ids], after?:[1-based positions], assignee?}]
//	memory_list:   scope? (omitted: every entry)
//	memory_write:  scope? ("shared" by default; "self" is the caller's own),
//	               key, title?, body
//	message:       to, text, goal_id?
//	goals:         open_only?
//	board:         goal_id
//	decisions:     goal_id?, open_only?
//	answer:        decision_id, option? | index?, text?
func TeamCommand(action, agent string, args map[string]any) (protocol.Command, error) {
	var cmd protocol.Command
	var err error
	switch action {
	case ActionCreateTasks:
		c := &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, ByAgentID: agent}
		if c.GoalID, err = optString(args, "goal_id"); err == nil {
			c.Tasks, err = teamTaskList(args, "tasks")
		}
		cmd = c
	case ActionMemoryList:
		m := &protocol.TeamMemoryList{Header: protocol.Header{Type: protocol.TypeTeamMemoryList}}
		m.Scope, err = optString(args, "scope")
		m.Scope = teamScope(agent, m.Scope)
		cmd = m
	case ActionMemoryWrite:
		m := &protocol.TeamMemoryPut{Header: protocol.Header{Type: protocol.TypeTeamMemoryPut}, Author: agent}
		err = readStrings(args, &m.Scope, "scope", &m.Key, "key", &m.Title, "title", &m.Body, "body")
		if m.Scope == "" {
			m.Scope = protocol.MemoryScopeShared
		}
		m.Scope = teamScope(agent, m.Scope)
		cmd = m
	case ActionMessage:
		m := &protocol.TeamMessage{Header: protocol.Header{Type: protocol.TypeTeamMessage}, FromAgentID: agent}
		err = readStrings(args, &m.To, "to", &m.Text, "text", &m.GoalID, "goal_id")
		cmd = m
	case ActionGoals:
		g := &protocol.TeamGoalList{Header: protocol.Header{Type: protocol.TypeTeamGoalList}}
		g.OpenOnly, err = optBool(args, "open_only")
		cmd = g
	case ActionBoard:
		g := &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}}
		g.GoalID, err = optString(args, "goal_id")
		cmd = g
	case ActionDecisions:
		d := &protocol.TeamDecisionList{Header: protocol.Header{Type: protocol.TypeTeamDecisionList}}
		if d.GoalID, err = optString(args, "goal_id"); err == nil {
			d.OpenOnly, err = optBool(args, "open_only")
		}
		cmd = d
	case ActionAnswer:
		a := &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, ByAgentID: agent}
		if err = readStrings(args, &a.DecisionID, "decision_id", &a.Option, "option", &a.Text, "text"); err == nil {
			a.Index, err = optIntPtr(args, "index")
		}
		cmd = a
	default:
		return nil, fmt.Errorf("unknown team action %q", action)
	}
	if err != nil {
		return nil, err
	}
	return validated(cmd)
}

// teamScope maps the tools' "self" to the agent's own scope.
func teamScope(agent, scope string) string {
	if scope == ScopeSelf {
		return agent
	}
	return scope
}

// teamTaskList returns args[key] as the task specs of a create_tasks call.
func teamTaskList(args map[string]any, key string) ([]protocol.TeamTaskSpec, error) {
	list, ok := args[key].([]any)
	if !ok && args[key] != nil {
		return nil, fmt.Errorf("argument %q must be a list of {title, prompt, …} objects", key)
	}
	out := make([]protocol.TeamTaskSpec, len(list))
	for i, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("argument %q: element %d must be an object {title, prompt, …}", key, i)
		}
		t := &out[i]
		err := readStrings(obj, &t.Title, "title", &t.Prompt, "prompt", &t.Description, "description", &t.Assignee, "assignee")
		if err == nil {
			t.Priority, err = optInt(obj, "priority")
		}
		if err == nil {
			t.Deps, err = stringList(obj, "deps")
		}
		if err == nil {
			t.After, err = intList(obj, "after")
		}
		if err != nil {
			return nil, fmt.Errorf("argument %q: element %d: %w", key, i, err)
		}
	}
	return out, nil
}
