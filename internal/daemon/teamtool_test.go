package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/team/plan"
)

// TestTeamToolIsOfferedUnderTheDaemon: a real model's agent under the
// daemon is offered the team tool by default, and agent.create accepts it
// in tools (docs/protocol.md §10.1), which then limit the model to it.
func TestTeamToolIsOfferedUnderTheDaemon(t *testing.T) {
	h, log := startModel(t, func(fakellm.Prompt) fakellm.Turn { return fakellm.Turn{Text: "ok"} })
	c := h.dial()

	all := h.create(c, nil)
	attach(t, c, all, "")
	runTurn(t, c, all, "everything")
	limited := h.create(c, func(m *protocol.AgentCreate) { m.Tools = []string{"read", "team"} })
	attach(t, c, limited, "")
	runTurn(t, c, limited, "read and team")

	for _, tc := range []struct {
		prompt string
		check  func([]string) bool
	}{
		{"everything", func(tools []string) bool { return slices.Contains(tools, "team") && slices.Contains(tools, "subagent") }},
		{"read and team", func(tools []string) bool { return slices.Equal(tools, []string{"read", "team"}) }},
	} {
		got := log.find(func(p fakellm.Prompt) bool { return p.LastUser == tc.prompt })
		if len(got) != 1 || !tc.check(got[0].Tools) {
			t.Fatalf("%q: the model was offered %v", tc.prompt, got)
		}
	}
}

// simLeadGoal is a goal the sim lead plans: two parallel items, one with a
// multi-line prompt whose continuation line is a `sim: tool write` (the
// worker's script, never the lead's), and a third after both.
const simLeadGoal = "Three notes, the last after both.\n\n" +
	"- left note: sim: say left\n" +
	"  sim: tool write {\"path\":\"lead-wrote-this.txt\",\"content\":\"no\"}\n" +
	"- right note: sim: say right\n" +
	"- join: sim: say join (after 1, 2)\n"

// TestSimLeadPlansASubmittedGoal: team.goal.submit with a sim goal text →
// the lead's team tool creates the three tasks on the board, in order, the
// third depending on the first two, created by the lead; the lead says
// "planned 3 tasks" and ran none of the goal's lines itself.
func TestSimLeadPlansASubmittedGoal(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()

	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit),
		Text: simLeadGoal, Cwd: repo}).Goal
	third := waitTeam(t, c, protocol.TypeTeamTaskChanged, func(e protocol.TeamTaskChanged) bool {
		return e.Task.GoalID == g.GoalID && e.Task.Title == "join"
	}).Task
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	lead := show.Goal.LeadAgentID
	if lead == "" || len(show.Tasks) != 3 {
		t.Fatalf("board = %+v", show)
	}
	for i, title := range []string{"left note", "right note", "join"} {
		tk := show.Tasks[i]
		if tk.Title != title || tk.CreatedBy != lead {
			t.Fatalf("task %d = %+v, want %q created by the lead %s", i+1, tk, title, lead)
		}
	}
	if deps := show.Tasks[2].Deps; len(deps) != 2 || deps[0] != show.Tasks[0].TaskID || deps[1] != show.Tasks[1].TaskID || third.TaskID != show.Tasks[2].TaskID {
		t.Fatalf("join's deps %v, want the first two tasks %s %s", deps, show.Tasks[0].TaskID, show.Tasks[1].TaskID)
	}
	if len(show.Tasks[0].Deps) != 0 || len(show.Tasks[1].Deps) != 0 {
		t.Fatalf("the first two tasks depend on %v and %v, want nothing", show.Tasks[0].Deps, show.Tasks[1].Deps)
	}

	// The lead's own transcript: one team call and the line about it.
	lc := h.dial()
	sync := attach(t, lc, lead, "")
	said := func(m protocol.Message) bool { return m.Role == "assistant" && textOf(m) == "planned 3 tasks" }
	if !slices.ContainsFunc(sync.LiveWindow.Messages, said) {
		waitFor(t, lc, func(e client.Event) bool {
			mc, ok := e.Msg.(*protocol.MessageComplete)
			return ok && mc.AgentID == lead && said(mc.Message)
		})
	}
	sync = attach(t, h.dial(), lead, "") // now it holds the whole turn
	var calls []string
	for _, m := range sync.LiveWindow.Messages {
		for _, b := range m.Content {
			if b.Type == protocol.BlockToolCall {
				calls = append(calls, b.Name)
			}
		}
	}
	if !slices.Equal(calls, []string{"team"}) {
		t.Fatalf("the lead called %v, want one team call", calls)
	}
	if _, err := os.Stat(filepath.Join(repo, "lead-wrote-this.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lead ran a worker's directive: %v", err)
	}

	// The continuation line reached the first task's worker, whose write
	// asks the person; allowed, it lands in the worker's worktree only.
	perm := decisionOf(t, c, g.GoalID, protocol.DecisionKindPermission, show.Tasks[0].TaskID)
	if perm.Tool != "write" || perm.Context != "lead-wrote-this.txt" || perm.AgentID == lead {
		t.Fatalf("permission decision = %+v, want the worker's write", perm)
	}
	if a := answer(t, c, perm.DecisionID, protocol.OptionAllowOnce, ""); a.State != protocol.DecisionAnswered {
		t.Fatalf("answered = %+v", a)
	}
	mergeOf(t, c, g.GoalID, show.Tasks[0].TaskID)
	wt := taskOf(t, c, g.GoalID, show.Tasks[0].TaskID).Worktree
	if b, err := os.ReadFile(filepath.Join(wt, "lead-wrote-this.txt")); err != nil || string(b) != "no" {
		t.Fatalf("the worker's write in %s: %q, %v", wt, b, err)
	}
	if _, err := os.Stat(filepath.Join(repo, "lead-wrote-this.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the write reached the main checkout: %v", err)
	}
}

