//go:build linux

package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

// wire connects a Go client to the daemon's socket: another client than
// the page (shardctl, a second browser would be the same), closed when the
// test ends; its events are drained.
func (d *daemon) wire() *client.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.sd.Socket())
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	go func() {
		for range c.Events() {
		}
	}()
	return c
}

// call sends a command over the wire and decodes its answer into a T.
func call[T any](t *testing.T, c *client.Conn, msg protocol.Typed) T {
	t.Helper()
	var out T
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := c.Call(ctx, msg, &out); err != nil {
		t.Fatalf("%s: %v", msg.Head().Type, err)
	}
	return out
}

// notifySpy stands in for the browser's Notification once the person
// granted it (headless Chromium shows none): window.__notified lists what
// the page raised.
const notifySpy = `(() => { window.__notified = []; window.Notification = class {
	static permission = "granted"; static requestPermission() { return Promise.resolve("granted"); }
	constructor(title, o) { window.__notified.push([title, o.body, o.tag]); } }; return true; })()`

// cardIn names the page's card of a task: which column holds it.
func cardIn(col, task string) string {
	return fmt.Sprintf(`!!document.querySelector('[data-col=%q] [data-task=%q]')`, col, task)
}

// openMerge names the open merge decision of a task on the page.
func openMerge(task string) string {
	return fmt.Sprintf(`document.querySelector('#team-decisions .decision[data-kind="merge"][data-task=%q]')`, task)
}

