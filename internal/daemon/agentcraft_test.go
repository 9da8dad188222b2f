package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/config"
)

// acClient is a plain WebSocket client of the AgentCraft v1 dialect: JSON
// objects in text frames, no Origin header, nothing of Shard.
type acClient struct {
	t  *testing.T
	ws *websocket.Conn
}

// acMsg is one frame the endpoint sent, as a plain JSON object.
type acMsg map[string]any

func (m acMsg) typ() string         { s, _ := m["type"].(string); return s }
func (m acMsg) obj(k string) acMsg  { o, _ := m[k].(map[string]any); return o }
func (m acMsg) str(k string) string { s, _ := m[k].(string); return s }

func dialAgentCraft(t *testing.T, addr string) *acClient {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(c, "ws://"+addr, nil)
	if err != nil {
		t.Fatalf("dial the AgentCraft endpoint: %v", err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &acClient{t: t, ws: ws}
}

func (a *acClient) send(v map[string]any) {
	a.t.Helper()
	v["v"] = 1
	b, _ := json.Marshal(v)
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.ws.Write(c, websocket.MessageText, b); err != nil {
		a.t.Fatal(err)
	}
}

// read reads one frame, bounded by deadline (which only fails the test).
func (a *acClient) read(deadline time.Time) acMsg {
	a.t.Helper()
	c, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	typ, b, err := a.ws.Read(c)
	if err != nil {
		a.t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		a.t.Fatalf("a %v frame", typ)
	}
	var m acMsg
	if err := json.Unmarshal(b, &m); err != nil {
		a.t.Fatalf("not a JSON object: %s", b)
	}
	if m["v"] != 1.0 {
		a.t.Fatalf("v = %v: %s", m["v"], b)
	}
	return m
}

// next reads until a frame of type typ satisfying ok.
func (a *acClient) next(typ string, ok func(acMsg) bool) acMsg {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := a.read(deadline)
		if m.typ() == typ && (ok == nil || ok(m)) {
			return m
		}
	}
}

// TestAgentCraftRejectsBrowsers: the real daemon's endpoint answers 401 to
// an upgrade with an Origin (even "null") or a foreign Host, and is off
// unless enabled.
func TestAgentCraftRejectsBrowsers(t *testing.T) {
	off := start(t, nil)
	if addr := off.d.AgentCraftAddr(); addr != "" {
		t.Fatalf("endpoint serving while disabled: %s", addr)
	}
	h := start(t, func(c *config.Config) { c.AgentCraft.Enabled, c.AgentCraft.Listen = true, "127.0.0.1:0" })
	addr := h.d.AgentCraftAddr()
	for _, hdr := range []http.Header{{"Origin": {"null"}}, {"Origin": {"http://" + addr}}} {
		_, resp, err := websocket.Dial(ctx(t), "ws://"+addr, &websocket.DialOptions{HTTPHeader: hdr})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Origin %q: %v %v, want 401", hdr.Get("Origin"), resp, err)
		}
	}
	_, resp, err := websocket.Dial(ctx(t), "ws://"+addr, &websocket.DialOptions{Host: "attacker.example"})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("foreign Host: %v %v, want 401", resp, err)
	}
}

