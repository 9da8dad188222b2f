package refagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// The team tool lets an agent under the daemon take part in a team
// (docs/protocol.md §10.4): a lead plans its goal as tasks on the board, and
// any agent — lead or worker — reads and writes the team's memory, sends
// messages within the team, and reads the goals and a goal's board. Like the
// subagent tool, each call dials Options.Socket, sends one team.* command
// naming Options.AgentID as its author, waits for the answer and closes the
// connection. Its arguments:
//
//	action         "create_tasks" | "memory_list" | "memory_write" |
//	               "message" | "goals" | "board"
//	create_tasks:  goal_id, tasks:[{title, prompt, description?, priority?,
//	               deps?:[task ids], after?:[1-based positions in tasks]}]
//	               → team.task.create with by_agent_id
//	memory_list:   scope? (omitted: every entry) → team.memory.list
//	memory_write:  scope? ("shared" by default; "self" is this agent's own
//	               scope), key, title?, body → team.memory.put with author
//	message:       to, text, goal_id? → team.message with from_agent_id
//	goals:         open_only? → team.goal.list
//	board:         goal_id → team.goal.show
//
// The result is {kind:"json", value:<the response data>}; a daemon error
// becomes a tool error carrying its code and message.
//
// Gating. The tool is reported with read_only false (it writes team
// records), yet it asks no permission and runs in plan mode too: it changes
// the team's board, memory and feed, never a file, and everything it starts
// goes through a gate of its own — a task becomes a worker whose every
// mutating call asks, and whose result a person reviews in a merge decision
// before it lands. Asking before a plan or a note would ask for what cannot
// harm the checkout and protect nothing. A planning lead plans with it: that
// is what planning means for a lead.

// Actions of the team tool.
const (
	teamCreateTasks = "create_tasks"
	teamMemoryList  = "memory_list"
	teamMemoryWrite = "memory_write"
	teamMessage     = "message"
	teamGoals       = "goals"
	teamBoard       = "board"
)

// toolTeam is the name of the team tool.
const toolTeam = "team"

// teamScopeSelf names the calling agent's own memory scope in the tool's
// arguments; the daemon knows scopes by agent id.
const teamScopeSelf = "self"

// noTeamDaemonMessage is the result of every team call in a runtime that
// has no daemon to talk to.
const noTeamDaemonMessage = "the team tool needs the daemon: this runtime has no daemon socket (SHARD_SOCKET) " +
	"or agent id (SHARD_AGENT_ID); run the agent under shardd to work in a team"

// teamClient makes the team tool's calls for one runtime. It is immutable
// and safe for concurrent use.
type teamClient struct {
	socket  string // Options.Socket
	agentID string // Options.AgentID: the author of what it writes
	log     *slog.Logger
}

// tool is the `team` tool of this runtime.
func (c teamClient) tool() tool {
	return daemonTool{
		spec:     provider.ToolSpec{Name: toolTeam, Description: teamDescription, Schema: teamSchema},
		noDaemon: noTeamDaemonMessage, what: "team",
		socket: c.socket, agentID: c.agentID, log: c.log,
		command: teamCommand,
	}.tool()
}

// teamCommand builds and validates the daemon command for the tool's
// arguments, agent being the calling agent. Arguments the action does not
// use are ignored.
func teamCommand(agent string, args map[string]any) (protocol.Command, error) {
	action, err := optString(args, "action")
	if err != nil {
		return nil, err
	}
	var cmd protocol.Command
	switch action {
	case teamCreateTasks:
		cmd, err = teamCreateCommand(agent, args)
	case teamMemoryList:
		m := &protocol.TeamMemoryList{Header: protocol.Header{Type: protocol.TypeTeamMemoryList}}
		if m.Scope, err = optString(args, "scope"); err == nil {
			m.Scope = teamScope(agent, m.Scope)
			cmd = m
		}
	case teamMemoryWrite:
		cmd, err = teamMemoryPutCommand(agent, args)
	case teamMessage:
		m := &protocol.TeamMessage{Header: protocol.Header{Type: protocol.TypeTeamMessage}, FromAgentID: agent}
		err = readStrings(args, &m.To, "to", &m.Text, "text", &m.GoalID, "goal_id")
		cmd = m
	case teamGoals:
		g := &protocol.TeamGoalList{Header: protocol.Header{Type: protocol.TypeTeamGoalList}}
		g.OpenOnly, err = optBool(args, "open_only")
		cmd = g
	case teamBoard:
		g := &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}}
		g.GoalID, err = optString(args, "goal_id")
		cmd = g
	case "":
		return nil, errors.New(`argument "action" is required (create_tasks, memory_list, memory_write, message, goals or board)`)
	default:
		return nil, fmt.Errorf(`argument "action": unknown action %q (want create_tasks, memory_list, memory_write, message, goals or board)`, action)
	}
	if err != nil {
		return nil, err
	}
	if err := cmd.Validate(); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, errors.New(pe.Message) // the field names are the argument names
		}
		return nil, err
	}
	return cmd, nil
}

// teamScope maps the tool's "self" to the agent's own scope.
func teamScope(agent, scope string) string {
	if scope == teamScopeSelf {
		return agent
	}
	return scope
}

func teamCreateCommand(agent string, args map[string]any) (*protocol.TeamTaskCreate, error) {
	c := &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, ByAgentID: agent}
	var err error
	if c.GoalID, err = optString(args, "goal_id"); err != nil {
		return nil, err
	}
	c.Tasks, err = teamTaskList(args, "tasks")
	return c, err
}

