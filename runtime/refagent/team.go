package refagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/daemontool"
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

// Actions of the team tool: the daemontool actions it offers (not the
// decisions, which are the person's to answer).
const (
	teamCreateTasks = daemontool.ActionCreateTasks
	teamMemoryList  = daemontool.ActionMemoryList
	teamMemoryWrite = daemontool.ActionMemoryWrite
	teamMessage     = daemontool.ActionMessage
	teamGoals       = daemontool.ActionGoals
	teamBoard       = daemontool.ActionBoard
)

// toolTeam is the name of the team tool.
const toolTeam = "team"

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
// arguments (daemontool.TeamCommand, the action in "action"), agent being
// the calling agent. Arguments the action does not use are ignored.
func teamCommand(agent string, args map[string]any) (protocol.Command, error) {
	action, ok := args["action"].(string)
	if !ok && args["action"] != nil {
		return nil, errors.New(`argument "action" must be a string`)
	}
	switch action {
	case teamCreateTasks, teamMemoryList, teamMemoryWrite, teamMessage, teamGoals, teamBoard:
	case "":
		return nil, errors.New(`argument "action" is required (create_tasks, memory_list, memory_write, message, goals or board)`)
	default:
		return nil, fmt.Errorf(`argument "action": unknown action %q (want create_tasks, memory_list, memory_write, message, goals or board)`, action)
	}
	return daemontool.TeamCommand(action, agent, args)
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