// TestAgentCraftWholeGoal drives one goal from a plain WebSocket client of
// the AgentCraft v1 dialect against the real daemon and runtime under sim:
// hello → snapshot, goal.submit, the tasks the sim lead plans from the
// goal's text appear, every decision is answered through the
// endpoint — permissions "Allow once" by label, one merge with "Request
// changes" (after reading its diff) then "Merge" by label, the others
// "Merge" by index, one of them from a second client — and the goal
// reaches done with every change in the
// main checkout and no worktree left.
func TestAgentCraftWholeGoal(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t") // the team commits the workers' changes
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, func(c *config.Config) {
		c.AgentCraft.Enabled, c.AgentCraft.Listen = true, "127.0.0.1:0"
		c.Team.Repo = repo
	})
	ac := dialAgentCraft(t, h.d.AgentCraftAddr())

	ac.send(map[string]any{"type": "hello", "modVersion": "0.1.0", "protocol": 1, "client": "cli"})
	snap := ac.next("snapshot", nil)
	repos, _ := snap["repos"].([]any)
	if len(repos) != 1 || acMsg(repos[0].(map[string]any)).str("path") != repo {
		t.Fatalf("snapshot repos = %v", snap["repos"])
	}
	repoID := acMsg(repos[0].(map[string]any)).str("id")

	write := func(file, content string) string {
		b, _ := json.Marshal(map[string]string{"path": file, "content": content})
		return "sim: tool write " + string(b)
	}
	// Under sim the lead plans the goal's "- title: prompt" lines (its team
	// tool), and each worker runs its prompt's directives.
	goal := "Add three files.\n\n" +
		"- alpha: " + write("alpha.txt", "alpha\n") + "\n" +
		"- beta: " + write("beta.txt", "beta\n") + "\n" +
		"- gamma: " + write("gamma.txt", "gamma\n") + " (after 1, 2)\n"
	ac.send(map[string]any{"type": "goal.submit", "id": "c1", "text": goal, "repoId": repoID})
	// From here every frame goes through one loop, so that nothing that
	// asks is skipped.
	goalID := ""
	messaged := false
	title := map[string]string{} // task id → title, from the task.upserts
	// A second client, which answers beta's merge.
	other := dialAgentCraft(t, h.d.AgentCraftAddr())
	other.send(map[string]any{"type": "hello", "modVersion": "0.1.0", "protocol": 1})
	other.next("snapshot", nil)
	otherAnswer := ""

	// Follow the board through the endpoint alone, answering what asks.
	seenTasks := map[string]bool{}
	workers := map[string]bool{}
	requested := false
	diffs := 0
	deadline := time.Now().Add(90 * time.Second)
	for done := false; !done; {
		m := ac.read(deadline)
		if b, _ := json.Marshal(m); testing.Verbose() {
			t.Logf("frame %.300s", b)
		}
		switch m.typ() {
		case "task.upsert":
			task := m.obj("task")
			seenTasks[task.str("id")] = true
			title[task.str("id")] = task.str("title")
			if task.str("status") == "blocked" {
				t.Fatalf("task %s blocked: %s", task.str("title"), task.str("blockedReason"))
			}
		case "agent.upsert":
			if a := m.obj("agent"); a.str("role") == "worker" {
				workers[a.str("id")] = true
			} else if a.str("role") == "lead" && !messaged {
				// A message routed by its leading @name, to the lead.
				messaged = true
				ac.send(map[string]any{"type": "user.message", "id": "c2", "to": "all", "text": "@" + a.str("id") + " three small files, please"})
			}
		case "goal.upsert":
			g := m.obj("goal")
			if goalID != "" && g.str("id") == goalID && g.str("status") == "done" {
				done = true
			}
			if s := g.str("status"); g.str("id") == goalID && (s == "failed" || s == "cancelled") {
				t.Fatalf("goal %s", s)
			}
		case "decision.upsert":
			d := m.obj("decision")
			if d.str("status") != "open" {
				continue
			}
			id := d.str("id")
			switch d.str("kind") {
			case "permission":
				if !strings.Contains(d.str("context"), `"Always allow for this agent" covers: `) {
					t.Errorf("permission context without its scope: %q", d.str("context"))
				}
				ac.send(map[string]any{"type": "decision.answer", "id": "p-" + id, "decisionId": id, "option": "Allow once"})
			case "question":
				ac.send(map[string]any{"type": "decision.answer", "id": "q-" + id, "decisionId": id, "option": 0, "text": "yes"})
			case "merge":
				if d.str("worktree") == "" || d.str("repoId") != repoID {
					t.Errorf("merge decision without its worktree or repo: %v", d)
				}
				switch {
				case title[d.str("taskId")] == "alpha" && !requested:
					requested = true
					// The diff under review, from the worktree the decision names.
					ac.send(map[string]any{"type": "diff.request", "id": "r-" + id, "requestId": "r-" + id, "repoId": repoID, "worktree": d.str("worktree")})
					ac.send(map[string]any{"type": "decision.answer", "id": "rc-" + id, "decisionId": id,
						"option": "Request changes", "text": write("alpha.txt", "alpha, reviewed\n")})
				case title[d.str("taskId")] == "alpha":
					ac.send(map[string]any{"type": "decision.answer", "id": "m-" + id, "decisionId": id, "option": "Merge"})
				case title[d.str("taskId")] == "beta" && otherAnswer == "":
					otherAnswer = "m-" + id
					other.send(map[string]any{"type": "decision.answer", "id": otherAnswer, "decisionId": id, "option": 0})
				default:
					ac.send(map[string]any{"type": "decision.answer", "id": "m-" + id, "decisionId": id, "option": 0})
				}
			}
		case "repo.upsert":
			wts, _ := m.obj("repo")["worktrees"].([]any)
			for _, x := range wts {
				if wt := acMsg(x.(map[string]any)); wt.str("branch") == "" || wt.str("path") == "" || wt.str("agentId") == "" {
					t.Errorf("a worktree without its branch, path or agent: %v", wt)
				}
			}
		case "diff":
			files, _ := m["files"].([]any)
			if m.str("error") != "" || len(files) != 1 || acMsg(files[0].(map[string]any)).str("path") != "alpha.txt" {
				t.Fatalf("diff of alpha's worktree = %v", m)
			}
			diffs++
		case "ack":
			if m["ok"] != true {
				t.Fatalf("a failed ack: %v", m)
			}
			if m.str("re") == "c1" {
				goalID = m.obj("result").str("goalId")
			}
		case "error":
			t.Fatalf("error: %v", m)
		}
	}
	if otherAnswer == "" {
		t.Fatal("beta's merge decision never came")
	}
	if a := other.next("ack", func(m acMsg) bool { return m.str("re") == otherAnswer }); a["ok"] != true {
		t.Errorf("the second client's answer: %v", a)
	}
	if len(seenTasks) != 3 {
		t.Errorf("tasks seen: %v, want alpha, beta and gamma", title)
	}
	if !requested || diffs != 1 || len(workers) == 0 || !messaged {
		t.Errorf("requested changes %v, diffs %d, workers %v, messaged %v", requested, diffs, workers, messaged)
	}
	for file, want := range map[string]string{"alpha.txt": "alpha, reviewed\n", "beta.txt": "beta\n", "gamma.txt": "gamma\n"} {
		b, err := os.ReadFile(filepath.Join(repo, file))
		if err != nil || string(b) != want {
			t.Errorf("main checkout %s = %q, %v; want %q", file, b, err, want)
		}
	}
	if out := runGit(t, repo, "worktree", "list"); strings.Count(out, "\n") != 0 {
		t.Errorf("worktrees left:\n%s", out)
	}

	// A second client's snapshot has the finished board.
	ac2 := dialAgentCraft(t, h.d.AgentCraftAddr())
	ac2.send(map[string]any{"type": "hello", "modVersion": "0.1.0", "protocol": 1})
	snap = ac2.next("snapshot", nil)
	if g := snap.obj("goal"); g.str("id") != goalID || g.str("status") != "done" || g["progress"] != 1.0 {
		t.Errorf("snapshot goal = %v", g)
	}
	for _, x := range snap["tasks"].([]any) {
		if task := acMsg(x.(map[string]any)); task.str("status") != "done" {
			t.Errorf("task %s is %s", task.str("title"), task.str("status"))
		}
	}

	// A repository added through the endpoint, and a daemon restart: the
	// new endpoint's snapshot has the board and both repositories.
	second := gitRepo(t)
	ac2.send(map[string]any{"type": "repo.add", "id": "c3", "path": second})
	if a := ac2.next("ack", func(m acMsg) bool { return m.str("re") == "c3" }); a["ok"] != true || a.obj("result").str("repoId") == "" {
		t.Fatalf("repo.add ack = %v", a)
	}
	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	ac3 := dialAgentCraft(t, h2.d.AgentCraftAddr())
	ac3.send(map[string]any{"type": "hello", "modVersion": "0.1.0", "protocol": 1})
	snap = ac3.next("snapshot", nil)
	if g := snap.obj("goal"); g.str("id") != goalID || g.str("status") != "done" || len(snap["tasks"].([]any)) != 3 {
		t.Errorf("after a restart: goal %v, tasks %v", g, snap["tasks"])
	}
	var paths []string
	for _, x := range snap["repos"].([]any) {
		paths = append(paths, acMsg(x.(map[string]any)).str("path"))
	}
	if len(paths) != 2 || paths[0] != repo || paths[1] != second {
		t.Errorf("after a restart, repos = %v, want %s and %s", paths, repo, second)
	}
}

