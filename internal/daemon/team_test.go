package daemon_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
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

// privateMarker is in worker prompts: no event a client that is not
// attached to the worker sees may carry it (task prompts are private,
// docs/protocol.md §10.4).
const privateMarker = "zebra-marker"

// waitTeam waits for a team_* event whose payload satisfies pred.
func waitTeam[T any](t *testing.T, c *client.Conn, typ string, pred func(T) bool) T {
	t.Helper()
	var out T
	waitFor(t, c, func(e client.Event) bool {
		if bytes.Contains(e.Raw, []byte(privateMarker)) {
			t.Fatalf("a task's prompt reached a client: %s", e.Raw)
		}
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
	if _, err := c.Request(ctx(t), &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "x", Cwd: "relative/dir"}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("submit with a relative cwd: %v, want INVALID_REQUEST", err)
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
	if g.Status != protocol.GoalPlanning || g.Cwd != repo || g.GoalID == "" || g.LeadAgentID == "" {
		t.Fatalf("submitted goal = %+v", g)
	}
	// A lead the daemon refuses is the submit's error; the goal is kept,
	// failed.
	_, err = c.Request(ctx(t), &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "y", Cwd: repo, Provider: "nope"})
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("submit with an unknown provider: %v, want NOT_FOUND", err)
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
	list = teamCall[protocol.TeamGoalListData](t, c, &protocol.TeamGoalList{Header: teamHdr(protocol.TypeTeamGoalList)})
	if len(list.Goals) != 2 || list.Goals[1].GoalID != g.GoalID || list.Goals[0].Status != protocol.GoalFailed {
		t.Fatalf("list of every goal, newest first = %+v", list)
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
	if _, err := c.Request(ctx(t), &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction),
		TaskID: created.Tasks[1].TaskID, Action: protocol.TaskActionReassign, Arg: "agent-nope"}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("reassign to no agent: %v, want NOT_FOUND", err)
	}
	re := teamCall[protocol.TeamTaskData](t, c, &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction),
		TaskID: created.Tasks[1].TaskID, Action: protocol.TaskActionReassign, Arg: lead})
	if re.Task.Assignee != lead {
		t.Fatalf("reassigned = %+v", re.Task)
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
	if len(feed.Items) != 2 || feed.NextBefore == "" || feed.Items[0].FeedID <= feed.Items[1].FeedID {
		t.Fatalf("feed page = %+v", feed)
	}
	older := teamCall[protocol.TeamFeedData](t, c, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed), GoalID: g.GoalID, Before: feed.NextBefore})
	if len(older.Items) == 0 || older.Items[0].FeedID >= feed.NextBefore {
		t.Fatalf("the next page = %+v", older)
	}
	all := teamCall[protocol.TeamFeedData](t, c, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed), GoalID: g.GoalID, Limit: 200})
	found := false
	for _, it := range all.Items {
		found = found || it.FeedID == msg.Item.FeedID
	}
	if !found {
		t.Fatalf("the message is not in the goal's feed: %+v", all)
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
	// The next goal of the repository has the same lead.
	next := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "more", Cwd: repo}).Goal
	if next.LeadAgentID != lead {
		t.Fatalf("next goal's lead = %s, want the last goal's %s", next.LeadAgentID, lead)
	}
}

// allowPermissions attaches a client to the lead as an interactive one and
// allows every permission request that reaches it (the workers' requests
// delegate up to the lead, docs/protocol.md §6.3) until the test ends.
// Errors go to the returned channel, read by the test at its end.
func allowPermissions(t *testing.T, h *harness, lead string) <-chan error {
	t.Helper()
	p := h.dial()
	attach(t, p, lead, "")
	errs := make(chan error, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range p.Events() {
			req, ok := e.Msg.(*protocol.PermissionRequest)
			if !ok {
				continue
			}
			if err := p.Send(permResponse(req.AgentID, req.RequestID, protocol.DecisionAllow, "")); err != nil {
				errs <- err
				return
			}
		}
	}()
	t.Cleanup(func() { p.Close(); <-done })
	return errs
}

func answer(t *testing.T, c *client.Conn, id, option, text string) protocol.TeamDecision {
	t.Helper()
	return teamCall[protocol.TeamDecisionData](t, c, &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer),
		DecisionID: id, Option: option, Text: text}).Decision
}