// TestDashboardTeamBoard drives a team from the page against the real
// daemon: the page submits a goal for a real repository; the tasks the
// test creates over the wire (two in parallel, a third after both) appear
// in their columns with their "after" chips and arrows and move live as
// their workers run; a merge decision shows its task's diff and is
// answered from the page "Request changes" with feedback, then Merge, which
// lands the change in the main checkout; a merge another client answers
// disappears from the page live; each new decision raises a browser
// notification (asked for from a button) and the navigation's badge counts
// them on every view; the lead runs on the model the form picked; the
// keys reach the goal and the decisions.
func TestDashboardTeamBoard(t *testing.T) {
	b := newBrowser(t)
	d := startDaemonWith(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0, "--team.ci-command", "test -f version.txt || test -f flag.txt || test -f docs.txt")
	p := b.newPage("owner")
	p.enroll(d)
	p.run("1440 px", chromedp.EmulateViewport(1440, 900))
	repo := newRepo(t)
	w := d.wire()

	p.clickWhen("team view", `document.querySelector("#view-team")`)
	p.until("the goal form", `!!document.querySelector("#team-goal-form")`)
	// The page never asks for notifications by itself: a button does. The
	// person allows them (the browser's permission, granted here through
	// DevTools as a click on the browser's prompt would).
	p.until("asked only from a button", `!!document.querySelector("#team-notify") && Notification.permission === "default"`)
	p.run("grant notifications", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted,
			Origin: d.url(), BrowserContextID: chromedp.FromContext(ctx).BrowserContextID})
		return err
	}))
	p.clickWhen("notify me", `document.querySelector("#team-notify")`)
	p.until("notifications on", `document.querySelector("#team-notify-state")?.textContent === "notifications on"`)
	p.until("spy", notifySpy)
	// The lead runs on the model picked from the daemon's catalog.
	p.until("pick sim-think", `(sel => !!sel && sel.tagName === "SELECT" && (o => !!o && (sel.value = o.value, sel.dispatchEvent(new Event("change", {bubbles: true})), true))(
		[...sel.options].find(o => o.value.endsWith("sim-think"))))(document.querySelector("#team-goal-model"))`)
	p.run("submit a goal", chromedp.SendKeys(chromedp.CSS("#team-goal-text"), "Add a version flag, in three tasks."),
		chromedp.SendKeys(chromedp.CSS("#team-goal-cwd"), repo), chromedp.SendKeys(chromedp.CSS("#team-goal-limit"), "5"),
		chromedp.Click(chromedp.CSS("#team-goal-go")))
	p.until("the goal on its board, its cost against its limit", `!!document.querySelector("#team-board")?.dataset.goal && / \/ \$5\.00$/.test(document.querySelector("#team-goal-cost")?.textContent)`)
	goalID := eval[string](p, `document.querySelector("#team-board").dataset.goal`)
	goals := call[protocol.TeamGoalListData](t, w, &protocol.TeamGoalList{Header: protocol.Header{Type: protocol.TypeTeamGoalList}})
	if len(goals.Goals) != 1 || goals.Goals[0].GoalID != goalID || goals.Goals[0].Cwd != repo || goals.Goals[0].CostLimitUSD == nil || *goals.Goals[0].CostLimitUSD != 5 {
		t.Fatalf("goals after the page's submit: %+v", goals.Goals)
	}

	write := func(name, text string) string {
		return fmt.Sprintf(`sim: tool write {"path":%q,"content":%q}`+"\nsim: say wrote %s", name, text, name)
	}
	created := call[protocol.TeamTasksData](t, w, &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, GoalID: goalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "version constant", Prompt: write("version.txt", "1.0\n")},
			{Title: "flag", Prompt: write("flag.txt", "--version\n")},
			{Title: "docs", Prompt: write("docs.txt", "prints the version\n"), After: []int{1, 2}},
		}})
	if len(created.Tasks) != 3 {
		t.Fatalf("tasks created: %+v", created.Tasks)
	}
	t1, t2, t3 := created.Tasks[0].TaskID, created.Tasks[1].TaskID, created.Tasks[2].TaskID
	lead := call[protocol.TeamGoalShowData](t, w, &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}, GoalID: goalID}).Goal.LeadAgentID
	st := call[protocol.AgentListData](t, w, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: lead}})
	if len(st.Agents) != 1 || st.Agents[0].Model != "sim-think" {
		t.Fatalf("the lead (%s) after the page's goal with sim-think: %+v", lead, st.Agents)
	}
	p.until("three cards", fmt.Sprintf(`[%q, %q, %q].every(id => !!document.querySelector('#team-board [data-task="' + id + '"]'))`, t1, t2, t3))
	p.until("the third waits on both: chips and arrows", fmt.Sprintf(`document.querySelector('[data-task=%q] .after')?.textContent === "after: #1, #2"
		&& [...document.querySelectorAll("svg.deps path.dep")].map(e => e.dataset.from + ">" + e.dataset.to).sort().join() === [%q, %q].sort().join()`,
		t3, t1+">"+t3, t2+">"+t3))
	p.until("the third in todo", cardIn("todo", t3))

	// Each worker's write asks permission: the request reaches the lead,
	// which the daemon attends, so it is a permission decision in the
	// queue with the three options in order. The page allows each worker
	// for good.
	for i := 0; i < 2; i++ {
		p.until("a permission decision", `[...document.querySelectorAll('#team-decisions .decision[data-kind="permission"]')].some(d =>
			[...d.querySelectorAll("button.option")].map(b => b.textContent).join("|") === "Allow once|Always allow for this agent|Deny")`)
		p.clickWhen("allow the worker", `document.querySelector('#team-decisions .decision[data-kind="permission"] button[data-option="Always allow for this agent"]:not([disabled])')`)
	}

	// The two parallel tasks run and reach review, each with a merge
	// decision showing its diff; the badge counts them on every view.
	p.until("both in review", cardIn("review", t1)+" && "+cardIn("review", t2))
	p.until("two merge decisions with their diffs", fmt.Sprintf(`[%s, %s].every(d => !!d && d.querySelectorAll(".dl.add").length > 0)`, openMerge(t1), openMerge(t2)))
	p.until("their files in the diffs", `(t => t.includes("version.txt") && t.includes("flag.txt"))(document.querySelector("#team-decisions").textContent)`)
	p.until("badge 2", `document.querySelector("#team-badge")?.textContent === "2"`)
	p.screenshot("web-team")
	// Keys: d focuses the oldest decision's first option, v switches the
	// view (the badge stays on every view), n focuses the goal's text.
	p.until("nothing focused", `(document.activeElement?.blur(), true)`)
	p.run("d", chromedp.KeyEvent("d"))
	p.until("the oldest decision focused", `document.activeElement?.dataset.option === "Merge" && document.activeElement.closest(".decision") === document.querySelector("#team-decisions .decision")`)
	p.run("v", chromedp.KeyEvent("v"))
	p.until("the badge on the agents view", `!document.querySelector("#team-view") && document.querySelector("#team-badge")?.textContent === "2"`)
	p.clickWhen("team view again", `document.querySelector("#view-team")`)
	p.until("nothing focused", `(document.activeElement?.blur(), true)`)
	p.run("n", chromedp.KeyEvent("n"))
	p.until("the goal's text focused", `document.activeElement?.id === "team-goal-text"`)
	p.run("leave it", chromedp.KeyEvent(kb.Escape))
	p.until("notified of both", `window.__notified.filter(n => n[0] === "Shard: a decision waits (merge)").length >= 2`)

	// The first is sent back with feedback: the worker runs again on its
	// branch and comes back to review with a new merge decision.
	first := eval[string](p, openMerge(t1)+`.dataset.decision`)
	p.run("request changes", chromedp.SendKeys(chromedp.CSS(`[data-decision="`+first+`"] textarea`), "sim: say changes done"),
		chromedp.Click(chromedp.CSS(`[data-decision="`+first+`"] button[data-option="Request changes"]`)))
	p.until("the first decision closed", `!document.querySelector('[data-decision="`+first+`"]')`)
	if n := eval[int](p, `document.querySelectorAll('[data-closed-decision="`+first+`"]').length`); n != 0 {
		t.Fatalf("the page's own answer left %d notes", n)
	}
	decs := call[protocol.TeamDecisionListData](t, w, &protocol.TeamDecisionList{Header: protocol.Header{Type: protocol.TypeTeamDecisionList}, GoalID: goalID})
	var answered *protocol.TeamDecision
	for i := range decs.Decisions {
		if decs.Decisions[i].DecisionID == first {
			answered = &decs.Decisions[i]
		}
	}
	if answered == nil || answered.State != protocol.DecisionAnswered || answered.Answer == nil || answered.Answer.Option != protocol.OptionRequestChanges || answered.Answer.Text != "sim: say changes done" {
		t.Fatalf("the page's Request changes, as the daemon has it: %+v", answered)
	}

	// Another client merges the second: it leaves the page live.
	second := eval[string](p, openMerge(t2)+`.dataset.decision`)
	call[protocol.TeamDecisionData](t, w, &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, DecisionID: second, Option: protocol.OptionMerge})
	p.until("the second gone, with a note", `!document.querySelector('[data-decision="`+second+`"]') && !!document.querySelector('[data-closed-decision="`+second+`"]')`)
	p.until("the second done", cardIn("done", t2))

	// The first is back in review with a new decision: merged from the page.
	p.until("the first back with a new decision", `(d => !!d && d.dataset.decision !== "`+first+`")(`+openMerge(t1)+`)`)
	again := eval[string](p, openMerge(t1)+`.dataset.decision`)
	p.clickWhen("merge", `document.querySelector('[data-decision="`+again+`"] button[data-option="Merge"]:not([disabled])')`)
	p.until("the first done", cardIn("done", t1))
	for _, f := range []string{"version.txt", "flag.txt"} {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			t.Fatalf("the main checkout after the merges: %v", err)
		}
	}

	// The third starts once both are done; merged from the page, the goal
	// is done.
	p.clickWhen("allow the third's worker once", `document.querySelector('#team-decisions .decision[data-kind="permission"] button[data-option="Allow once"]:not([disabled])')`)
	p.until("the third in review", cardIn("review", t3)+" && !!"+openMerge(t3))
	third := eval[string](p, openMerge(t3)+`.dataset.decision`)
	p.clickWhen("merge the third", `document.querySelector('[data-decision="`+third+`"] button[data-option="Merge"]:not([disabled])')`)
	p.until("the goal done", cardIn("done", t3)+fmt.Sprintf(` && document.querySelector('[data-goal=%q]')?.dataset.status === "done" && !document.querySelector("#team-badge")`, goalID))
	if _, err := os.Stat(filepath.Join(repo, "docs.txt")); err != nil {
		t.Fatalf("the main checkout after the third merge: %v", err)
	}
	// Every task's worktree is retired with its merge.
	wss := call[protocol.WorkspaceListData](t, w, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}, IncludeRetired: true})
	retired := 0
	for _, ws := range wss.Workspaces {
		if ws.State != protocol.WorkspaceStateRetired {
			t.Errorf("workspace %s (%s) is %s after the goal", ws.WorkspaceID, ws.Branch, ws.State)
		}
		retired++
	}
	if retired != 3 {
		t.Errorf("%d workspaces after the goal, want the three tasks' retired", retired)
	}
	p.until("the feed followed", `document.querySelectorAll("#team-feed .feed-item").length > 0`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardTeamActionsMemoryAndRefusal: the board's card actions, the
// memory panel and a refused merge, from the page against the real daemon
// (one worker at a time). Prioritize puts a waiting task before an older
// one, and it is the next to start once the running task is cancelled;
// Reassign gives a waiting task to another agent;
// the cancelled card hides until "Show cancelled", and Retry puts it back
// on the board. A merge the dirty main checkout refuses stays open with its
// reason, and merges once the checkout is clean. Notes are added, edited
// and deleted from the page, and a note another client writes shows live;
// a message to the lead is in the feed; the goal is cancelled from the page.
func TestDashboardTeamActionsMemoryAndRefusal(t *testing.T) {
	b := newBrowser(t)
	d := startDaemonWith(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0, "--team.max-workers", "1")
	p := b.newPage("owner")
	p.enroll(d)
	p.run("1440 px", chromedp.EmulateViewport(1440, 900))
	repo := newRepo(t)
	w := d.wire()

	goal := call[protocol.TeamGoalData](t, w, &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: "slow, x and y", Cwd: repo}).Goal
	created := call[protocol.TeamTasksData](t, w, &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, GoalID: goal.GoalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "slow", Prompt: "sim: sleep 30000"},
			{Title: "x", Prompt: `sim: tool write {"path":"x.txt","content":"X"}`},
			{Title: "y", Prompt: `sim: tool write {"path":"y.txt","content":"Y"}`},
		}}).Tasks
	slow, x, y := created[0].TaskID, created[1].TaskID, created[2].TaskID
	p.run("the goal's board", chromedp.Navigate(d.url()+"/#team="+goal.GoalID))
	p.online()
	p.until("slow doing, x and y waiting", cardIn("doing", slow)+" && "+cardIn("todo", x)+" && "+cardIn("todo", y))

	// Prioritize y: it goes before x in its column, and the daemon has it.
	p.clickWhen("prioritize y", fmt.Sprintf(`document.querySelector('[data-task=%q] .t-prio')`, y))
	p.until("y first in todo", fmt.Sprintf(`[...document.querySelectorAll('[data-col="todo"] .card')].map(e => e.dataset.task).join() === [%q, %q].join()`, y, x))
	show := call[protocol.TeamGoalShowData](t, w, &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}, GoalID: goal.GoalID})
	if show.Tasks[2].Priority <= show.Tasks[1].Priority {
		t.Fatalf("priorities after the page's prioritize: x %d, y %d", show.Tasks[1].Priority, show.Tasks[2].Priority)
	}

	// Reassign x to the lead (any agent the page knows).
	lead := show.Goal.LeadAgentID
	if lead == "" {
		t.Fatalf("the goal has no lead: %+v", show.Goal)
	}
	p.clickWhen("reassign x", fmt.Sprintf(`document.querySelector('[data-task=%q] .t-reassign')`, x))
	p.until("pick the lead", fmt.Sprintf(`(sel => !!sel && [...sel.options].some(o => o.value === %q) && (sel.value = %q, sel.dispatchEvent(new Event("change", {bubbles: true})), true))(document.querySelector('[data-task=%q] .reassign select'))`,
		lead, lead, x))
	p.clickWhen("reassign", fmt.Sprintf(`document.querySelector('[data-task=%q] .reassign button[type=submit]:not([disabled])')`, x))
	p.until("x assigned to the lead", fmt.Sprintf(`document.querySelector('[data-task=%q] .assignee')?.getAttribute("href") === "#agent=%s" && !document.querySelector('[data-task=%q] .reassign')`, x, lead, x))

	// Cancel the running task: y starts next; the cancelled card shows on
	// request, and Retry puts it back.
	p.clickWhen("cancel slow", fmt.Sprintf(`document.querySelector('[data-task=%q] .t-cancel')`, slow))
	p.until("slow hidden, y doing", fmt.Sprintf(`!document.querySelector('#team-board [data-task=%q]')`, slow)+" && "+cardIn("doing", y)+" && "+cardIn("todo", x))
	p.clickWhen("show cancelled", `document.querySelector("#team-show-cancelled")`)
	p.until("slow cancelled", cardIn("cancelled", slow))
	p.clickWhen("retry slow", fmt.Sprintf(`document.querySelector('[data-task=%q] .t-retry')`, slow))
	p.until("slow back on the board", cardIn("todo", slow))

	// y's write asks; the page allows it once; y comes to review. The main
	// checkout is dirty: Merge is refused with the reason, and stays open.
	p.clickWhen("allow y's write", `document.querySelector('#team-decisions .decision[data-kind="permission"] button[data-option="Allow once"]:not([disabled])')`)
	p.until("y in review", cardIn("review", y)+" && !!"+openMerge(y))
	dy := eval[string](p, openMerge(y)+".dataset.decision")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("local edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.clickWhen("merge y", `document.querySelector('[data-decision="`+dy+`"] button[data-option="Merge"]:not([disabled])')`)
	p.until("refused, with the reason", `document.querySelector('[data-decision="`+dy+`"] .refused')?.textContent.includes("`+string(protocol.RefusalMainDirty)+`")`)
	p.screenshot("web-team-refused")
	gitIn(t, repo, "checkout", "--", "README")
	p.clickWhen("merge y again", `document.querySelector('[data-decision="`+dy+`"] button[data-option="Merge"]:not([disabled])')`)
	p.until("y done", cardIn("done", y)+` && !document.querySelector('[data-decision="`+dy+`"]')`)
	if b, err := os.ReadFile(filepath.Join(repo, "y.txt")); err != nil || string(b) != "Y" {
		t.Fatalf("y.txt in the main checkout: %q, %v", b, err)
	}

	// Memory: add, edit and delete from the page; another client's note
	// shows live.
	memory := func() map[string]string {
		l := call[protocol.TeamMemoryListData](t, w, &protocol.TeamMemoryList{Header: protocol.Header{Type: protocol.TypeTeamMemoryList}})
		out := map[string]string{}
		for _, e := range l.Entries {
			out[e.Scope+"/"+e.Key] = e.Body
		}
		return out
	}
	p.clickWhen("add a note", `document.querySelector("#team-mem-new")`)
	p.run("the note", chromedp.SendKeys(chromedp.CSS("#team-mem-key"), "style"), chromedp.SendKeys(chromedp.CSS("#team-mem-body"), "gofmt"),
		chromedp.Click(chromedp.CSS("#team-mem-save")))
	p.until("listed", `[...document.querySelectorAll('.mem[data-key="style"] .mbody')].some(e => e.textContent === "gofmt")`)
	if m := memory(); m["shared/style"] != "gofmt" {
		t.Fatalf("memory after the page's add: %v", m)
	}
	p.clickWhen("edit", `document.querySelector('.mem[data-key="style"] .m-edit')`)
	p.run("edit the body", chromedp.SendKeys(chromedp.CSS("#team-mem-body"), " -s"), chromedp.Click(chromedp.CSS("#team-mem-save")))
	p.until("edited", `document.querySelector('.mem[data-key="style"] .mbody')?.textContent === "gofmt -s"`)
	if m := memory(); m["shared/style"] != "gofmt -s" || len(m) != 1 {
		t.Fatalf("memory after the page's edit: %v", m)
	}
	call[protocol.TeamMemoryData](t, w, &protocol.TeamMemoryPut{Header: protocol.Header{Type: protocol.TypeTeamMemoryPut}, Scope: protocol.MemoryScopeShared, Key: "wire", Body: "from another client"})
	p.until("another client's note, live", `document.querySelector('.mem[data-key="wire"] .mbody')?.textContent === "from another client"`)
	p.clickWhen("delete", `document.querySelector('.mem[data-key="style"] .m-del')`)
	p.until("deleted", `!document.querySelector('.mem[data-key="style"]')`)
	if m := memory(); len(m) != 1 || m["shared/wire"] == "" {
		t.Fatalf("memory after the page's delete: %v", m)
	}

	// A message to the lead lands in the feed; the goal is cancelled.
	p.run("message the lead", chromedp.SendKeys(chromedp.CSS("#team-message"), "keep it small"), chromedp.Click(chromedp.CSS("#team-feed .feed-send button")))
	p.until("in the feed", `[...document.querySelectorAll("#team-feed .feed-item .ftext")].some(e => e.textContent.includes("keep it small"))`)
	p.clickWhen("cancel the goal", `document.querySelector("#team-goal-cancel")`)
	p.until("cancelled", fmt.Sprintf(`document.querySelector('[data-goal=%q]')?.dataset.status === "cancelled" && !document.querySelector("#team-goal-cancel")`, goal.GoalID)+" && "+cardIn("cancelled", x))
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardTeamQuestions: a worker's questions (its ask tool, through
// the lead the daemon attends) are question decisions on the page: one
// with options is answered by its button, one asked in words by the text
// box; the daemon has the answers and the workers go on. In the dark theme
// on a phone the view stacks with the decisions first.
func TestDashboardTeamQuestions(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	repo := newRepo(t)
	w := d.wire()
	goal := call[protocol.TeamGoalData](t, w, &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: "questions", Cwd: repo}).Goal
	ts := call[protocol.TeamTasksData](t, w, &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, GoalID: goal.GoalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "colour", Prompt: "sim: ask select Colour red blue"},
			{Title: "name", Prompt: "sim: ask input Your name"},
		}}).Tasks
	p.run("the team view", chromedp.Navigate(d.url()+"/#team="+goal.GoalID))
	p.online()

	q := func(task string) string {
		return fmt.Sprintf(`document.querySelector('#team-decisions .decision[data-kind="question"][data-task=%q]')`, task)
	}
	p.until("the select question with its options", q(ts[0].TaskID)+`?.querySelector(".question")?.textContent === "Colour" && [...`+q(ts[0].TaskID)+`.querySelectorAll("button.option")].map(b => b.textContent).join() === "red,blue"`)
	p.until("the question in words: a text box and Answer", q(ts[1].TaskID)+`?.querySelector(".question")?.textContent === "Your name" && `+q(ts[1].TaskID)+`.querySelector('button.option[data-option=""]')?.disabled === true`)
	p.clickWhen("blue", q(ts[0].TaskID)+`?.querySelector('button[data-option="blue"]')`)
	p.run("the name", chromedp.SendKeys(chromedp.CSS(`#team-decisions .decision[data-task="`+ts[1].TaskID+`"] textarea`), "Ada"))
	p.clickWhen("answer", q(ts[1].TaskID)+`?.querySelector('button.option[data-option=""]:not([disabled])')`)
	p.until("both closed", `!document.querySelector('#team-decisions .decision[data-kind="question"]')`)

	decs := call[protocol.TeamDecisionListData](t, w, &protocol.TeamDecisionList{Header: protocol.Header{Type: protocol.TypeTeamDecisionList}, GoalID: goal.GoalID})
	got := map[string]string{}
	for _, dd := range decs.Decisions {
		if dd.Kind == protocol.DecisionKindQuestion && dd.Answer != nil {
			got[dd.TaskID] = dd.State + ":" + dd.Answer.Option
			if dd.Answer.Option == "" {
				got[dd.TaskID] += "/" + dd.Answer.Text
			}
		}
	}
	if got[ts[0].TaskID] != "answered:blue" || got[ts[1].TaskID] != "answered:/Ada" {
		t.Fatalf("the page's answers, as the daemon has them: %v", got)
	}
	p.until("the workers went on", fmt.Sprintf(`!document.querySelector('[data-col="doing"] [data-task=%q]') && !document.querySelector('[data-col="doing"] [data-task=%q]')`, ts[0].TaskID, ts[1].TaskID))

	// Dark, and on a phone: the view stacks, the decisions first.
	p.clickWhen("dark theme", `document.querySelector("#theme")`)
	p.until("dark", `document.documentElement.dataset.theme === "dark"`)
	p.run("phone", chromedp.EmulateViewport(400, 800))
	p.until("stacked, decisions first", `(([l, r]) => Math.abs(l.left - r.left) < 1 && r.top < l.top)([".team-left", ".team-right"].map(q => document.querySelector(q).getBoundingClientRect()))`)
	p.screenshot("web-team-phone")
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardTeamBoardSurvivesRestart: shardd is killed (SIGKILL) with
// one task in review and one running; started again on the same origin,
// the page reconnects and reads the board again: the reviewed task keeps
// its open merge decision (and the badge), the interrupted one is blocked
// with the reason, never rerun by itself; Retry from the page runs it
// again, and Merge from the page lands the first.
func TestDashboardTeamBoardSurvivesRestart(t *testing.T) {
	b := newBrowser(t)
	home := filepath.Join(shardtest.ShortTemp(t, "wb"), "home")
	port := freePort(t)
	d := startDaemon(t, home, port)
	p := b.newPage("owner")
	p.enroll(d)
	repo := newRepo(t)
	w := d.wire()
	goal := call[protocol.TeamGoalData](t, w, &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: "survive", Cwd: repo}).Goal
	ts := call[protocol.TeamTasksData](t, w, &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, GoalID: goal.GoalID,
		Tasks: []protocol.TeamTaskSpec{
			{Title: "quick", Prompt: `sim: tool write {"path":"quick.txt","content":"Q"}`},
			{Title: "long", Prompt: "sim: sleep 600000"},
		}}).Tasks
	quick, long := ts[0].TaskID, ts[1].TaskID
	p.run("the team view", chromedp.Navigate(d.url()+"/#team="+goal.GoalID))
	p.online()
	p.clickWhen("allow the write", `document.querySelector('#team-decisions .decision[data-kind="permission"] button[data-option="Allow once"]:not([disabled])')`)
	p.until("quick in review, long doing", cardIn("review", quick)+" && !!"+openMerge(quick)+" && "+cardIn("doing", long))
	decision := eval[string](p, openMerge(quick)+".dataset.decision")

	d.sd.Reap() // SIGKILL
	p.until("disconnected", `document.querySelector("#conn-state")?.textContent !== "online"`)
	startDaemon(t, home, port)
	p.online()
	p.until("the board read again", cardIn("blocked", long)+fmt.Sprintf(` && /restart/.test(document.querySelector('[data-task=%q] .why')?.textContent || "")`, long)+
		" && "+cardIn("review", quick)+` && !!document.querySelector('[data-decision="`+decision+`"]') && document.querySelector("#team-badge")?.textContent === "1"`)

	p.clickWhen("retry long", fmt.Sprintf(`document.querySelector('[data-task=%q] .t-retry')`, long))
	p.until("long runs again", cardIn("doing", long))
	p.clickWhen("merge quick", `document.querySelector('[data-decision="`+decision+`"] button[data-option="Merge"]:not([disabled])')`)
	p.until("quick done", cardIn("done", quick)+` && !document.querySelector("#team-badge")`)
	if b, err := os.ReadFile(filepath.Join(repo, "quick.txt")); err != nil || string(b) != "Q" {
		t.Fatalf("quick.txt in the main checkout: %q, %v", b, err)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
