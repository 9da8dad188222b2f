package daemon_test

import (
	"encoding/json"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// teamCall sends a team.* command and decodes its answer.
func teamCall[T any](t *testing.T, c *client.Conn, cmd protocol.Typed) T {
	t.Helper()
	var data T
	if err := c.Call(ctx(t), cmd, &data); err != nil {
		t.Fatalf("%s: %v", cmd.Head().Type, err)
	}
	return data
}

func teamHdr(typ string) protocol.Header { return protocol.Header{Type: typ} }

// waitTeam waits for a team_* event whose payload satisfies pred.
func waitTeam[T any](t *testing.T, c *client.Conn, typ string, pred func(T) bool) T {
	t.Helper()
	var out T
	waitFor(t, c, func(e client.Event) bool {
		if e.Msg.Head().Type != typ {
			return false
		}
		var v T
		if err := json.Unmarshal(e.Raw, &v); err != nil {
			t.Fatalf("decode %s: %v", typ, err)
		}
		if pred(v) {
			out = v
			return true
		}
		return false
	})
	return out
}

// TestTeamCommandsOverTheWire: every team.* command is answered by the
// team coordinator with the protocol's codes; a goal submitted in a git
// repository is committed planning, announced, and gets a lead (a new
// durable agent titled "lead") that the goal records; tasks created for it
// make it active; memory, feed and decisions answer. Task prompts never
// appear in an answer or event.
func TestTeamCommandsOverTheWire(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()

	// Refusals: no cwd and no team.repo; a cwd outside a repository.
	if _, err := c.Request(ctx(t), &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "x"}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("submit without cwd: %v, want INVALID_REQUEST", err)
	}
	_, err := c.Request(ctx(t), &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "x", Cwd: shortTemp(t)})
	if r, ok := protocol.WorkspaceRefusalOf(err); protocol.CodeOf(err) != protocol.CodeInvalidRequest || !ok || r.Kind != protocol.RefusalNotARepository {
		t.Fatalf("submit outside a repository: %v, want INVALID_REQUEST not_a_repository", err)
	}
	for _, cmd := range []protocol.Typed{
		&protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: "goal-nope"},
		&protocol.TeamGoalCancel{Header: teamHdr(protocol.TypeTeamGoalCancel), GoalID: "goal-nope"},
		&protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction), TaskID: "task-nope", Action: protocol.TaskActionRetry},
		&protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer), DecisionID: "decision-nope", Option: "Merge"},
		&protocol.TeamMemoryDelete{Header: teamHdr(protocol.TypeTeamMemoryDelete), MemoryID: "memory-nope"},
	} {
		if _, err := c.Request(ctx(t), cmd); protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Fatalf("%s of an unknown id: %v, want NOT_FOUND", cmd.Head().Type, err)
		}
	}

	sub := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit),
		Text: "Add two files", Cwd: repo, RequestID: "req-1"})
	g := sub.Goal
	if g.Status != protocol.GoalPlanning || g.Cwd != repo || g.GoalID == "" {
		t.Fatalf("submitted goal = %+v", g)
	}
	again := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit),
		Text: "Add two files", Cwd: repo, RequestID: "req-1"})
	if again.Goal.GoalID != g.GoalID {
		t.Fatalf("a repeated request_id made goal %s, want %s", again.Goal.GoalID, g.GoalID)
	}
	led := waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.LeadAgentID != ""
	})
	lead := led.Goal.LeadAgentID
	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: lead}}, &st); err != nil {
		t.Fatalf("agent.status of the lead: %v", err)
	}
	if a := st.Agents[0]; a.Title != "lead" || a.Cwd != repo {
		t.Fatalf("lead = %+v", a)
	}

	created := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "one", Prompt: "sim: sleep 60000 secret-prompt"}, {Title: "two", Prompt: "sim: say two secret-prompt", After: []int{1}}}})
	if len(created.Tasks) != 2 || created.Tasks[1].Deps[0] != created.Tasks[0].TaskID || created.Tasks[0].CreatedBy != "user" {
		t.Fatalf("created = %+v", created.Tasks)
	}
	waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.Status == protocol.GoalActive
	})
	// A cycle through deps is refused, all or none.
	if _, err := c.Request(ctx(t), &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "x", Prompt: "p", Deps: []string{"task-nope"}}}}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("a dependency on no task: %v, want INVALID_REQUEST", err)
	}

	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if show.Goal.GoalID != g.GoalID || len(show.Tasks) != 2 || show.Tasks[0].Title != "one" {
		t.Fatalf("show = %+v", show)
	}
	list := teamCall[protocol.TeamGoalListData](t, c, &protocol.TeamGoalList{Header: teamHdr(protocol.TypeTeamGoalList), OpenOnly: true})
	if len(list.Goals) != 1 || list.Goals[0].GoalID != g.GoalID {
		t.Fatalf("list = %+v", list)
	}

	prio := teamCall[protocol.TeamTaskData](t, c, &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction),
		TaskID: created.Tasks[1].TaskID, Action: protocol.TaskActionPrioritize, Arg: "7"})
	if prio.Task.Priority != 7 {
		t.Fatalf("prioritized = %+v", prio.Task)
	}
	if _, err := c.Request(ctx(t), &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction),
		TaskID: created.Tasks[1].TaskID, Action: protocol.TaskActionRetry}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("retry of a todo task: %v, want CONFLICT", err)
	}

	put := teamCall[protocol.TeamMemoryData](t, c, &protocol.TeamMemoryPut{Header: teamHdr(protocol.TypeTeamMemoryPut),
		Scope: protocol.MemoryScopeShared, Key: "style", Title: "Style", Body: "tabs"})
	waitTeam(t, c, protocol.TypeTeamMemoryChanged, func(e protocol.TeamMemoryChanged) bool { return e.Entry.MemoryID == put.Entry.MemoryID })
	mem := teamCall[protocol.TeamMemoryListData](t, c, &protocol.TeamMemoryList{Header: teamHdr(protocol.TypeTeamMemoryList)})
	if len(mem.Entries) != 1 || mem.Entries[0].Body != "tabs" || mem.Entries[0].Author != "user" {
		t.Fatalf("memory = %+v", mem)
	}
	teamCall[struct{}](t, c, &protocol.TeamMemoryDelete{Header: teamHdr(protocol.TypeTeamMemoryDelete), MemoryID: put.Entry.MemoryID})
	waitTeam(t, c, protocol.TypeTeamMemoryChanged, func(e protocol.TeamMemoryChanged) bool { return e.Deleted && e.Entry.MemoryID == put.Entry.MemoryID })

	msg := teamCall[protocol.TeamFeedItemData](t, c, &protocol.TeamMessage{Header: teamHdr(protocol.TypeTeamMessage), GoalID: g.GoalID, To: "user", Text: "hello"})
	if msg.Item.Kind != protocol.FeedUser || msg.Item.To != "user" {
		t.Fatalf("message item = %+v", msg.Item)
	}
	feed := teamCall[protocol.TeamFeedData](t, c, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed), GoalID: g.GoalID, Limit: 2})
	if len(feed.Items) != 2 || feed.Items[0].FeedID != msg.Item.FeedID || feed.NextBefore == "" {
		t.Fatalf("feed page = %+v", feed)
	}
	decs := teamCall[protocol.TeamDecisionListData](t, c, &protocol.TeamDecisionList{Header: teamHdr(protocol.TypeTeamDecisionList), OpenOnly: true})
	if len(decs.Decisions) != 0 {
		t.Fatalf("decisions = %+v", decs)
	}

	cancelled := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalCancel{Header: teamHdr(protocol.TypeTeamGoalCancel), GoalID: g.GoalID})
	if cancelled.Goal.Status != protocol.GoalCancelled || cancelled.Goal.EndedAt == 0 {
		t.Fatalf("cancelled = %+v", cancelled.Goal)
	}
	if _, err := c.Request(ctx(t), &protocol.TeamGoalCancel{Header: teamHdr(protocol.TypeTeamGoalCancel), GoalID: g.GoalID}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("second cancel: %v, want CONFLICT", err)
	}
	show = teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	for _, task := range show.Tasks {
		if task.State != protocol.TaskCancelled {
			t.Fatalf("task after the goal's cancel = %+v", task)
		}
	}
}