func writeTool(path, content string) string {
	return `sim: tool write {"path":"` + path + `","content":"` + content + `"}`
}

// TestTeamGoalRunsToDone: a goal of three tasks, two in parallel and one
// after both, goes from submission to done over the wire: each worker
// edits a file in its own worktree, its changes are committed there and
// CI runs; a merge decision answered "Request changes" sends the feedback
// to the same worker on the same branch and comes back; merges answered
// from two clients land every file in the main checkout; every worktree is
// retired; the dependent task starts after both merges; the goal ends done
// with its progress at 1; no task prompt appears in what clients see.
func TestTeamGoalRunsToDone(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, func(cfg *config.Config) { cfg.Team.CICommand = "test -f a.txt || test -f b.txt; echo ci-ran" })
	c := h.dial()
	c2 := h.dial()

	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "three files", Cwd: repo}).Goal
	lead := waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.LeadAgentID != ""
	}).Goal.LeadAgentID
	errs := allowPermissions(t, h, lead)

	ts := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "file a", Prompt: "sim: say " + privateMarker + "\n" + writeTool("a.txt", "A1")},
			{Title: "file b", Prompt: "sim: say " + privateMarker + "\n" + writeTool("b.txt", "B")},
			{Title: "file c", Prompt: writeTool("c.txt", "C"), After: []int{1, 2}},
		}}).Tasks
	a, b, cc := ts[0], ts[1], ts[2]

	// Both parallel tasks reach review, each with a merge decision.
	da := mergeOf(t, c, g.GoalID, a.TaskID)
	if len(da.Options) != 3 || da.Options[0] != protocol.OptionMerge || da.Options[1] != protocol.OptionRequestChanges || da.Options[2] != protocol.OptionReject {
		t.Fatalf("merge decision = %+v", da)
	}
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	ta := show.Tasks[0]
	if ta.State != protocol.TaskReview || ta.Branch == "" || ta.Worktree == "" || ta.WorkspaceID == "" || ta.Assignee == "" || ta.RunID == "" ||
		ta.Diff == nil || ta.Diff.Files != 1 || ta.Diff.Ahead != 1 || ta.CI.Status != protocol.CIPass || ta.CI.Summary != "ci-ran" {
		t.Fatalf("task a in review = %+v (diff %+v)", ta, ta.Diff)
	}
	if show.Tasks[2].State != protocol.TaskTodo {
		t.Fatalf("the dependent task = %+v, want todo", show.Tasks[2])
	}
	// The worker's change is committed on its branch, not in the main checkout.
	if got := runGit(t, ta.Worktree, "log", "-1", "--format=%s"); got != "file a" {
		t.Fatalf("worktree head = %q, want the task's title", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a.txt in the main checkout before the merge: %v", err)
	}

	// Request changes: the same worker, same branch, back to review.
	re := answer(t, c, da.DecisionID, protocol.OptionRequestChanges, writeTool("a.txt", "A2"))
	if re.State != protocol.DecisionAnswered || re.Answer.Option != protocol.OptionRequestChanges {
		t.Fatalf("request changes answer = %+v", re)
	}
	if _, err := c.Request(ctx(t), &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer), DecisionID: da.DecisionID, Option: protocol.OptionMerge}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("a second answer: %v, want CONFLICT", err)
	}
	da2 := mergeOf(t, c, g.GoalID, a.TaskID)
	if da2.DecisionID == da.DecisionID {
		t.Fatal("no new merge decision after the changes")
	}
	show = teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if t2 := show.Tasks[0]; t2.Assignee != ta.Assignee || t2.Branch != ta.Branch || t2.Diff == nil || t2.Diff.Ahead != 2 {
		t.Fatalf("task a after the changes = %+v, want the same worker and branch, two commits ahead", t2)
	}
	if _, err := c.Request(ctx(t), &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer), DecisionID: da2.DecisionID, Option: "Ship it"}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("an option not offered: %v, want INVALID_REQUEST", err)
	}

	// Merges from two clients.
	if m := answer(t, c, da2.DecisionID, protocol.OptionMerge, ""); m.State != protocol.DecisionAnswered {
		t.Fatalf("merge a = %+v", m)
	}
	db := mergeOf(t, c2, g.GoalID, b.TaskID)
	if m := answer(t, c2, db.DecisionID, protocol.OptionMerge, ""); m.State != protocol.DecisionAnswered {
		t.Fatalf("merge b = %+v", m)
	}
	// The dependent task starts after both merges, on a branch holding them.
	dc := mergeOf(t, c, g.GoalID, cc.TaskID)
	answer(t, c, dc.DecisionID, protocol.OptionMerge, "")
	done := waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.Status == protocol.GoalDone
	}).Goal
	if done.Progress != 1 || done.EndedAt == 0 {
		t.Fatalf("goal done = %+v", done)
	}
	for path, want := range map[string]string{"a.txt": "A2", "b.txt": "B", "c.txt": "C"} {
		if got, err := os.ReadFile(filepath.Join(repo, path)); err != nil || string(got) != want {
			t.Fatalf("main checkout %s = %q, %v; want %q", path, got, err, want)
		}
	}
	var wl protocol.WorkspaceListData
	if err := c.Call(ctx(t), &protocol.WorkspaceList{Header: hdr(protocol.TypeWorkspaceList)}, &wl); err != nil || len(wl.Workspaces) != 0 {
		t.Fatalf("workspaces not retired: %+v, %v", wl.Workspaces, err)
	}
	show = teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	for _, task := range show.Tasks {
		if task.State != protocol.TaskDone || branchExists(t, repo, task.Branch) {
			t.Fatalf("task = %+v (branch left: %v)", task, branchExists(t, repo, task.Branch))
		}
	}
	// The workers' permissions, answered by the test's client of the lead
	// first, are decisions answered with that answer.
	perms := 0
	for _, d := range show.Decisions {
		if d.Kind == protocol.DecisionKindPermission {
			perms++
			if d.State != protocol.DecisionAnswered || d.Answer.Option != protocol.OptionAllowOnce || d.Answer.By == "user" {
				t.Fatalf("permission decision = %+v (answer %+v)", d, d.Answer)
			}
		}
	}
	if perms != 4 {
		t.Fatalf("%d permission decisions, want 4 (one per run)", perms)
	}
	feed := teamCall[protocol.TeamFeedData](t, c, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed), GoalID: g.GoalID, Limit: 200})
	kinds := map[string]int{}
	for _, it := range feed.Items {
		kinds[it.Kind]++
	}
	if kinds[protocol.FeedMerge] != 3 || kinds[protocol.FeedCI] != 4 || kinds[protocol.FeedDecision] < 4 || kinds[protocol.FeedGoal] < 2 {
		t.Fatalf("feed kinds = %v", kinds)
	}
	select {
	case err := <-errs:
		t.Fatalf("answering permissions: %v", err)
	default:
	}
	raw, _ := json.Marshal(feed)
	if bytes.Contains(raw, []byte(privateMarker)) {
		t.Fatalf("a task's prompt is in the feed: %s", raw)
	}
}

