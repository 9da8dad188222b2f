package shardmcp_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// TestToolsAreListedWithHints: the server lists one tool per command, each
// with an object schema, and marks the ones that change nothing read-only
// and stop destructive.
func TestToolsAreListedWithHints(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	s := h.mcpAs(h.create(c, ""))
	if got := s.InitializeResult().ServerInfo.Name; got != "shard" {
		t.Fatalf("server name %q, want shard", got)
	}
	res, err := s.ListTools(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	readOnly := []string{"subagent_wait", "subagent_status", "team_goals", "team_board", "team_memory_list", "team_decisions"}
	for _, name := range []string{"subagent_create", "subagent_wait", "subagent_status", "subagent_steer", "subagent_stop",
		"team_create_tasks", "team_goals", "team_board", "team_memory_list", "team_memory_write", "team_message",
		"team_decisions", "team_answer"} {
		tl := byName[name]
		if tl == nil {
			t.Fatalf("tool %s not listed (got %d tools)", name, len(res.Tools))
		}
		if tl.Annotations == nil || tl.Annotations.ReadOnlyHint != slices.Contains(readOnly, name) {
			t.Errorf("%s: annotations %+v, want readOnlyHint %v", name, tl.Annotations, slices.Contains(readOnly, name))
		}
		if d := tl.Annotations.DestructiveHint; d == nil || *d != (name == "subagent_stop") {
			t.Errorf("%s: destructiveHint %v", name, d)
		}
		if schema, ok := tl.InputSchema.(map[string]any); !ok || schema["type"] != "object" {
			t.Errorf("%s: input schema %v", name, tl.InputSchema)
		}
	}
	if len(res.Tools) != 13 {
		t.Errorf("%d tools listed, want 13", len(res.Tools))
	}
}

// TestSubagentToolsOverMCP drives every subagent tool through the real
// `shardd mcp` against the real daemon: a single and a parallel job under
// the agent the server acts as, waits (all, any, poll), status, steer,
// stop; the daemon's refusals as tool errors with their code; another
// agent's server reaching none of these jobs; and the limits
// (jobs.max_active, max_tasks, max_depth) holding as for the runtime's own
// tool.
func TestSubagentToolsOverMCP(t *testing.T) {
	h := start(t, func(c *config.Config) {
		c.Jobs.MaxActive = 1 // a batch's second run waits for the first
		c.Jobs.MaxTasks = 2
		c.Jobs.MaxDepth = 1
	})
	c := h.dial()
	parent := h.create(c, "")
	watchParent(t, c, parent)
	s := h.mcpAs(parent)

	// A single child: create answers at once, wait returns its final text.
	job := value[protocol.SubagentCreateData](t, s, "subagent_create", map[string]any{"name": "helper", "task": "sim: say from the child"})
	if !strings.HasPrefix(job.JobID, "job-") || job.Strategy != protocol.StrategySingle || len(job.Runs) != 1 || job.Runs[0].Name != "helper" {
		t.Fatalf("create = %+v", job)
	}
	helper := job.Runs[0]
	done := value[protocol.SubagentWaitData](t, s, "subagent_wait", map[string]any{"handles": []string{job.JobID}, "timeout": 30})
	if done.TimedOut || len(done.Runs) != 1 || done.Runs[0].State != protocol.RunCompleted || done.Runs[0].FinalText != "from the child" {
		t.Fatalf("wait = %+v", done)
	}
	// The job is the parent's, as the daemon records it.
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].JobID != job.JobID || st.Jobs[0].ParentAgentID != parent || st.Agents[0].ParentAgentID != parent {
		t.Fatalf("status of the job = %+v, want it the parent's", st)
	}

	// A parallel batch under jobs.max_active 1: the second run is queued
	// while the first sleeps, so wait any returns the first alone.
	batch := value[protocol.SubagentCreateData](t, s, "subagent_create", map[string]any{"tasks": []map[string]any{
		{"name": "a", "task": "sim: sleep 1500\nsim: say a"}, {"name": "b", "task": "sim: say b"}}})
	if batch.Strategy != protocol.StrategyParallel || len(batch.Runs) != 2 {
		t.Fatalf("batch = %+v", batch)
	}
	a, b := batch.Runs[0], batch.Runs[1]
	waitRunState(t, c, a.RunID, protocol.RunActive)
	queued := value[protocol.SubagentStatusData](t, s, "subagent_status", map[string]any{"targets": []string{b.RunID}})
	if len(queued.Agents) != 1 || queued.Agents[0].Run == nil || queued.Agents[0].Run.State != protocol.RunQueued {
		t.Fatalf("status of b under max_active 1 = %+v, want queued", queued)
	}
	poll := value[protocol.SubagentWaitData](t, s, "subagent_wait", map[string]any{"handles": []string{batch.JobID}, "timeout": 0})
	if !poll.TimedOut {
		t.Fatalf("poll of a running batch = %+v, want timed_out", poll)
	}
	anyDone := value[protocol.SubagentWaitData](t, s, "subagent_wait", map[string]any{"handles": []string{a.RunID, b.RunID}, "mode": "any", "timeout": 30})
	if anyDone.TimedOut || len(anyDone.Runs) != 2 || anyDone.Runs[0].State != protocol.RunCompleted || anyDone.Runs[0].FinalText != "a" ||
		anyDone.Runs[1].State.Terminal() {
		t.Fatalf("wait any = %+v, want a done and b not", anyDone)
	}
	all := value[protocol.SubagentWaitData](t, s, "subagent_wait", map[string]any{"handles": []string{batch.JobID}, "mode": "all"})
	if all.TimedOut || all.AggregateState != string(protocol.JobCompleted) || all.Runs[1].FinalText != "b" {
		t.Fatalf("wait all = %+v", all)
	}

	// Steer a run whose turn is executing: injected into that turn.
	steered := value[protocol.SubagentCreateData](t, s, "subagent_create", map[string]any{"name": "s", "task": "sim: sleep 1500\nsim: say base"})
	run := steered.Runs[0]
	waitRunState(t, c, run.RunID, protocol.RunActive)
	steer := value[protocol.SubagentSteerData](t, s, "subagent_steer", map[string]any{"target": run.Alias, "message": "sim: say steered"})
	if steer.Status != "injected" || steer.RunID != run.RunID {
		t.Fatalf("steer = %+v", steer)
	}
	if w := value[protocol.SubagentWaitData](t, s, "subagent_wait", map[string]any{"handles": run.RunID}); !strings.Contains(w.Runs[0].FinalText, "steered") {
		t.Fatalf("the steer did not reach the turn: %+v", w.Runs[0])
	}
	if code, _ := toolError(t, s, "subagent_steer", map[string]any{"target": run.RunID, "message": "too late"}); code != protocol.CodeConflict {
		t.Fatalf("steer of a finished run: %s, want CONFLICT", code)
	}

	// Stop a long run.
	long := value[protocol.SubagentCreateData](t, s, "subagent_create", map[string]any{"name": "long", "task": "sim: sleep 60000"})
	waitRunState(t, c, long.Runs[0].RunID, protocol.RunActive)
	stopped := value[protocol.SubagentStopData](t, s, "subagent_stop", map[string]any{"handle": long.JobID})
	if len(stopped.Cancelled) != 1 || stopped.Cancelled[0].RunID != long.Runs[0].RunID {
		t.Fatalf("stop = %+v", stopped)
	}
	if w := value[protocol.SubagentWaitData](t, s, "subagent_wait", map[string]any{"handles": []string{long.JobID}, "timeout": 30}); w.Runs[0].State != protocol.RunCancelled {
		t.Fatalf("stopped run = %+v, want cancelled", w.Runs[0])
	}

	// Refusals carry the daemon's code.
	if code, text := toolError(t, s, "subagent_wait", map[string]any{"handles": []string{"job-nope"}, "timeout": 0}); code != protocol.CodeNotFound ||
		!strings.HasPrefix(text, "subagent.wait failed: NOT_FOUND: ") {
		t.Fatalf("wait of an unknown handle: %s %q, want NOT_FOUND", code, text)
	}
	if code, text := toolError(t, s, "subagent_stop", map[string]any{}); code != protocol.CodeInvalidRequest || !strings.Contains(text, "handle") {
		t.Fatalf("stop without a handle: %s %q, want INVALID_REQUEST naming handle", code, text)
	}

	if code, text := toolError(t, s, "subagent_create", map[string]any{"name": "x", "task": "y", "runtime": "nope"}); code != protocol.CodeInvalidRequest || !strings.Contains(text, "runtime") {
		t.Fatalf("create on an unknown runtime profile: %s %q, want INVALID_REQUEST", code, text)
	}

	// Limits: max_tasks, and max_depth for a child acting as a parent.
	three := []map[string]any{{"name": "x", "task": "sim: say x"}, {"name": "y", "task": "sim: say y"}, {"name": "z", "task": "sim: say z"}}
	if code, _ := toolError(t, s, "subagent_create", map[string]any{"tasks": three}); code != protocol.CodeInvalidRequest {
		t.Fatalf("three tasks over max_tasks 2: %s, want INVALID_REQUEST", code)
	}
	child := h.mcpAs(helper.AgentID)
	if code, _ := toolError(t, child, "subagent_create", map[string]any{"name": "grandchild", "task": "sim: say g"}); code != protocol.CodePermissionDenied {
		t.Fatalf("a child's create past max_depth 1: %s, want PERMISSION_DENIED", code)
	}

	// Privacy: another agent's server reaches none of these jobs.
	other := h.mcpAs(h.create(c, ""))
	if code, _ := toolError(t, other, "subagent_wait", map[string]any{"handles": []string{job.JobID}, "timeout": 0}); code != protocol.CodeNotFound {
		t.Fatalf("another agent's wait on the job: %s, want NOT_FOUND", code)
	}
	if st := value[protocol.SubagentStatusData](t, other, "subagent_status", nil); len(st.Jobs) != 0 {
		t.Fatalf("another agent's status lists %+v", st.Jobs)
	}
}

