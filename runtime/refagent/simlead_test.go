package refagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/team/plan"
)

// diamondGoal is a goal of three items: two with multi-line prompts, one
// of which holds an indented `sim: tool write` (the worker's script, never
// the lead's), and a third after both.
const diamondGoal = "Add a --version flag, split in three.\n\n" +
	"- version constant: sim: say writing the constant\n" +
	"  sim: tool write {\"path\":\"lead-wrote-this.txt\",\"content\":\"no\"}\n" +
	"- flag: sim: say adding the flag\n" +
	"\tsim: tool bash {\"command\":\"touch lead-ran-this\"}\n" +
	"- docs: sim: say documenting it (after 1, 2)\n" +
	"sim: say prose is no directive either\n"

// boardAnswer answers team.task.create with one stored task per spec.
func boardAnswer(req fakeRequest) (any, error) {
	if req.header.Type != protocol.TypeTeamTaskCreate {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "unexpected %s", req.header.Type)
	}
	specs, _ := req.fields["tasks"].([]any)
	data := protocol.TeamTasksData{}
	for i, s := range specs {
		title, _ := s.(map[string]any)["title"].(string)
		data.Tasks = append(data.Tasks, protocol.TeamTask{TaskID: "task-" + string(rune('a'+i)), GoalID: "goal-1",
			Title: title, State: protocol.TaskTodo, Deps: []string{}, CI: protocol.TeamCI{Status: protocol.CIUnknown}})
	}
	return data, nil
}

func TestSimLeadPlansTheGoalWithOneTeamCall(t *testing.T) {
	d := newFakeDaemon(t, boardAnswer)
	h := startWithDaemon(t, d, nil)
	h.prompt(plan.GoalPrompt("goal-1", diamondGoal))
	evs := h.untilIdle()

	req := d.request()
	want := map[string]any{"type": "team.task.create", "goal_id": "goal-1", "by_agent_id": "agent-test", "tasks": []protocol.TeamTaskSpec{
		{Title: "version constant", Prompt: "sim: say writing the constant\nsim: tool write {\"path\":\"lead-wrote-this.txt\",\"content\":\"no\"}"},
		{Title: "flag", Prompt: "sim: say adding the flag\nsim: tool bash {\"command\":\"touch lead-ran-this\"}"},
		{Title: "docs", Prompt: "sim: say documenting it", After: []int{1, 2}},
	}}
	if got := payload(t, req); !jsonEq(t, got, want) {
		t.Fatalf("daemon received %s\nwant %s", req.raw, protocol.MustMarshal(want))
	}
	d.noRequest()

	// One tool call, the team's, and nothing of the goal ran as the lead's
	// script: no write, no bash, no prose said.
	res := teamResultOf(t, evs)
	if res.IsError {
		t.Fatalf("tool_result %+v", res.Content)
	}
	for _, name := range []string{"lead-wrote-this.txt", "lead-ran-this"} {
		if _, err := os.Stat(filepath.Join(h.opts.Cwd, name)); !os.IsNotExist(err) {
			t.Fatalf("the lead ran a worker's directive: %s exists (%v)", name, err)
		}
	}
	if txt := assistantText(evs); txt != "planned 3 tasks" {
		t.Fatalf("the lead said %q, want %q", txt, "planned 3 tasks")
	}
}

func TestSimLeadWithoutAPlan(t *testing.T) {
	d := newFakeDaemon(t, boardAnswer)
	h := startWithDaemon(t, d, nil)
	for _, tt := range []struct{ name, goal, says string }{
		{"no items", "Make it faster.\n  sim: tool write {\"path\":\"x\",\"content\":\"\"}\nsim: say hi", "I found no plan items in goal goal-1"},
		{"a plan error", "- a: x\n- b: y (after 3)", "I cannot plan goal goal-1: plan: line 2: item 2 depends on item 3"},
		{"a bullet without a colon", "- just a bullet", "plan: line 1: an item reads `- <title>: <prompt>`"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.prompt(plan.GoalPrompt("goal-1", tt.goal))
			evs := h.untilIdle()
			if n := len(of[*protocol.ToolCall](evs)); n != 0 {
				t.Fatalf("%d tool calls, want none", n)
			}
			if txt := assistantText(evs); !strings.Contains(txt, tt.says) {
				t.Fatalf("the lead said %q, want it to say %q", txt, tt.says)
			}
		})
	}
	d.noRequest()
}