// TestTeamRestartBlocksInterruptedTaskAndRetryCompletesIt: a daemon
// stopped while a worker runs comes back with the board intact: the task
// whose run the restart interrupted is blocked "interrupted by a daemon
// restart", never replayed by itself; retry runs it again (the same
// worker, in its workspace) through review to done.
func TestTeamRestartBlocksInterruptedTaskAndRetryCompletesIt(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "one file", Cwd: repo}).Goal
	lead := waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.LeadAgentID != ""
	}).Goal.LeadAgentID
	// An interactive client of the lead that answers nothing: the worker
	// waits on its permission, mid-run.
	holder := h.dial()
	attach(t, holder, lead, "")
	task := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "file r", Prompt: writeTool("r.txt", "R")}}}).Tasks[0]
	waitFor(t, holder, isType(protocol.TypePermissionRequest, ""))
	asked := decisionOf(t, c, g.GoalID, protocol.DecisionKindPermission, task.TaskID)
	doing := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID}).Tasks[0]
	if doing.State != protocol.TaskDoing || doing.RunID == "" {
		t.Fatalf("task mid-run = %+v", doing)
	}
	h.d.Shutdown(true) // the run is cut short: on disk it is still active

	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	blocked := teamCall[protocol.TeamGoalShowData](t, c2, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID}).Tasks[0]
	if blocked.State != protocol.TaskBlocked {
		blocked = waitTeam(t, c2, protocol.TypeTeamTaskChanged, func(e protocol.TeamTaskChanged) bool {
			return e.Task.TaskID == task.TaskID && e.Task.State == protocol.TaskBlocked
		}).Task
	}
	if blocked.BlockedReason != "interrupted by a daemon restart" || blocked.Assignee != doing.Assignee || blocked.WorkspaceID != doing.WorkspaceID {
		t.Fatalf("task after the restart = %+v", blocked)
	}
	if pids := runtimePIDs(t, doing.Assignee); len(pids) != 0 {
		t.Fatalf("the interrupted worker was replayed: %v", pids)
	}
	after := teamCall[protocol.TeamGoalShowData](t, c2, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if goal := after.Goal; goal.Status != protocol.GoalActive || goal.LeadAgentID != lead {
		t.Fatalf("goal after the restart = %+v", goal)
	}
	// The permission's request died with the runtime: its decision is
	// cancelled, not left open.
	if len(after.Decisions) != 1 || after.Decisions[0].DecisionID != asked.DecisionID || after.Decisions[0].State != protocol.DecisionCancelled {
		t.Fatalf("decisions after the restart = %+v", after.Decisions)
	}

	allowPermissions(t, h2, lead)
	retried := teamCall[protocol.TeamTaskData](t, c2, &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction), TaskID: task.TaskID, Action: protocol.TaskActionRetry}).Task
	if retried.State != protocol.TaskTodo && retried.State != protocol.TaskDoing {
		t.Fatalf("retried = %+v", retried)
	}
	d := mergeOf(t, c2, g.GoalID, task.TaskID)
	again := teamCall[protocol.TeamGoalShowData](t, c2, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID}).Tasks[0]
	if again.Assignee != doing.Assignee || again.WorkspaceID != doing.WorkspaceID || again.RunID == doing.RunID {
		t.Fatalf("retried task = %+v, want the same worker and workspace, a new run", again)
	}
	answer(t, c2, d.DecisionID, protocol.OptionMerge, "")
	waitTeam(t, c2, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.Status == protocol.GoalDone
	})
	if got, err := os.ReadFile(filepath.Join(repo, "r.txt")); err != nil || string(got) != "R" {
		t.Fatalf("main checkout r.txt = %q, %v", got, err)
	}
}