// TestTeamToolsOverMCP: the goal's lead plans through team_create_tasks
// (the tasks are by the lead), reads the board, goals and decisions, writes
// and lists a note; it answers a worker's question decision (recorded as
// the lead's, in the decision and the feed), and is refused a permission
// decision, which is the person's, by the daemon.
func TestTeamToolsOverMCP(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	var goal protocol.TeamGoalData
	if err := c.Call(ctx(t), &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: "ask", Cwd: repo}, &goal); err != nil {
		t.Fatal(err)
	}
	g := goal.Goal
	s := h.mcpAs(g.LeadAgentID)

	created := value[protocol.TeamTasksData](t, s, "team_create_tasks", map[string]any{"goal_id": g.GoalID, "tasks": []map[string]any{
		{"title": "write", "prompt": `sim: tool write {"path":"p.txt","content":"P"}`},
		{"title": "ask", "prompt": "sim: ask select Colour red blue", "priority": 1},
		{"title": "say", "prompt": "sim: say private-marker"},
	}})
	if len(created.Tasks) != 3 || created.Tasks[0].CreatedBy != g.LeadAgentID || created.Tasks[1].Priority != 1 {
		t.Fatalf("created = %+v, want two tasks by the lead", created.Tasks)
	}
	// A task's worker prompt is private (docs/protocol.md §10.4): the
	// board shows titles only.
	if text := resultText(t, call(t, s, "team_board", map[string]any{"goal_id": g.GoalID})); strings.Contains(text, "private-marker") {
		t.Fatalf("the board carries a task's prompt: %s", text)
	}
	board := value[protocol.TeamGoalShowData](t, s, "team_board", map[string]any{"goal_id": g.GoalID})
	if board.Goal.GoalID != g.GoalID || len(board.Tasks) != 3 || board.Tasks[0].Title != "write" {
		t.Fatalf("board = %+v", board)
	}
	if goals := value[protocol.TeamGoalListData](t, s, "team_goals", map[string]any{"open_only": true}); len(goals.Goals) != 1 || goals.Goals[0].GoalID != g.GoalID {
		t.Fatalf("goals = %+v", goals)
	}

	open := map[string]protocol.TeamDecision{} // by kind
	waitFor(t, c, func(e client.Event) bool {
		if ev, ok := e.Msg.(*protocol.TeamDecisionChanged); ok && ev.Decision.GoalID == g.GoalID && ev.Decision.State == protocol.DecisionOpen {
			open[ev.Decision.Kind] = ev.Decision
		}
		return open[protocol.DecisionKindQuestion].DecisionID != "" && open[protocol.DecisionKindPermission].DecisionID != ""
	})
	q, perm := open[protocol.DecisionKindQuestion], open[protocol.DecisionKindPermission]
	listed := value[protocol.TeamDecisionListData](t, s, "team_decisions", map[string]any{"goal_id": g.GoalID, "open_only": true})
	ids := map[string]bool{}
	for _, d := range listed.Decisions {
		ids[d.DecisionID] = d.State == protocol.DecisionOpen
	}
	if !ids[q.DecisionID] || !ids[perm.DecisionID] {
		t.Fatalf("open decisions = %+v, want the question and the permission", listed.Decisions)
	}
	if text := resultText(t, call(t, s, "team_decisions", map[string]any{"goal_id": g.GoalID})); strings.Contains(text, "private-marker") {
		t.Fatalf("the decisions carry a task's prompt: %s", text)
	}

	if code, text := toolError(t, s, "team_answer", map[string]any{"decision_id": perm.DecisionID, "option": protocol.OptionAllowOnce}); code != protocol.CodePermissionDenied ||
		!strings.Contains(text, "permission decision") {
		t.Fatalf("an agent's answer to a permission decision: %s %q, want PERMISSION_DENIED", code, text)
	}
	if code, _ := toolError(t, h.mcpAs("agent-nobody"), "team_answer", map[string]any{"decision_id": q.DecisionID, "option": "blue"}); code != protocol.CodeNotFound {
		t.Fatalf("an answer as an agent that does not exist: %s, want NOT_FOUND", code)
	}
	answered := value[protocol.TeamDecisionData](t, s, "team_answer", map[string]any{"decision_id": q.DecisionID, "option": "blue"})
	if answered.Decision.State != protocol.DecisionAnswered || answered.Decision.Answer == nil || answered.Decision.Answer.Option != "blue" ||
		answered.Decision.Answer.By != g.LeadAgentID {
		t.Fatalf("answered question = %+v (answer %+v), want blue by the lead", answered.Decision, answered.Decision.Answer)
	}
	var feed protocol.TeamFeedData
	if err := c.Call(ctx(t), &protocol.TeamFeed{Header: protocol.Header{Type: protocol.TypeTeamFeed}, GoalID: g.GoalID, Limit: 200}, &feed); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(feed.Items, func(it protocol.TeamFeedItem) bool {
		return it.Kind == protocol.FeedDecision && it.AgentID == g.LeadAgentID && strings.Contains(it.Text, "answered: blue")
	}) {
		t.Fatalf("feed = %+v, want the answer by the lead", feed.Items)
	}
	if code, _ := toolError(t, s, "team_answer", map[string]any{"decision_id": q.DecisionID, "option": "red"}); code != protocol.CodeConflict {
		t.Fatalf("a second answer: %s, want CONFLICT", code)
	}
	if code, _ := toolError(t, s, "team_board", map[string]any{"goal_id": "goal-nope"}); code != protocol.CodeNotFound {
		t.Fatalf("board of an unknown goal: %s, want NOT_FOUND", code)
	}

	// Notes: written by the lead, in its own scope with "self".
	put := value[protocol.TeamMemoryData](t, s, "team_memory_write", map[string]any{"scope": "self", "key": "plan", "body": "two tasks"})
	if put.Entry.Scope != g.LeadAgentID || put.Entry.Author != g.LeadAgentID {
		t.Fatalf("note = %+v, want the lead's", put.Entry)
	}
	if notes := value[protocol.TeamMemoryListData](t, s, "team_memory_list", map[string]any{"scope": "self"}); len(notes.Entries) != 1 || notes.Entries[0].Key != "plan" {
		t.Fatalf("notes = %+v", notes)
	}
}
