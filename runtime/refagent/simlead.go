package refagent

import (
	"fmt"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/team/plan"
)

// The sim lead (docs/sim.md, "Scripting a team"). The daemon prompts a
// team's lead with a goal prompt (plan.GoalPrompt: "[team goal <goal_id>]",
// instructions, then the goal's text). A real model reads it and plans with
// the team tool; the sim reads the plan out of the goal's text with
// plan.Parse and makes the same call a model would: one `team` tool call,
// action create_tasks, whose tasks are the plan's items in order (title,
// worker prompt, after). After the tool's result it says one line: "planned
// N tasks", or the error the result carries. A goal without items is
// answered "found no plan items" and a goal the grammar refuses with its
// error, neither with a tool call.
//
// A goal prompt is the lead's plan, never its script: none of its lines
// runs as a `sim:` directive of the lead — not an item's worker prompt
// (which scripts the worker), not an indented continuation line, not
// prose. Choice: a team's lead under sim only plans; scripting the lead
// itself would mix two scripts in one text.

// isGoalPrompt reports whether a user message is the daemon's goal prompt
// to a lead.
func isGoalPrompt(text string) bool {
	_, _, ok := plan.ReadGoalPrompt(text)
	return ok
}

// leadDirectives are what the sim lead does with a goal prompt: the
// create_tasks call and the line about its result, or one line saying why
// there is no plan.
func leadDirectives(prompt string) []directive {
	goalID, text, ok := plan.ReadGoalPrompt(prompt)
	if !ok {
		return parseDirectives(prompt)
	}
	items, err := plan.Parse(text)
	switch {
	case err != nil:
		return []directive{{kind: dirSay, text: fmt.Sprintf("I cannot plan goal %s: %v", goalID, err)}}
	case len(items) == 0:
		return []directive{{kind: dirSay, text: fmt.Sprintf("I found no plan items in goal %s: "+
			"a plan item is a line `- <title>: <worker prompt>`.", goalID)}}
	}
	tasks := make([]map[string]any, len(items))
	for i, it := range items {
		t := map[string]any{"title": it.Title, "prompt": it.Prompt}
		if len(it.After) > 0 {
			t["after"] = it.After
		}
		tasks[i] = t
	}
	args := map[string]any{"action": teamCreateTasks, "goal_id": goalID, "tasks": tasks}
	raw := string(protocol.MustMarshal(args))
	return []directive{
		{kind: dirTeamPlan, tool: toolTeam, args: args, rawArgs: raw},
		{kind: dirTeamReport},
	}
}

// teamReport is the sim lead's line about the result of its create_tasks
// call callID, found among msgs.
func teamReport(msgs []protocol.Message, callID string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, b := range msgs[i].Content {
			if b.Type != protocol.BlockToolResult || b.ToolCallID != callID || b.Content == nil {
				continue
			}
			if b.IsError || b.Content.Kind == "error" {
				return "I could not plan the goal: " + b.Content.Message
			}
			if v, ok := b.Content.Value.(map[string]any); ok {
				if tasks, ok := v["tasks"].([]any); ok {
					if len(tasks) == 1 {
						return "planned 1 task"
					}
					return fmt.Sprintf("planned %d tasks", len(tasks))
				}
			}
		}
	}
	// The result is not in the window (a compaction replaced it): the
	// call was made, its outcome is in the transcript.
	return "planned the goal"
}