// openDecision waits for an open decision of kind for task id.
func openDecision(t *testing.T, c *client.Conn, kind, taskID string) protocol.TeamDecision {
	t.Helper()
	return waitTeam(t, c, protocol.TypeTeamDecisionChanged, func(e protocol.TeamDecisionChanged) bool {
		return e.Decision.TaskID == taskID && e.Decision.Kind == kind && e.Decision.State == protocol.DecisionOpen
	}).Decision
}

// TestTeamRequestsBecomeDecisions: the daemon attends each lead as an
// interactive client, so a worker's permission request (delegated to the
// lead) and its question become decisions of the goal, naming the worker
// and its task with the spec's options; answering a decision answers the
// request (by label or by index), first answer wins, and the worker goes
// on to review.
func TestTeamRequestsBecomeDecisions(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "ask", Cwd: repo}).Goal
	ts := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "write", Prompt: writeTool("p.txt", "P")},
			{Title: "ask", Prompt: "sim: ask select Colour red blue"},
		}}).Tasks

	perm := decisionOf(t, c, g.GoalID, protocol.DecisionKindPermission, ts[0].TaskID)
	want := []string{protocol.OptionAllowOnce, protocol.OptionAlwaysAllow, protocol.OptionDeny}
	if perm.Tool != "write" || perm.RequestID == "" || perm.AgentID == "" || perm.Context != "p.txt" || len(perm.Options) != 3 ||
		perm.Options[0] != want[0] || perm.Options[1] != want[1] || perm.Options[2] != want[2] {
		t.Fatalf("permission decision = %+v", perm)
	}
	zero := 0
	got := teamCall[protocol.TeamDecisionData](t, c, &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer),
		DecisionID: perm.DecisionID, Index: &zero}).Decision
	if got.State != protocol.DecisionAnswered || got.Answer.Option != protocol.OptionAllowOnce || got.Answer.By != "user" {
		t.Fatalf("answered permission = %+v (by %q, want the person's answer)", got, got.Answer.By)
	}
	if _, err := c.Request(ctx(t), &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer), DecisionID: perm.DecisionID, Option: protocol.OptionDeny}); protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("second answer: %v, want CONFLICT", err)
	}

	q := decisionOf(t, c, g.GoalID, protocol.DecisionKindQuestion, ts[1].TaskID)
	if q.Question != "Colour" || len(q.Options) != 2 || q.Options[1] != "blue" {
		t.Fatalf("question decision = %+v", q)
	}
	if a := answer(t, c, q.DecisionID, "blue", ""); a.State != protocol.DecisionAnswered || a.Answer.Option != "blue" {
		t.Fatalf("answered question = %+v", a)
	}

	// Both workers finish: their tasks reach review.
	mergeOf(t, c, g.GoalID, ts[0].TaskID)
	mergeOf(t, c, g.GoalID, ts[1].TaskID)
	if b, err := os.ReadFile(filepath.Join(taskOf(t, c, g.GoalID, ts[0].TaskID).Worktree, "p.txt")); err != nil || string(b) != "P" {
		t.Fatalf("the allowed write: %q, %v", b, err)
	}
}

