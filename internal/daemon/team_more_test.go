package daemon_test

// Budgets, messages and restarts of a team (docs/protocol.md §10.4): the
// commands and the goal loop are in team_test.go.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// TestTeamBudgetStopsNewWorkers: a goal with cost_limit_usd counts what
// its agents spent (AgentInfo.usage.cost); past the limit no new worker
// starts and the goal asks the person with a question decision, which the
// lead may not answer (PERMISSION_DENIED); lifting the limit lets the next
// worker start.
func TestTeamBudgetStopsNewWorkers(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, func(cfg *config.Config) {
		cfg.Provider.Prices = "sim=1000000/2000000" // $1 and $2 a token
		cfg.Team.MaxWorkers = 1
	})
	c := h.dial()
	limit := 0.5
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "costly", Cwd: repo, CostLimitUSD: &limit}).Goal
	if g.CostLimitUSD == nil || *g.CostLimitUSD != limit {
		t.Fatalf("goal = %+v", g)
	}
	ts := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "first", Prompt: "sim: say one"}, {Title: "second", Prompt: "sim: say two"}}}).Tasks
	ask := waitTeam(t, c, protocol.TypeTeamDecisionChanged, func(e protocol.TeamDecisionChanged) bool {
		return e.Decision.GoalID == g.GoalID && e.Decision.Kind == protocol.DecisionKindQuestion && e.Decision.State == protocol.DecisionOpen
	}).Decision
	if len(ask.Options) != 2 || ask.Options[0] != "Continue without a limit" || ask.Options[1] != "Cancel the goal" {
		t.Fatalf("budget decision = %+v", ask)
	}
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if show.Goal.CostUSD < limit {
		t.Fatalf("goal cost = %v, want past %v", show.Goal.CostUSD, limit)
	}
	started := 0
	for _, task := range show.Tasks {
		if task.State != protocol.TaskTodo {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("tasks past the budget = %+v, want one started and one todo", show.Tasks)
	}
	waiting := ts[1].TaskID
	if show.Tasks[1].State != protocol.TaskTodo {
		waiting = ts[0].TaskID
	}
	// The budget is the person's money: the lead may not lift it.
	if _, err := c.Request(ctx(t), &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer),
		DecisionID: ask.DecisionID, Option: "Continue without a limit", ByAgentID: g.LeadAgentID}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("the lead answering the budget question: %v, want PERMISSION_DENIED", err)
	}
	answer(t, c, ask.DecisionID, "Continue without a limit", "")
	mergeOf(t, c, g.GoalID, waiting)
	if goal := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID}).Goal; goal.CostLimitUSD != nil {
		t.Fatalf("goal after lifting the limit = %+v", goal)
	}
}

// TestTeamMessageReachesTheLead: team.message to "lead" is a feed item of
// the goal and a prompt of its lead, which answers it.
func TestTeamMessageReachesTheLead(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "talk", Cwd: repo}).Goal
	lead := waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.LeadAgentID != ""
	}).Goal.LeadAgentID
	obs := h.dial()
	attach(t, obs, lead, protocol.RoleObserver)
	item := teamCall[protocol.TeamFeedItemData](t, c, &protocol.TeamMessage{Header: teamHdr(protocol.TypeTeamMessage), GoalID: g.GoalID,
		To: "lead", Text: "sim: say heard-you"}).Item
	if item.Kind != protocol.FeedMessage || item.To != lead || item.GoalID != g.GoalID {
		t.Fatalf("message item = %+v", item)
	}
	waitFor(t, obs, func(e client.Event) bool {
		m, ok := e.Msg.(*protocol.MessageComplete)
		return ok && m.AgentID == lead && strings.Contains(textOf(m.Message), "heard-you")
	})
	if _, err := c.Request(ctx(t), &protocol.TeamMessage{Header: teamHdr(protocol.TypeTeamMessage), GoalID: "goal-nope", To: "lead", Text: "x"}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("a message to an unknown goal: %v, want NOT_FOUND", err)
	}
	if _, err := c.Request(ctx(t), &protocol.TeamMessage{Header: teamHdr(protocol.TypeTeamMessage), GoalID: g.GoalID, To: "agent-nope", Text: "x"}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("a message to an unknown agent: %v, want NOT_FOUND", err)
	}

	// Once no open goal has it, the daemon stops attending the lead: it
	// can be removed like any agent (an attached client would refuse it).
	if err := obs.Call(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: lead}}, nil); err != nil {
		t.Fatal(err)
	}
	teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalCancel{Header: teamHdr(protocol.TypeTeamGoalCancel), GoalID: g.GoalID})
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: lead}}); err != nil {
		t.Fatalf("agent.kill of the lead: %v", err)
	}
	// The watcher's connection is closed; the daemon sees it go a moment
	// later.
	eventually(t, "the lead removed", func() bool {
		var rm protocol.AgentRemoveData
		if err := c.Call(ctx(t), &protocol.AgentRemove{Header: hdr(protocol.TypeAgentRemove), AgentIDs: []string{lead}}, &rm); err != nil {
			t.Fatal(err)
		}
		if r := rm.Results[0]; !r.Removed && r.Kind != "attached" {
			t.Fatalf("removing the lead of a cancelled goal = %+v", r)
		}
		return rm.Results[0].Removed
	})
}