func teamMemoryPutCommand(agent string, args map[string]any) (*protocol.TeamMemoryPut, error) {
	m := &protocol.TeamMemoryPut{Header: protocol.Header{Type: protocol.TypeTeamMemoryPut}, Author: agent}
	if err := readStrings(args, &m.Scope, "scope", &m.Key, "key", &m.Title, "title", &m.Body, "body"); err != nil {
		return nil, err
	}
	if m.Scope == "" {
		m.Scope = protocol.MemoryScopeShared
	}
	m.Scope = teamScope(agent, m.Scope)
	return m, nil
}

// readStrings reads optional string arguments: pairs of a destination and the
// argument's name.
func readStrings(args map[string]any, pairs ...any) error {
	for i := 0; i < len(pairs); i += 2 {
		v, err := optString(args, pairs[i+1].(string))
		if err != nil {
			return err
		}
		*pairs[i].(*string) = v
	}
	return nil
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

// optBool returns args[key] as a bool, false when absent.
func optBool(args map[string]any, key string) (bool, error) {
	switch v := args[key].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	}
	return false, fmt.Errorf("argument %q must be true or false", key)
}

// optInt returns args[key] as an integer, 0 when absent. A model's JSON
// gives float64, a sim directive json.Number; a fraction is refused.
func optInt(args map[string]any, key string) (int, error) {
	if args[key] == nil {
		return 0, nil
	}
	n, ok := toInt(args[key])
	if !ok {
		return 0, fmt.Errorf("argument %q must be an integer", key)
	}
	return n, nil
}

// intList returns args[key] as a list of integers; a single number is a
// list of one.
func intList(args map[string]any, key string) ([]int, error) {
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]int, len(v))
		for i, e := range v {
			n, ok := toInt(e)
			if !ok {
				return nil, fmt.Errorf("argument %q: element %d must be an integer", key, i)
			}
			out[i] = n
		}
		return out, nil
	case []int:
		return v, nil
	}
	if n, ok := toInt(args[key]); ok {
		return []int{n}, nil
	}
	return nil, fmt.Errorf("argument %q must be a list of integers", key)
}

// toInt converts a JSON number (float64 or json.Number) or an int to an
// int, refusing fractions and what does not fit in 32 bits.
func toInt(v any) (int, bool) {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case float64:
		f = n
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 32)
		if err == nil {
			return int(i), true
		}
		if f, err = n.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// teamSchema is the JSON schema of the team tool's arguments.
var teamSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["create_tasks", "memory_list", "memory_write", "message", "goals", "board"],
      "description": "create_tasks: add tasks to a goal's board (the lead plans with it). memory_list / memory_write: read and write the team's notes. message: write to another agent, the lead or the person. goals: list the team's goals. board: one goal's tasks and decisions."},
    "goal_id": {"type": "string", "description": "create_tasks and board: the goal (the id in the \"[team goal …]\" line of the goal's prompt). message: the goal the message is about (optional)."},
    "tasks": {"type": "array", "description": "create_tasks: the tasks, in order; all are created or none. Each is built by a worker in a worktree of its own, then reviewed by the person before it is merged.",
      "items": {"type": "object", "properties": {
        "title": {"type": "string", "description": "A short title for the board."},
        "prompt": {"type": "string", "description": "The worker's instructions: self-contained, as the worker knows nothing else of the goal."},
        "description": {"type": "string", "description": "Optional: a longer description shown on the board."},
        "priority": {"type": "integer", "description": "Optional: higher starts first among ready tasks. Default 0."},
        "deps": {"type": "array", "items": {"type": "string"}, "description": "Optional: ids of existing tasks of the goal that must be done first."},
        "after": {"type": "array", "items": {"type": "integer", "minimum": 1}, "description": "Optional: 1-based positions of earlier tasks in this list that must be done first."},
        "assignee": {"type": "string", "description": "Optional: the agent id of one of your workers whose task ended unmerged (blocked or cancelled), to go on in its worktree, on its branch. Default: a new worker in a new worktree."}
      }, "required": ["title", "prompt"], "additionalProperties": false}},
    "scope": {"type": "string", "description": "memory_list and memory_write: \"shared\" (every agent of the team reads it; memory_write's default), \"self\" (your own notes) or an agent id. memory_list without it lists every note."},
    "key": {"type": "string", "description": "memory_write: the note's key, unique in its scope; writing an existing key replaces the note."},
    "title": {"type": "string", "description": "memory_write: an optional title for the note."},
    "body": {"type": "string", "description": "memory_write: the note, in markdown."},
    "to": {"type": "string", "description": "message: an agent id, \"lead\", \"all\" (the lead; a leading @name in the text routes it to the agent so named) or \"user\" (the person)."},
    "text": {"type": "string", "description": "message: what to say."},
    "open_only": {"type": "boolean", "description": "goals: only the goals still planning or active."}
  },
  "required": ["action"],
  "additionalProperties": false
}`)

const teamDescription = "Work in a team: a lead plans a goal as tasks on a board, workers build each task in a worktree of " +
	"their own, a person reviews each result before it is merged. create_tasks adds tasks to a goal (title, a " +
	"self-contained worker prompt, and which earlier tasks must be done first); memory_list and memory_write read " +
	"and write the team's markdown notes (shared, or your own); message writes to an agent, the lead or the person; " +
	"goals lists the goals and board shows one goal's tasks and decisions. Returns the records as JSON."