// mergeOf returns the open merge decision of task id: from the board when
// it is there already, else the event that opens it.
func mergeOf(t *testing.T, c *client.Conn, goalID, taskID string) protocol.TeamDecision {
	t.Helper()
	return decisionOf(t, c, goalID, protocol.DecisionKindMerge, taskID)
}

// decisionOf returns the open decision of kind of task id: from the board
// when it is there already (its event may have gone by while the test
// waited for another), else the event that opens it.
func decisionOf(t *testing.T, c *client.Conn, goalID, kind, taskID string) protocol.TeamDecision {
	t.Helper()
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: goalID})
	for _, d := range show.Decisions {
		if d.TaskID == taskID && d.Kind == kind && d.State == protocol.DecisionOpen {
			return d
		}
	}
	return openDecision(t, c, kind, taskID)
}

func taskOf(t *testing.T, c *client.Conn, goalID, taskID string) protocol.TeamTask {
	t.Helper()
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: goalID})
	for _, task := range show.Tasks {
		if task.TaskID == taskID {
			return task
		}
	}
	t.Fatalf("no task %s", taskID)
	return protocol.TeamTask{}
}

// TestTeamMergeRefusedThenRejectAndCancel: a merge the main checkout
// refuses (it is dirty) leaves the decision open again with the reason,
// and the task in review; answered again once the checkout is clean, it
// merges. Reject abandons a task's branch (its workspace retired, the
// branch deleted): the task is cancelled and the task after it blocked, so
// the goal is not done; cancelling the goal cancels what is left.
func TestTeamMergeRefusedThenRejectAndCancel(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "x y z", Cwd: repo}).Goal
	lead := waitTeam(t, c, protocol.TypeTeamGoalChanged, func(e protocol.TeamGoalChanged) bool {
		return e.Goal.GoalID == g.GoalID && e.Goal.LeadAgentID != ""
	}).Goal.LeadAgentID
	allowPermissions(t, h, lead)
	ts := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "x", Prompt: writeTool("x.txt", "X")},
			{Title: "y", Prompt: writeTool("y.txt", "Y")},
			{Title: "z", Prompt: writeTool("z.txt", "Z"), After: []int{2}},
		}}).Tasks
	x, y, z := ts[0], ts[1], ts[2]

	dx := mergeOf(t, c, g.GoalID, x.TaskID)
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("local edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := answer(t, c, dx.DecisionID, protocol.OptionMerge, "")
	if refused.State != protocol.DecisionOpen || refused.Answer != nil || !strings.Contains(refused.RefusedReason, string(protocol.RefusalMainDirty)) {
		t.Fatalf("refused merge = %+v", refused)
	}
	if task := taskOf(t, c, g.GoalID, x.TaskID); task.State != protocol.TaskReview {
		t.Fatalf("task after a refused merge = %+v", task)
	}
	runGit(t, repo, "checkout", "--", "README")
	if m := answer(t, c, dx.DecisionID, protocol.OptionMerge, ""); m.State != protocol.DecisionAnswered || m.RefusedReason == "" {
		t.Fatalf("merge after the refusal = %+v", m)
	}
	if task := taskOf(t, c, g.GoalID, x.TaskID); task.State != protocol.TaskDone {
		t.Fatalf("merged task = %+v", task)
	}

	dy := mergeOf(t, c, g.GoalID, y.TaskID)
	ty := taskOf(t, c, g.GoalID, y.TaskID)
	answer(t, c, dy.DecisionID, protocol.OptionReject, "")
	if task := taskOf(t, c, g.GoalID, y.TaskID); task.State != protocol.TaskCancelled {
		t.Fatalf("rejected task = %+v", task)
	}
	if branchExists(t, repo, ty.Branch) {
		t.Fatalf("the rejected branch %s is still there", ty.Branch)
	}
	if ws := wsStatus(t, c, ty.WorkspaceID); ws.State != protocol.WorkspaceStateRetired {
		t.Fatalf("the rejected workspace = %+v", ws)
	}
	tz := taskOf(t, c, g.GoalID, z.TaskID)
	if tz.State != protocol.TaskBlocked || !strings.Contains(tz.BlockedReason, `"y"`) {
		t.Fatalf("the task after the rejected one = %+v", tz)
	}
	show := teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID})
	if show.Goal.Status != protocol.GoalActive || show.Goal.Progress != 0.5 {
		t.Fatalf("goal with a blocked task = %+v", show.Goal)
	}
	if _, err := os.Stat(filepath.Join(repo, "y.txt")); !os.IsNotExist(err) {
		t.Fatalf("the rejected change reached the main checkout: %v", err)
	}
	cancelled := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalCancel{Header: teamHdr(protocol.TypeTeamGoalCancel), GoalID: g.GoalID}).Goal
	if cancelled.Status != protocol.GoalCancelled {
		t.Fatalf("cancelled goal = %+v", cancelled)
	}
	if task := taskOf(t, c, g.GoalID, z.TaskID); task.State != protocol.TaskCancelled {
		t.Fatalf("blocked task after the goal's cancel = %+v", task)
	}
	if task := taskOf(t, c, g.GoalID, x.TaskID); task.State != protocol.TaskDone {
		t.Fatalf("done task after the goal's cancel = %+v", task)
	}
}