// diamondGoal is a goal the sim lead plans as three tasks, two in
// parallel and one after both, each writing one file.
const diamondGoal = `Add three files.

- file a: sim: tool write {"path":"a.txt","content":"A1"}
- file b: sim: tool write {"path":"b.txt","content":"B"}
- file c: sim: tool write {"path":"c.txt","content":"C"} (after 1, 2)
`

// allowDecision answers the open permission decision of task id, Allow
// once.
func allowDecision(t *testing.T, c *client.Conn, goalID, taskID string) {
	t.Helper()
	d := decisionOf(t, c, goalID, protocol.DecisionKindPermission, taskID)
	if a := answer(t, c, d.DecisionID, protocol.OptionAllowOnce, ""); a.State != protocol.DecisionAnswered {
		t.Fatalf("permission answer = %+v", a)
	}
}

// TestTeamSimGoalToDoneAcrossARestart is the whole loop as a person runs
// it, with nothing but decisions: a goal the sim lead plans as three tasks
// (two parallel, one after both); every worker's write is a permission
// decision; one merge is answered "Request changes" before it is merged;
// the daemon is killed with merge decisions open and comes back with the
// board intact; the merges are answered from two clients; the main
// checkout holds the three changes, every worktree is retired, the goal is
// done.
func TestTeamSimGoalToDoneAcrossARestart(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: diamondGoal, Cwd: repo}).Goal
	waitTeam(t, c, protocol.TypeTeamTaskChanged, func(e protocol.TeamTaskChanged) bool { return e.Task.GoalID == g.GoalID && e.Task.Title == "file c" })
	board := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if len(board.Tasks) != 3 || len(board.Tasks[2].Deps) != 2 {
		t.Fatalf("planned board = %+v", board)
	}
	a, b, cc := board.Tasks[0], board.Tasks[1], board.Tasks[2]

	allowDecision(t, c, g.GoalID, a.TaskID)
	allowDecision(t, c, g.GoalID, b.TaskID)
	da := mergeOf(t, c, g.GoalID, a.TaskID)
	answer(t, c, da.DecisionID, protocol.OptionRequestChanges, writeTool("a.txt", "A2"))
	allowDecision(t, c, g.GoalID, a.TaskID) // the changes write again
	mergeOf(t, c, g.GoalID, a.TaskID)
	mergeOf(t, c, g.GoalID, b.TaskID)
	before := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})

	h.d.Shutdown(true) // killed with two merge decisions open
	h2 := startWith(t, h.cfg)
	c1, c2 := h2.dial(), h2.dial()
	after := teamCall[protocol.TeamGoalShowData](t, c1, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if len(after.Tasks) != 3 || len(after.Decisions) != len(before.Decisions) {
		t.Fatalf("board after the restart = %+v, before %+v", after, before)
	}
	for i, task := range after.Tasks {
		if was := before.Tasks[i]; task.State != was.State || task.Branch != was.Branch || task.WorkspaceID != was.WorkspaceID {
			t.Fatalf("task %d after the restart = %+v, before %+v", i, task, was)
		}
	}
	answer(t, c1, mergeOf(t, c1, g.GoalID, a.TaskID).DecisionID, protocol.OptionMerge, "")
	answer(t, c2, mergeOf(t, c2, g.GoalID, b.TaskID).DecisionID, protocol.OptionMerge, "")
	allowDecision(t, c1, g.GoalID, cc.TaskID)
	answer(t, c1, mergeOf(t, c1, g.GoalID, cc.TaskID).DecisionID, protocol.OptionMerge, "")
	show := teamCall[protocol.TeamGoalShowData](t, c1, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if show.Goal.Status != protocol.GoalDone || show.Goal.Progress != 1 {
		t.Fatalf("goal = %+v", show.Goal)
	}
	for path, want := range map[string]string{"a.txt": "A2", "b.txt": "B", "c.txt": "C"} {
		if got, err := os.ReadFile(filepath.Join(repo, path)); err != nil || string(got) != want {
			t.Fatalf("main checkout %s = %q, %v; want %q", path, got, err, want)
		}
	}
	var wl protocol.WorkspaceListData
	if err := c1.Call(ctx(t), &protocol.WorkspaceList{Header: hdr(protocol.TypeWorkspaceList)}, &wl); err != nil || len(wl.Workspaces) != 0 {
		t.Fatalf("workspaces not retired: %+v, %v", wl.Workspaces, err)
	}
}

// TestTeamGoalWithoutPlanIsGivenAgainOnce: a goal still planning, with no
// task, after a restart is given to its lead again, and the prompt's dedupe
// key keeps the lead from getting it twice.
func TestTeamGoalWithoutPlanIsGivenAgainOnce(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "think about it", Cwd: repo}).Goal
	isPlanItem := func(e protocol.TeamFeedAdded) bool {
		return e.Item.GoalID == g.GoalID && e.Item.Kind == protocol.FeedPlan
	}
	waitTeam(t, c, protocol.TypeTeamFeedAdded, isPlanItem)
	h.d.Shutdown(true)

	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	feed := teamCall[protocol.TeamFeedData](t, c2, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed), GoalID: g.GoalID, Limit: 200})
	plans := 0
	for _, it := range feed.Items {
		if it.Kind == protocol.FeedPlan {
			plans++
		}
	}
	if plans < 2 {
		waitTeam(t, c2, protocol.TypeTeamFeedAdded, isPlanItem)
	}
	sync := attach(t, c2, g.LeadAgentID, protocol.RoleObserver)
	given := 0
	for _, m := range sync.LiveWindow.Messages {
		if m.Role == "user" && strings.Contains(textOf(m), "[team goal "+g.GoalID+"]") {
			given++
		}
	}
	if given != 1 {
		t.Fatalf("the lead was given the goal %d times, want once", given)
	}
}

