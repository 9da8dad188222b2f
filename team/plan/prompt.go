package plan

import "strings"

// goalHeader starts the prompt the daemon gives a team's lead for a goal:
// "[team goal <goal_id>]" alone on the first line, the goal's text after
// it. Real models read it as text; the sim lead recognizes it (ReadGoalPrompt)
// and plans the text's items with the team tool.
const goalHeader = "[team goal "

// leadInstructions follow the header: what a real model is asked to do.
const leadInstructions = "You lead a team toward the goal below. Plan it: create the tasks with the team tool " +
	"(action \"create_tasks\", each with a title, a worker prompt, and the earlier tasks it needs), " +
	"keep notes in the team's memory, and ask the person when something is unclear. " +
	"Workers build each task in a worktree of its own; the person reviews and merges each one."

// GoalPrompt is the prompt the daemon gives the lead for a goal; goalID
// is a goal- id (no blank, no "]").
func GoalPrompt(goalID, text string) string {
	return goalHeader + goalID + "]\n" + leadInstructions + "\n\n<goal>\n" + text + "\n</goal>\n"
}

// ReadGoalPrompt reads back what GoalPrompt wrote: the goal's id and text.
// ok is false for any other message.
func ReadGoalPrompt(msg string) (goalID, text string, ok bool) {
	first, rest, _ := strings.Cut(msg, "\n")
	id, found := strings.CutPrefix(strings.TrimRight(first, "\r"), goalHeader)
	if !found || !strings.HasSuffix(id, "]") {
		return "", "", false
	}
	id = strings.TrimSuffix(id, "]")
	if id == "" || strings.ContainsAny(id, " \t]") {
		return "", "", false
	}
	_, body, found := strings.Cut(rest, "\n<goal>\n")
	if !found {
		return "", "", false
	}
	text, found = strings.CutSuffix(body, "\n</goal>\n")
	if !found {
		return "", "", false
	}
	return id, text, true
}