// TestTeamCancelStopsTheRun: cancelling a doing task stops its worker's
// run (subagent.stop): the run ends cancelled and the task stays
// cancelled, not blocked; a retry runs it again.
func TestTeamCancelStopsTheRun(t *testing.T) {
	repo := gitRepo(t)
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "slow", Cwd: repo}).Goal
	task := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		Tasks: []protocol.TeamTaskSpec{{Title: "slow", Prompt: "sim: sleep 30000"}}}).Tasks[0]
	doing := waitTeam(t, c, protocol.TypeTeamTaskChanged, func(e protocol.TeamTaskChanged) bool {
		return e.Task.TaskID == task.TaskID && e.Task.State == protocol.TaskDoing
	}).Task
	if doing.JobID == "" || doing.RunID == "" || doing.Assignee == "" || doing.WorkspaceID == "" || doing.Branch == "" || doing.Worktree == "" {
		t.Fatalf("doing task = %+v, want its job, run, worker, workspace, branch and worktree", doing)
	}
	got := teamCall[protocol.TeamTaskData](t, c, &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction), TaskID: task.TaskID, Action: protocol.TaskActionCancel}).Task
	if got.State != protocol.TaskCancelled {
		t.Fatalf("cancelled task = %+v", got)
	}
	var job protocol.OpJob
	if err := c.Call(ctx(t), &protocol.JobsShow{Header: hdr(protocol.TypeJobsShow), Handle: doing.RunID}, &job); err != nil {
		t.Fatal(err)
	}
	if st := job.Runs[0].State; st != protocol.RunCancelled {
		t.Fatalf("the cancelled task's run = %s, want cancelled", st)
	}
	if task := taskOf(t, c, g.GoalID, task.TaskID); task.State != protocol.TaskCancelled {
		t.Fatalf("task after its run ended = %+v", task)
	}
	retried := teamCall[protocol.TeamTaskData](t, c, &protocol.TeamTaskAction{Header: teamHdr(protocol.TypeTeamTaskAction), TaskID: task.TaskID, Action: protocol.TaskActionRetry}).Task
	if retried.State != protocol.TaskTodo && retried.State != protocol.TaskDoing {
		t.Fatalf("retried = %+v", retried)
	}
	waitTeam(t, c, protocol.TypeTeamTaskChanged, func(e protocol.TeamTaskChanged) bool {
		return e.Task.TaskID == task.TaskID && e.Task.State == protocol.TaskDoing && e.Task.RunID != doing.RunID
	})
}