// TestTeamMessageToAllRoutesByName: a message to "all" goes to the lead,
// unless its text starts with "@name" naming a worker of the goal (its
// alias), which gets it instead.
func TestTeamMessageToAllRoutesByName(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "names", Cwd: repo}).Goal
	task := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "named", Prompt: "sim: say done"}}}).Tasks[0]
	mergeOf(t, c, g.GoalID, task.TaskID)
	worker := taskOf(t, c, g.GoalID, task.TaskID).Assignee
	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: worker}}, &st); err != nil || st.Agents[0].Alias == "" {
		t.Fatalf("worker = %+v, %v", st, err)
	}
	alias := st.Agents[0].Alias

	toLead := teamCall[protocol.TeamFeedItemData](t, c, &protocol.TeamMessage{Header: teamHdr(protocol.TypeTeamMessage), GoalID: g.GoalID, To: "all", Text: "hello all"}).Item
	if toLead.To != g.LeadAgentID {
		t.Fatalf("a message to all without a name went to %s, want the lead %s", toLead.To, g.LeadAgentID)
	}
	obs := h.dial()
	attach(t, obs, worker, protocol.RoleObserver)
	named := teamCall[protocol.TeamFeedItemData](t, c, &protocol.TeamMessage{Header: teamHdr(protocol.TypeTeamMessage), GoalID: g.GoalID, To: "all",
		Text: "@" + alias + " sim: say routed"}).Item
	if named.To != worker {
		t.Fatalf("a message to @%s went to %s, want the worker %s", alias, named.To, worker)
	}
	waitFor(t, obs, func(e client.Event) bool {
		m, ok := e.Msg.(*protocol.MessageComplete)
		return ok && m.AgentID == worker && strings.Contains(textOf(m.Message), "routed")
	})
}