// TestAgentCraftAgentActions: pause, resume and stop of a worker, through
// the endpoint against the real daemon: pause aborts the worker's turn (its
// long run ends and its task leaves doing), resume clears the pause, stop
// takes the worker off shift.
func TestAgentCraftAgentActions(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, func(c *config.Config) {
		c.AgentCraft.Enabled, c.AgentCraft.Listen = true, "127.0.0.1:0"
		c.Team.Repo = repo
	})
	ac := dialAgentCraft(t, h.d.AgentCraftAddr())
	ac.send(map[string]any{"type": "hello", "modVersion": "0.1.0", "protocol": 1})
	ac.next("snapshot", nil)
	ac.send(map[string]any{"type": "goal.submit", "id": "c1", "text": "Wait.\n\n- slow: sim: sleep 600000\n"})

	deadline := time.Now().Add(60 * time.Second)
	worker, paused, resumed, stopped := "", false, false, false
	sawPaused, sawResumed := false, false
	left := ""
	for !stopped {
		m := ac.read(deadline)
		switch m.typ() {
		case "agent.upsert":
			a := m.obj("agent")
			switch {
			case worker == "" && a.str("role") == "worker" && a.str("state") == "thinking":
				worker = a.str("id") // in its long turn
				ac.send(map[string]any{"type": "agent.action", "id": "pause", "agentId": worker, "action": "pause"})
			case a.str("id") == worker && resumed && a["active"] == false:
				stopped = true
			case a.str("id") == worker && a["paused"] == true:
				sawPaused = true
			case a.str("id") == worker && sawPaused && resumed && a["paused"] == false:
				sawResumed = true
			}
		case "task.upsert":
			task := m.obj("task")
			if paused && !resumed && task.str("status") != "doing" {
				// The aborted turn ended the run: the task left doing.
				resumed, left = true, task.str("status")
				ac.send(map[string]any{"type": "agent.action", "id": "resume", "agentId": worker, "action": "resume"})
				ac.send(map[string]any{"type": "agent.action", "id": "stop", "agentId": worker, "action": "stop"})
			}
		case "ack":
			if m["ok"] != true {
				t.Fatalf("a failed ack: %v", m)
			}
			if m.str("re") == "pause" {
				paused = true
			}
		case "decision.upsert":
			if d := m.obj("decision"); d.str("status") == "open" && d.str("kind") == "permission" {
				ac.send(map[string]any{"type": "decision.answer", "decisionId": d.str("id"), "option": 0})
			}
		case "error":
			t.Fatalf("error: %v", m)
		}
	}
	if !sawPaused || !sawResumed || (left != "blocked" && left != "review") {
		t.Errorf("paused seen %v, resumed seen %v, the task went %q", sawPaused, sawResumed, left)
	}
}