// TestTeamToolMemoryAndMessagesOverTheWire: an agent under the daemon
// writes a shared memory note and messages the person with its team tool;
// the daemon records both with the agent as author and sender.
func TestTeamToolMemoryAndMessagesOverTheWire(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	runTurn(t, c, id, `sim: tool team {"action":"memory_write","key":"conventions","title":"How we work","body":"# Tabs"}`+"\n"+
		`sim: tool team {"action":"message","to":"user","text":"the plan is ready"}`)

	mem := teamCall[protocol.TeamMemoryListData](t, c, &protocol.TeamMemoryList{Header: teamHdr(protocol.TypeTeamMemoryList), Scope: protocol.MemoryScopeShared})
	if len(mem.Entries) != 1 || mem.Entries[0].Key != "conventions" || mem.Entries[0].Body != "# Tabs" || mem.Entries[0].Author != id {
		t.Fatalf("memory = %+v, want the note by %s", mem.Entries, id)
	}
	feed := teamCall[protocol.TeamFeedData](t, c, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed)})
	if !slices.ContainsFunc(feed.Items, func(it protocol.TeamFeedItem) bool {
		return it.Kind == protocol.FeedUser && it.AgentID == id && it.To == "user" && it.Text == "the plan is ready"
	}) {
		t.Fatalf("feed = %+v, want the message from %s", feed.Items, id)
	}

	// A refusal reaches the model as a tool error with its code.
	evs := runTurn(t, c, id, `sim: tool team {"action":"board","goal_id":"goal-nope"}`)
	res := toolResults(evs)
	if len(res) != 1 || !res[0].IsError || !strings.HasPrefix(res[0].Content.Message, "team.goal.show failed: NOT_FOUND: ") {
		t.Fatalf("tool results %+v", res)
	}
}

// TestModelLeadPlansWithTheTeamTool: a lead on a real model's wire format
// (the fake OpenAI-compatible service) is offered the team tool, reads its
// goal id from the goal prompt and plans with create_tasks; the board gets
// the tasks, the second after the first.
func TestModelLeadPlansWithTheTeamTool(t *testing.T) {
	repo := gitRepo(t)
	h, log := startModel(t, func(p fakellm.Prompt) fakellm.Turn {
		goalID, _, ok := plan.ReadGoalPrompt(p.LastUser)
		if !ok || p.ToolOutput {
			return fakellm.Turn{Text: "ok"}
		}
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "team", Args: `{"action":"create_tasks","goal_id":"` + goalID + `",` +
			`"tasks":[{"title":"schema","prompt":"add the table","priority":2},{"title":"api","prompt":"serve it","description":"the endpoint","after":[1]}]}`}}}
	})
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit),
		Text: "Store and serve the reports.", Cwd: repo}).Goal
	waitTeam(t, c, protocol.TypeTeamTaskChanged, func(e protocol.TeamTaskChanged) bool {
		return e.Task.GoalID == g.GoalID && e.Task.Title == "api"
	})
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if len(show.Tasks) != 2 {
		t.Fatalf("board = %+v", show.Tasks)
	}
	s, a := show.Tasks[0], show.Tasks[1]
	if s.Title != "schema" || s.Priority != 2 || a.Title != "api" || a.Description != "the endpoint" ||
		!slices.Equal(a.Deps, []string{s.TaskID}) || s.CreatedBy != show.Goal.LeadAgentID {
		t.Fatalf("board = %+v", show.Tasks)
	}
	leads := log.find(func(p fakellm.Prompt) bool {
		return strings.HasPrefix(p.LastUser, "[team goal "+g.GoalID+"]") && !p.ToolOutput
	})
	if len(leads) != 1 || !slices.Contains(leads[0].Tools, "team") {
		t.Fatalf("the lead's model requests %+v: want one, offered the team tool", leads)
	}
}
