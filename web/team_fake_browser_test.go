//go:build linux

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/web"
)

// fakeTeamWire is a small WebSocket server speaking docs/protocol.md
// §10.4's team.* commands and events with the protocol package's own
// types, behind the real page handler: the FALLBACK the team view's
// browser tests use where a daemon without the team coordinator cannot
// drive a board (TestDashboardTeamFakeWire). The real daemon's tests are
// in team_browser_test.go. It keeps the team's records, answers the page's
// commands, and lets the test change records as the coordinator would and
// answer decisions as another client would; every change is broadcast as
// the whole entity.
type fakeTeamWire struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	conns     map[*websocket.Conn]bool
	goals     map[string]protocol.TeamGoal
	tasks     map[string]protocol.TeamTask
	decisions map[string]protocol.TeamDecision
	memory    map[string]protocol.TeamMemoryEntry
	feed      []protocol.TeamFeedItem
	seq       int
	refuse    string // the next Merge answer is refused with this reason

	sent chan map[string]any // every team.* command the page sent
}

func newFakeTeamWire(t *testing.T) *fakeTeamWire {
	f := &fakeTeamWire{t: t, conns: map[*websocket.Conn]bool{}, goals: map[string]protocol.TeamGoal{},
		tasks: map[string]protocol.TeamTask{}, decisions: map[string]protocol.TeamDecision{},
		memory: map[string]protocol.TeamMemoryEntry{}, sent: make(chan map[string]any, 64)}
	mux := http.NewServeMux()
	page := web.Handler(web.Options{})
	mux.Handle("/", page)
	mux.HandleFunc("/bootstrap", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"url":"ws://%s/ws","protocols":["shard.v1"]}`, r.Host)
	})
	mux.HandleFunc("/ws", f.serveWS)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTeamWire) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"shard.v1"}})
	if err != nil {
		return
	}
	ctx := r.Context()
	f.mu.Lock()
	f.conns[c] = true
	f.mu.Unlock()
	defer func() { f.mu.Lock(); delete(f.conns, c); f.mu.Unlock(); c.CloseNow() }()
	f.write(c, protocol.Hello{Header: protocol.Header{Type: protocol.TypeHello}, ProtocolVersion: protocol.Version, ServerVersion: "fake", Capabilities: []string{"websocket"}})
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		typ, _ := m["type"].(string)
		if strings.HasPrefix(typ, "team.") {
			f.sent <- m
		}
		data, perr := f.handle(typ, b)
		resp := map[string]any{"type": "response", "id": m["id"], "command": typ, "success": perr == nil}
		if perr != nil {
			resp["error"] = perr
		} else {
			resp["data"] = data
		}
		f.write(c, resp)
	}
}

func (f *fakeTeamWire) write(c *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Write(ctx, websocket.MessageText, b)
}

// broadcast sends an event to every connection (the team events are
// daemon-wide, docs/protocol.md §10.4).
func (f *fakeTeamWire) broadcast(v any) {
	f.mu.Lock()
	conns := make([]*websocket.Conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		f.write(c, v)
	}
}

func (f *fakeTeamWire) now() int64 { f.seq++; return time.Now().UnixMilli()*1000 + int64(f.seq) }

func (f *fakeTeamWire) handle(typ string, b []byte) (any, *protocol.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch typ {
	case "agent.list":
		return map[string]any{"agents": []any{}}, nil
	case protocol.TypeTeamGoalSubmit:
		var c protocol.TeamGoalSubmit
		_ = json.Unmarshal(b, &c)
		g := protocol.TeamGoal{GoalID: fmt.Sprintf("goal-%d", len(f.goals)+1), Text: c.Text, Status: protocol.GoalPlanning, Cwd: c.Cwd, CostLimitUSD: c.CostLimitUSD, CreatedAt: f.now(), UpdatedAt: f.now()}
		f.goals[g.GoalID] = g
		go f.broadcast(protocol.TeamGoalChanged{Header: protocol.Header{Type: protocol.TypeTeamGoalChanged}, Goal: g})
		return protocol.TeamGoalData{Goal: g}, nil
	case protocol.TypeTeamGoalList:
		out := []protocol.TeamGoal{}
		for _, g := range f.goals {
			out = append(out, g)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
		return protocol.TeamGoalListData{Goals: out}, nil
	case protocol.TypeTeamGoalShow:
		var c protocol.TeamGoalShow
		_ = json.Unmarshal(b, &c)
		g, ok := f.goals[c.GoalID]
		if !ok {
			return nil, &protocol.Error{Code: protocol.CodeNotFound, Message: "no such goal"}
		}
		d := protocol.TeamGoalShowData{Goal: g, Tasks: []protocol.TeamTask{}, Decisions: []protocol.TeamDecision{}}
		for _, x := range f.tasks {
			if x.GoalID == g.GoalID {
				d.Tasks = append(d.Tasks, x)
			}
		}
		for _, x := range f.decisions {
			if x.GoalID == g.GoalID {
				d.Decisions = append(d.Decisions, x)
			}
		}
		return d, nil
	case protocol.TypeTeamDecisionList:
		var c protocol.TeamDecisionList
		_ = json.Unmarshal(b, &c)
		d := protocol.TeamDecisionListData{Decisions: []protocol.TeamDecision{}}
		for _, x := range f.decisions {
			if !c.OpenOnly || x.State == protocol.DecisionOpen {
				d.Decisions = append(d.Decisions, x)
			}
		}
		return d, nil
	case protocol.TypeTeamDecisionAnswer:
		var c protocol.TeamDecisionAnswer
		_ = json.Unmarshal(b, &c)
		d, ok := f.decisions[c.DecisionID]
		if !ok {
			return nil, &protocol.Error{Code: protocol.CodeNotFound, Message: "no such decision"}
		}
		if d.State != protocol.DecisionOpen {
			return nil, &protocol.Error{Code: protocol.CodeConflict, Message: "decision is " + d.State}
		}
		if c.Option == protocol.OptionMerge && f.refuse != "" {
			d.RefusedReason, f.refuse = f.refuse, ""
		} else {
			d.State, d.RefusedReason = protocol.DecisionAnswered, ""
			d.Answer = &protocol.TeamAnswer{Option: c.Option, Text: c.Text, By: "web", At: f.now()}
		}
		d.UpdatedAt = f.now()
		f.decisions[d.DecisionID] = d
		go f.broadcast(protocol.TeamDecisionChanged{Header: protocol.Header{Type: protocol.TypeTeamDecisionChanged}, Decision: d})
		return protocol.TeamDecisionData{Decision: d}, nil
	case protocol.TypeTeamTaskAction:
		var c protocol.TeamTaskAction
		_ = json.Unmarshal(b, &c)
		x, ok := f.tasks[c.TaskID]
		if !ok {
			return nil, &protocol.Error{Code: protocol.CodeNotFound, Message: "no such task"}
		}
		return protocol.TeamTaskData{Task: x}, nil
	case protocol.TypeTeamMemoryList:
		d := protocol.TeamMemoryListData{Entries: []protocol.TeamMemoryEntry{}}
		for _, e := range f.memory {
			d.Entries = append(d.Entries, e)
		}
		return d, nil
	case protocol.TypeTeamMemoryPut:
		var c protocol.TeamMemoryPut
		_ = json.Unmarshal(b, &c)
		e := protocol.TeamMemoryEntry{MemoryID: "mem-" + c.Scope + "-" + c.Key, Scope: c.Scope, Key: c.Key, Title: c.Title, Body: c.Body, Updated: f.now()}
		f.memory[e.MemoryID] = e
		go f.broadcast(protocol.TeamMemoryChanged{Header: protocol.Header{Type: protocol.TypeTeamMemoryChanged}, Entry: e})
		return protocol.TeamMemoryData{Entry: e}, nil
	case protocol.TypeTeamFeed:
		items := append([]protocol.TeamFeedItem{}, f.feed...)
		sort.Slice(items, func(i, j int) bool { return items[i].FeedID > items[j].FeedID })
		return protocol.TeamFeedData{Items: items}, nil
	case "workspace.diff":
		return protocol.WorkspaceDiffData{WorkspaceID: "ws-1", Branch: "team/flag", IntegrationTarget: "main", BaseSHA: "0000000",
			Stats: protocol.DiffStats{Files: 1, Additions: 1, Deletions: 0},
			Files: []protocol.DiffFile{{Path: "main.go", Status: protocol.DiffModified, Additions: 1, Hunks: []protocol.DiffHunk{{Header: "@@ -1,1 +1,2 @@",
				Lines: []protocol.DiffLine{{Kind: protocol.LineCtx, Text: "package main", OldNo: 1, NewNo: 1}, {Kind: protocol.LineAdd, Text: "var version = \"1.0\"", NewNo: 2}}}}}}}, nil
	}
	return nil, &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "the fake serves no " + typ}
}

// setTask writes a task as the coordinator would (the next revision) and
// broadcasts it.
func (f *fakeTeamWire) setTask(x protocol.TeamTask) {
	f.mu.Lock()
	old := f.tasks[x.TaskID]
	x.Revision = old.Revision + 1
	if x.CreatedAt == 0 {
		x.CreatedAt = old.CreatedAt
	}
	if x.CreatedAt == 0 {
		x.CreatedAt = f.now()
	}
	if x.Deps == nil {
		x.Deps = []string{}
	}
	x.UpdatedAt = f.now()
	f.tasks[x.TaskID] = x
	f.mu.Unlock()
	f.broadcast(protocol.TeamTaskChanged{Header: protocol.Header{Type: protocol.TypeTeamTaskChanged}, Task: x})
}

func (f *fakeTeamWire) setDecision(d protocol.TeamDecision) {
	f.mu.Lock()
	if d.CreatedAt == 0 {
		d.CreatedAt = f.now()
	}
	d.UpdatedAt = f.now()
	f.decisions[d.DecisionID] = d
	f.mu.Unlock()
	f.broadcast(protocol.TeamDecisionChanged{Header: protocol.Header{Type: protocol.TypeTeamDecisionChanged}, Decision: d})
}

func (f *fakeTeamWire) decision(id string) protocol.TeamDecision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.decisions[id]
}

func (f *fakeTeamWire) addFeed(it protocol.TeamFeedItem) {
	f.mu.Lock()
	it.FeedID, it.At = fmt.Sprintf("feed-%06d", len(f.feed)+1), time.Now().UnixMilli()
	f.feed = append(f.feed, it)
	f.mu.Unlock()
	f.broadcast(protocol.TeamFeedAdded{Header: protocol.Header{Type: protocol.TypeTeamFeedAdded}, Item: it})
}

// next returns the next team.* command the page sent of type typ (the
// others in between are the page's reads).
func (f *fakeTeamWire) next(typ string) map[string]any {
	f.t.Helper()
	timeout := time.After(stepTimeout)
	for {
		select {
		case m := <-f.sent:
			if m["type"] == typ {
				return m
			}
		case <-timeout:
			f.t.Fatalf("the page never sent %s", typ)
			return nil
		}
	}
}

// TestDashboardTeamFakeWire (FALLBACK: a fake §10.4 server, not the
// daemon): the page submits a goal with its repository, cost limit and
// the lead's model (typed: the fake has no model catalog);
// tasks appear in their columns with "after" chips and arrows and move
// live; a merge decision shows its task's diff, is answered "Request
// changes" with feedback, a refused Merge shows the reason and stays, and
// Merge again closes it; a decision answered by another client disappears
// live with a note; a new decision raises a browser notification (the
// person allowed them) and the navigation's badge counts the open ones;
// memory is written from the page and the feed follows live.
func TestDashboardTeamFakeWire(t *testing.T) {
	b := newBrowser(t)
	f := newFakeTeamWire(t)
	p := b.newPage("team")
	p.run("1440 px", chromedp.EmulateViewport(1440, 900))
	p.run("open the team view", chromedp.Navigate(f.srv.URL+"/#team"))
	p.online()
	p.until("the team view", `!!document.querySelector("#team-goal-form") && document.querySelector("#view-team").getAttribute("aria-current") === "page"`)

	p.run("write the goal", chromedp.SendKeys(chromedp.CSS("#team-goal-text"), "add a --version flag"),
		chromedp.SendKeys(chromedp.CSS("#team-goal-cwd"), "/repo"), chromedp.SendKeys(chromedp.CSS("#team-goal-limit"), "2.5"),
		chromedp.SendKeys(chromedp.CSS("#team-goal-model"), "local/qwen3"), chromedp.Click(chromedp.CSS("#team-goal-go")))
	sub := f.next(protocol.TypeTeamGoalSubmit)
	if sub["text"] != "add a --version flag" || sub["cwd"] != "/repo" || sub["cost_limit_usd"] != 2.5 || sub["model"] != "local/qwen3" || sub["request_id"] == "" {
		t.Fatalf("team.goal.submit sent %v", sub)
	}
	p.until("the goal selected", `document.querySelector("#team-board")?.dataset.goal === "goal-1" && document.querySelector('[data-goal="goal-1"] .cost').textContent === "$0.00 / $2.50"`)

	mk := func(id, title, state string, deps ...string) protocol.TeamTask {
		return protocol.TeamTask{TaskID: id, GoalID: "goal-1", Title: title, State: state, Deps: deps, CI: protocol.TeamCI{Status: protocol.CIUnknown}}
	}
	f.setTask(mk("t1", "flag", protocol.TaskTodo))
	f.setTask(mk("t2", "docs", protocol.TaskTodo))
	f.setTask(mk("t3", "release note", protocol.TaskTodo, "t1", "t2"))
	p.until("three cards in todo", `[...document.querySelectorAll('[data-col="todo"] .card')].map(e => e.dataset.task).join() === "t1,t2,t3"`)
	p.until("chips and arrows", `document.querySelector('[data-task="t3"] .after').textContent === "after: #1, #2" && [...document.querySelectorAll("svg.deps path.dep")].map(e => e.dataset.from + ">" + e.dataset.to).sort().join() === "t1>t3,t2>t3"`)

	doing := mk("t1", "flag", protocol.TaskDoing)
	doing.Assignee, doing.Branch, doing.WorkspaceID = "agent-w1", "team/flag", "ws-1"
	f.setTask(doing)
	p.until("t1 moved to doing", `document.querySelector('[data-col="doing"] [data-task="t1"] .branch')?.textContent === "team/flag" && !document.querySelector('[data-col="todo"] [data-task="t1"]')`)
	review := doing
	review.State, review.Diff, review.CI = protocol.TaskReview, &protocol.TeamDiffStats{Files: 1, Additions: 1, Ahead: 1}, protocol.TeamCI{Status: protocol.CIPass}
	f.setTask(review)
	f.setDecision(protocol.TeamDecision{DecisionID: "d1", GoalID: "goal-1", TaskID: "t1", Kind: protocol.DecisionKindMerge, Question: "Merge task #1 flag?",
		Options: []string{protocol.OptionMerge, protocol.OptionRequestChanges, protocol.OptionReject}, State: protocol.DecisionOpen})
	p.until("t1 in review, CI pass", `document.querySelector('[data-col="review"] [data-task="t1"] .ci')?.dataset.ci === "pass"`)
	p.until("the merge decision with its diff", `[...document.querySelectorAll('[data-decision="d1"] button.option')].map(b => b.dataset.option).join() === "Merge,Request changes,Reject"
		&& [...document.querySelectorAll('#team-diff-d1 .dl.add')].some(e => e.textContent.includes("var version"))`)
	p.until("the badge", `document.querySelector("#team-badge")?.textContent === "1"`)
	p.screenshot("web-team-fake")

	p.run("request changes", chromedp.SendKeys(chromedp.CSS(`[data-decision="d1"] textarea`), "also print the commit"),
		chromedp.Click(chromedp.CSS(`[data-decision="d1"] button[data-option="Request changes"]`)))
	if a := f.next(protocol.TypeTeamDecisionAnswer); a["decision_id"] != "d1" || a["option"] != protocol.OptionRequestChanges || a["text"] != "also print the commit" {
		t.Fatalf("answer sent %v", a)
	}
	p.until("d1 closed, no badge", `!document.querySelector('[data-decision="d1"]') && !document.querySelector("#team-badge")`)
	if n := eval[int](p, `document.querySelectorAll("[data-closed-decision]").length`); n != 0 {
		t.Fatalf("the page's own answer left %d notes", n)
	}

	// The second review: Merge is refused once (the reason shows, the
	// decision stays), then carried out.
	f.setDecision(protocol.TeamDecision{DecisionID: "d2", GoalID: "goal-1", TaskID: "t1", Kind: protocol.DecisionKindMerge, Question: "Merge task #1 flag?",
		Options: []string{protocol.OptionMerge, protocol.OptionRequestChanges, protocol.OptionReject}, State: protocol.DecisionOpen})
	f.mu.Lock()
	f.refuse = "the main checkout has uncommitted changes"
	f.mu.Unlock()
	p.clickWhen("merge", `document.querySelector('[data-decision="d2"] button[data-option="Merge"]:not([disabled])')`)
	f.next(protocol.TypeTeamDecisionAnswer)
	p.until("refused reason", `document.querySelector('[data-decision="d2"] .refused')?.textContent.includes("uncommitted changes")`)
	p.clickWhen("merge again", `document.querySelector('[data-decision="d2"] button[data-option="Merge"]:not([disabled])')`)
	f.next(protocol.TypeTeamDecisionAnswer)
	p.until("d2 closed", `!document.querySelector('[data-decision="d2"]')`)
	if d := f.decision("d2"); d.State != protocol.DecisionAnswered || d.Answer.Option != protocol.OptionMerge {
		t.Fatalf("d2 after the page's Merge: %+v", d)
	}
	done := review
	done.State = protocol.TaskDone
	f.setTask(done)
	p.until("t1 done", `!!document.querySelector('[data-col="done"] [data-task="t1"]')`)

	// The person allowed notifications: a new decision raises one (a spy
	// stands in for the browser's Notification, which headless Chromium
	// does not show).
	p.until("spy", `(() => { window.__notified = []; window.Notification = class { static permission = "granted"; static requestPermission() { return Promise.resolve("granted"); }
		constructor(title, o) { window.__notified.push([title, o.body, o.tag]); } }; return true; })()`)
	f.setDecision(protocol.TeamDecision{DecisionID: "d3", GoalID: "goal-1", AgentID: "agent-w2", Kind: protocol.DecisionKindPermission, Tool: "bash", Question: "Run make release?",
		Options: []string{protocol.OptionAllowOnce, protocol.OptionAlwaysAllow, protocol.OptionDeny}, State: protocol.DecisionOpen})
	p.until("notified", `JSON.stringify(window.__notified) === JSON.stringify([["Shard: a decision waits (permission)", "Run make release?", "shard-decision-d3"]])`)
	p.until("permission options", `[...document.querySelectorAll('[data-decision="d3"] button.option')].map(b => b.textContent).join("|") === "Allow once|Always allow for this agent|Deny" && document.querySelector("#team-badge")?.textContent === "1"`)
	// Keys: d focuses the oldest decision's first option, v switches the
	// view (the badge stays), n focuses the goal's text.
	p.until("nothing focused", `(document.activeElement?.blur(), true)`)
	p.run("d", chromedp.KeyEvent("d"))
	p.until("the decision focused", `document.activeElement?.dataset.option === "Allow once" && !!document.activeElement.closest('[data-decision="d3"]')`)
	p.run("v", chromedp.KeyEvent("v"))
	p.until("the badge on the agents view", `!document.querySelector("#team-view") && document.querySelector("#team-badge")?.textContent === "1"`)
	p.clickWhen("team view", `document.querySelector("#view-team")`)
	p.until("nothing focused", `(document.activeElement?.blur(), true)`)
	p.run("n", chromedp.KeyEvent("n"))
	p.until("the goal's text focused", `document.activeElement?.id === "team-goal-text"`)
	p.run("escape", chromedp.KeyEvent(kb.Escape))

	// Another client answers first: the decision goes live, with a note.
	d3 := f.decision("d3")
	d3.State, d3.Answer = protocol.DecisionAnswered, &protocol.TeamAnswer{Option: protocol.OptionDeny, By: "shardctl", At: time.Now().UnixMilli()}
	f.setDecision(d3)
	p.until("d3 gone with a note", `!document.querySelector('[data-decision="d3"]') && document.querySelector('[data-closed-decision="d3"]')?.textContent.includes("by shardctl: Deny") && !document.querySelector("#team-badge")`)

	// Card actions, memory and the feed.
	p.clickWhen("cancel t2", `document.querySelector('[data-task="t2"] .t-cancel')`)
	if a := f.next(protocol.TypeTeamTaskAction); a["task_id"] != "t2" || a["action"] != "cancel" {
		t.Fatalf("task action sent %v", a)
	}
	p.clickWhen("open the note form", `document.querySelector("#team-mem-new")`)
	p.run("a note", chromedp.SendKeys(chromedp.CSS("#team-mem-key"), "style"), chromedp.SendKeys(chromedp.CSS("#team-mem-body"), "gofmt everything"),
		chromedp.Click(chromedp.CSS("#team-mem-save")))
	p.until("the note listed", `document.querySelector('[data-memory="mem-shared-style"] .mbody')?.textContent === "gofmt everything"`)
	f.addFeed(protocol.TeamFeedItem{GoalID: "goal-1", Kind: protocol.FeedMerge, Text: "merged team/flag into main"})
	p.until("the feed", `document.querySelector('#team-feed .feed-item[data-kind="merge"] .ftext')?.textContent === "merged team/flag into main"`)
	p.clickWhen("dark theme", `document.querySelector("#theme")`)
	p.until("dark", `document.documentElement.dataset.theme === "dark"`)
	p.screenshot("web-team-fake-dark")
	// On a phone the view stacks, the decisions first.
	p.run("phone", chromedp.EmulateViewport(400, 800))
	p.until("stacked", `(([l, r]) => Math.abs(l.left - r.left) < 1 && r.top < l.top)([".team-left", ".team-right"].map(q => document.querySelector(q).getBoundingClientRect()))`)
	p.screenshot("web-team-phone")
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