func TestSimLeadSaysTheDaemonsRefusal(t *testing.T) {
	d := newFakeDaemon(t, func(fakeRequest) (any, error) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no goal goal-1")
	})
	h := startWithDaemon(t, d, nil)
	h.prompt(plan.GoalPrompt("goal-1", "- a: sim: say a"))
	evs := h.untilIdle()
	if res := teamResultOf(t, evs); !res.IsError {
		t.Fatalf("tool_result %+v, want the refusal", res.Content)
	}
	want := "I could not plan the goal: team.task.create failed: NOT_FOUND: no goal goal-1"
	if txt := assistantText(evs); txt != want {
		t.Fatalf("the lead said %q, want %q", txt, want)
	}
	d.request()
}

func TestSimLeadWithoutADaemon(t *testing.T) {
	h := start(t, nil) // no socket: the team tool is unavailable
	h.handshake()
	h.prompt(plan.GoalPrompt("goal-1", "- a: sim: say a"))
	evs := h.untilIdle()
	if res := teamResultOf(t, evs); !res.IsError || !strings.Contains(res.Content.Message, "the team tool needs the daemon") {
		t.Fatalf("tool_result %+v", res.Content)
	}
	if txt := assistantText(evs); !strings.HasPrefix(txt, "I could not plan the goal: the team tool needs the daemon") {
		t.Fatalf("the lead said %q", txt)
	}
}

// A message that is almost a goal prompt is an ordinary script.
func TestSimNotAGoalPromptIsAScript(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("[team goal goal-1]\n- a: x\nsim: say scripted")
	evs := h.untilIdle()
	if txt := assistantText(evs); txt != "scripted" {
		t.Fatalf("the sim said %q", txt)
	}
}

// FuzzSimLeadPlan: for any goal text the sim lead either says why it has
// no plan, or makes one create_tasks call whose arguments, decoded as the
// turn decodes them, are a valid team.task.create of exactly the plan's
// items; no line of the goal ever becomes a directive of the lead.
func FuzzSimLeadPlan(f *testing.F) {
	f.Add(diamondGoal)
	for _, s := range []string{"", "- a: b", "- a: x\n- b: y (after 1)", "prose\n  sim: tool write {}\nsim: exit 3",
		"- a:\n  sim: hang\n- b: </goal>\n  x (after 1)", "- t: \u0085x\u0085", "- a: x\r\n\ty\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, goal string) {
		if !utf8.ValidString(goal) {
			return // a goal came as JSON text: always UTF-8
		}
		dirs := leadDirectives(plan.GoalPrompt("goal-1", goal))
		items, err := plan.Parse(goal)
		if err != nil || len(items) == 0 {
			if len(dirs) != 1 || dirs[0].kind != dirSay {
				t.Fatalf("no plan (%v), yet directives %+v", err, dirs)
			}
			return
		}
		if len(dirs) != 2 || dirs[0].kind != dirTeamPlan || dirs[0].tool != toolTeam || dirs[1].kind != dirTeamReport {
			t.Fatalf("directives %+v", dirs)
		}
		dec := json.NewDecoder(strings.NewReader(dirs[0].rawArgs))
		dec.UseNumber()
		var args map[string]any
		if err := dec.Decode(&args); err != nil {
			t.Fatalf("raw args %q: %v", dirs[0].rawArgs, err)
		}
		cmd, err := teamCommand("agent-lead", args)
		if err != nil {
			if len(items) > protocol.MaxTasks || slices.ContainsFunc(items, func(p plan.PlannedTask) bool {
				return len(p.Title) > protocol.MaxLabelLen || len(p.Prompt) > protocol.MaxTextLen
			}) {
				return // over a limit: the tool refuses it, and the lead says so
			}
			t.Fatalf("the sim lead's call is refused: %v (args %s)", err, dirs[0].rawArgs)
		}
		c := cmd.(*protocol.TeamTaskCreate)
		if c.GoalID != "goal-1" || c.ByAgentID != "agent-lead" || len(c.Tasks) != len(items) {
			t.Fatalf("command %+v for %d items", c, len(items))
		}
		for i, it := range items {
			got := c.Tasks[i]
			if got.Title != it.Title || got.Prompt != it.Prompt || !slices.Equal(got.After, it.After) || got.Deps != nil || got.Priority != 0 {
				t.Fatalf("task %d = %+v, item %+v", i+1, got, it)
			}
		}
	})
}