// TestTeamAssigneeGoesOnInTheWorkersWorkspace: a task created with an
// assignee goes on in that worker's workspace, on its branch (an agent is
// bound to one workspace, docs/protocol.md §10.4): the worker of a
// cancelled task takes a new one, writes in its worktree, and the merge
// brings the change to the main checkout. An assignee that is no worker of
// the lead (the lead itself), a worker busy with an open task, one given
// two tasks of a batch, and an agent that does not exist are refused.
func TestTeamAssigneeGoesOnInTheWorkersWorkspace(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "assign", Cwd: repo}).Goal
	first := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "asks", Prompt: writeTool("a.txt", "A")}}}).Tasks[0]
	// Its write asks permission: the worker runs in its worktree.
	decisionOf(t, c, g.GoalID, protocol.DecisionKindPermission, first.TaskID)
	doing := taskOf(t, c, g.GoalID, first.TaskID)
	worker := doing.Assignee
	create := func(specs ...protocol.TeamTaskSpec) ([]protocol.TeamTask, error) {
		var out protocol.TeamTasksData
		err := c.Call(ctx(t), &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID, Tasks: specs}, &out)
		return out.Tasks, err
	}
	if _, err := create(protocol.TeamTaskSpec{Title: "busy", Prompt: "x", Assignee: worker}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("a worker busy with a doing task: %v, want CONFLICT", err)
	}
	teamCall[protocol.TeamTaskData](t, c, &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction), TaskID: first.TaskID, Action: protocol.TaskActionCancel})
	lead := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID}).Goal.LeadAgentID
	// Once the cancelled run ended (a task is not given to a worker while
	// its run stops), the worker is free.
	var ended protocol.SubagentWaitData
	if err := c.Call(ctx(t), &protocol.SubagentWait{Header: hdr(protocol.TypeSubagentWait), ParentAgentID: lead, Handles: []string{doing.RunID}}, &ended); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct {
		specs []protocol.TeamTaskSpec
		code  protocol.ErrorCode
	}{
		{[]protocol.TeamTaskSpec{{Title: "lead", Prompt: "x", Assignee: lead}}, protocol.CodeConflict},
		{[]protocol.TeamTaskSpec{{Title: "nobody", Prompt: "x", Assignee: "agent-nope"}}, protocol.CodeNotFound},
		{[]protocol.TeamTaskSpec{{Title: "a", Prompt: "x", Assignee: worker}, {Title: "b", Prompt: "y", Assignee: worker}}, protocol.CodeConflict},
	} {
		if _, err := create(bad.specs...); protocol.CodeOf(err) != bad.code {
			t.Fatalf("create %+v: %v, want %s", bad.specs, err, bad.code)
		}
	}

	ts, err := create(protocol.TeamTaskSpec{Title: "goes on", Prompt: writeTool("b.txt", "B"), Assignee: worker})
	if err != nil {
		t.Fatal(err)
	}
	next := ts[0]
	if next.Assignee != worker || next.WorkspaceID != doing.WorkspaceID || next.Branch != doing.Branch || next.Worktree != doing.Worktree {
		t.Fatalf("assigned task = %+v, want %s's workspace %s (%s)", next, worker, doing.WorkspaceID, doing.Branch)
	}
	allowDecision(t, c, g.GoalID, next.TaskID)
	m := mergeOf(t, c, g.GoalID, next.TaskID)
	if rev := taskOf(t, c, g.GoalID, next.TaskID); rev.Assignee != worker || rev.WorkspaceID != doing.WorkspaceID {
		t.Fatalf("the task in review = %+v, want it built by %s in %s", rev, worker, doing.WorkspaceID)
	}
	if a := answer(t, c, m.DecisionID, protocol.OptionMerge, ""); a.State != protocol.DecisionAnswered {
		t.Fatalf("merge = %+v", a)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "b.txt")); err != nil || string(b) != "B" {
		t.Fatalf("b.txt in the main checkout: %q, %v", b, err)
	}
}

// TestTeamWorkersReadSharedMemory: the team's shared memory goes into
// every worker's task (docs/protocol.md §10.4: "with the shared memory
// after it"), so a note written before a task starts is in its worker's
// conversation; a note of another scope is not.
func TestTeamWorkersReadSharedMemory(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "remember", Cwd: repo}).Goal
	teamCall[protocol.TeamMemoryData](t, c, &protocol.TeamMemoryPut{Header: teamHdr(protocol.TypeTeamMemoryPut),
		Scope: protocol.MemoryScopeShared, Key: "style", Title: "House style", Body: "indent with tabs-7f3a"})
	teamCall[protocol.TeamMemoryData](t, c, &protocol.TeamMemoryPut{Header: teamHdr(protocol.TypeTeamMemoryPut),
		Scope: "agent-someone", Key: "own", Body: "private-note-9c1e"})
	task := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "reads", Prompt: "sim: say read the notes"}}}).Tasks[0]
	m := mergeOf(t, c, g.GoalID, task.TaskID) // the worker's run completed
	worker := taskOf(t, c, g.GoalID, m.TaskID).Assignee
	s := attach(t, h.dial(), worker, "")
	var user []string
	for _, msg := range s.LiveWindow.Messages {
		for _, b := range msg.Content {
			if msg.Role == "user" {
				user = append(user, b.Text)
			}
		}
	}
	joined := strings.Join(user, "\n")
	if !strings.Contains(joined, "House style") || !strings.Contains(joined, "indent with tabs-7f3a") {
		t.Fatalf("the worker's task lacks the shared memory: %q", joined)
	}
	if strings.Contains(joined, "private-note-9c1e") {
		t.Fatalf("another agent's note reached the worker: %q", joined)
	}
}
