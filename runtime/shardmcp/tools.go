package shardmcp

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/runtime/daemontool"
)

// toolDef is one tool of the server: a daemontool action and how it is
// offered.
type toolDef struct {
	name, title, description string
	team                     bool   // a daemontool team action; else a subagent one
	action                   string // the daemontool action
	schema                   string // the JSON schema of its arguments
	// readOnly: the tool changes nothing (status, lists, boards, waits).
	// destructive: it may end work (stop). idempotent: repeating it
	// changes nothing more.
	readOnly, destructive, idempotent bool
}

// mcpTool is t as MCP lists it.
func (t toolDef) mcpTool() *mcp.Tool {
	destructive := t.destructive
	return &mcp.Tool{
		Name: t.name, Title: t.title, Description: t.description,
		InputSchema: json.RawMessage(t.schema),
		Annotations: &mcp.ToolAnnotations{
			Title: t.title, ReadOnlyHint: t.readOnly, DestructiveHint: &destructive,
			IdempotentHint: t.idempotent, OpenWorldHint: new(false),
		},
	}
}

// tools are the server's tools, in the order it lists them.
var tools = []toolDef{{
	name: "subagent_create", title: "Start child agents", action: daemontool.ActionCreate,
	description: "Delegate work to child agents that run in the background as a Shard job. Give name + task for one " +
		"child, or tasks for several (run in parallel, the default, or as a chain). Returns at once with the job, run " +
		"and agent ids and aliases; use subagent_wait to get their final text. Children work in your directory.",
	schema: `{"type":"object","properties":{
  "name":{"type":"string","description":"One child: a short name for it."},
  "task":{"type":"string","description":"One child: what it should do, self-contained (it knows nothing else)."},
  "tasks":{"type":"array","description":"Several children, instead of name and task: one each.",
    "items":{"type":"object","properties":{"name":{"type":"string"},"task":{"type":"string"}},"required":["name","task"]}},
  "strategy":{"type":"string","enum":["parallel","chain"],"description":"With tasks: at once (parallel, the default) or one after another (chain)."},
  "tools":{"type":"array","items":{"type":"string"},"description":"Limit the children to these tools. Default: the daemon's choice for your children."},
  "skills":{"type":"array","items":{"type":"string"},"description":"Give the children only these skills."},
  "model":{"type":"string","description":"The children's model (provider/model or a model name). Default: the runtime's."},
  "runtime":{"type":"string","description":"The runtime profile the children run on: \"shard\" is Shard's own agent; others are configured ACP agents. Default: yours."},
  "isolation":{"type":"string","enum":["none","workspace"],"description":"workspace: each child works in a git worktree of its own on a new branch (your directory must be in a git repository). Default none: your directory."}
},"additionalProperties":false}`,
}, {
	name: "subagent_wait", title: "Wait for child agents", action: daemontool.ActionWait, readOnly: true, idempotent: true,
	description: "Wait until the jobs, runs or child agents named by handles are done (all of them, or any with mode " +
		"\"any\"), up to timeout seconds, and return their state and final text. A timeout stops the waiting, never the work.",
	schema: `{"type":"object","properties":{
  "handles":{"type":"array","items":{"type":"string"},"description":"Job, run or agent ids or aliases, as subagent_create returned them."},
  "mode":{"type":"string","enum":["any","all"],"description":"Return when all (default) or any of them are done."},
  "timeout":{"type":"number","minimum":0,"description":"Seconds to wait at most; omitted waits until done, 0 only polls."}
},"required":["handles"],"additionalProperties":false}`,
}, {
	name: "subagent_status", title: "Child agents' status", action: daemontool.ActionStatus, readOnly: true, idempotent: true,
	description: "Report on your child agents and jobs: the ones named by targets, or without targets your latest jobs.",
	schema: `{"type":"object","properties":{
  "targets":{"type":"array","items":{"type":"string"},"description":"Job, run or agent ids or aliases; omitted lists your latest jobs."}
},"additionalProperties":false}`,
}, {
	name: "subagent_steer", title: "Steer a child agent", action: daemontool.ActionSteer,
	description: "Send a message into the turn a child's run is executing now. Answers injected, or conflict when the " +
		"turn ended first (the message is then dropped, never kept for later).",
	schema: `{"type":"object","properties":{
  "target":{"type":"string","description":"The run or child agent (id or alias)."},
  "message":{"type":"string","description":"What to tell it."}
},"required":["target","message"],"additionalProperties":false}`,
}, {
	name: "subagent_stop", title: "Stop child agents", action: daemontool.ActionStop, destructive: true, idempotent: true,
	description: "Stop a job or a run: queued runs are cancelled, active ones aborted. Nothing is deleted.",
	schema: `{"type":"object","properties":{
  "handle":{"type":"string","description":"The job, run or child agent (id or alias) to stop."}
},"required":["handle"],"additionalProperties":false}`,
}, {
	name: "team_create_tasks", title: "Plan team tasks", team: true, action: daemontool.ActionCreateTasks,
	description: "Add tasks to a team goal's board (a lead plans with it): each is built by a worker in a worktree of " +
		"its own, then reviewed by the person before it is merged. All are created or none.",
	schema: `{"type":"object","properties":{
  "goal_id":{"type":"string","description":"The goal (the id in the \"[team goal …]\" line of the goal's prompt)."},
  "tasks":{"type":"array","description":"The tasks, in order.","items":{"type":"object","properties":{
    "title":{"type":"string","description":"A short title for the board."},
    "prompt":{"type":"string","description":"The worker's instructions, self-contained."},
    "description":{"type":"string","description":"Optional: a longer description shown on the board."},
    "priority":{"type":"integer","description":"Optional: higher starts first among ready tasks. Default 0."},
    "deps":{"type":"array","items":{"type":"string"},"description":"Optional: ids of existing tasks of the goal that must be done first."},
    "after":{"type":"array","items":{"type":"integer","minimum":1},"description":"Optional: 1-based positions of earlier tasks in this list that must be done first."},
    "assignee":{"type":"string","description":"Optional: the agent id of a worker whose task ended unmerged, to go on in its worktree."}
  },"required":["title","prompt"],"additionalProperties":false}}
},"required":["goal_id","tasks"],"additionalProperties":false}`,
}, {
	name: "team_goals", title: "Team goals", team: true, action: daemontool.ActionGoals, readOnly: true, idempotent: true,
	description: "List the team's goals, newest first.",
	schema: `{"type":"object","properties":{
  "open_only":{"type":"boolean","description":"Only the goals still planning or active."}
},"additionalProperties":false}`,
}, {
	name: "team_board", title: "A goal's board", team: true, action: daemontool.ActionBoard, readOnly: true, idempotent: true,
	description: "Show one goal with its tasks and decisions.",
	schema: `{"type":"object","properties":{
  "goal_id":{"type":"string","description":"The goal."}
},"required":["goal_id"],"additionalProperties":false}`,
}, {
	name: "team_memory_list", title: "Team notes", team: true, action: daemontool.ActionMemoryList, readOnly: true, idempotent: true,
	description: "List the team's markdown notes.",
	schema: `{"type":"object","properties":{
  "scope":{"type":"string","description":"\"shared\", \"self\" (your own notes) or an agent id; omitted lists every note."}
},"additionalProperties":false}`,
}, {
	name: "team_memory_write", title: "Write a team note", team: true, action: daemontool.ActionMemoryWrite, idempotent: true,
	description: "Write a markdown note to the team's memory; writing an existing key replaces the note.",
	schema: `{"type":"object","properties":{
  "scope":{"type":"string","description":"\"shared\" (the default: every agent of the team reads it), \"self\" or an agent id."},
  "key":{"type":"string","description":"The note's key, unique in its scope."},
  "title":{"type":"string","description":"An optional title."},
  "body":{"type":"string","description":"The note, in markdown."}
},"required":["key","body"],"additionalProperties":false}`,
}, {
	name: "team_message", title: "Message in the team", team: true, action: daemontool.ActionMessage,
	description: "Write to another agent of the team, the lead, or the person.",
	schema: `{"type":"object","properties":{
  "to":{"type":"string","description":"An agent id, \"lead\", \"all\" (the lead; a leading @name in the text routes it to the agent so named) or \"user\" (the person)."},
  "text":{"type":"string","description":"What to say."},
  "goal_id":{"type":"string","description":"Optional: the goal the message is about."}
},"required":["to","text"],"additionalProperties":false}`,
}, {
	name: "team_decisions", title: "Team decisions", team: true, action: daemontool.ActionDecisions, readOnly: true, idempotent: true,
	description: "List the team's decisions (questions, permissions, merges), oldest first: a goal's, or the open ones.",
	schema: `{"type":"object","properties":{
  "goal_id":{"type":"string","description":"Only this goal's decisions."},
  "open_only":{"type":"boolean","description":"Only the decisions still open."}
},"additionalProperties":false}`,
}, {
	name: "team_answer", title: "Answer a team question", team: true, action: daemontool.ActionAnswer,
	description: "Answer an open question decision (a worker's question) with one of its options, by label or 0-based " +
		"index, or with free text when it offers none. Merge and permission decisions are the person's: answering one is refused.",
	schema: `{"type":"object","properties":{
  "decision_id":{"type":"string","description":"The decision."},
  "option":{"type":"string","description":"One of its option labels."},
  "index":{"type":"integer","minimum":0,"description":"Or the 0-based position of the option."},
  "text":{"type":"string","description":"Free text: the answer to a question without options, or words to go with the option."}
},"required":["decision_id"],"additionalProperties":false}`,
}}
