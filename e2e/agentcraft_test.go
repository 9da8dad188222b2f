//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// acFrame is one frame of the AgentCraft endpoint, as a plain JSON object.
type acFrame map[string]any

func (f acFrame) typ() string          { s, _ := f["type"].(string); return s }
func (f acFrame) obj(k string) acFrame { o, _ := f[k].(map[string]any); return o }
func (f acFrame) str(k string) string  { s, _ := f[k].(string); return s }
func (f acFrame) list(k string) []acFrame {
	var out []acFrame
	l, _ := f[k].([]any)
	for _, x := range l {
		o, _ := x.(map[string]any)
		out = append(out, o)
	}
	return out
}

// acSession is a plain WebSocket client of the AgentCraft v1 endpoint of
// the shardd that d runs, found through daemon.json.
type acSession struct {
	t  *testing.T
	ws *websocket.Conn
}

func acConnect(t *testing.T, d *daemon) *acSession {
	t.Helper()
	var disc struct {
		URL string `json:"agentcraft_url"`
	}
	eventually(t, 10*time.Second, "daemon.json naming the AgentCraft endpoint", func() bool {
		raw, err := os.ReadFile(d.discovery())
		return err == nil && json.Unmarshal(raw, &disc) == nil && disc.URL != ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, disc.URL, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", disc.URL, err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	s := &acSession{t: t, ws: ws}
	s.send(map[string]any{"type": "hello", "modVersion": "0.1.0", "protocol": 1, "client": "cli"})
	return s
}

func (s *acSession) send(v map[string]any) {
	s.t.Helper()
	v["v"] = 1
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.ws.Write(ctx, websocket.MessageText, b); err != nil {
		s.t.Fatal(err)
	}
}

// read reads one frame; a failed ack or an error fails the test.
func (s *acSession) read(deadline time.Time) acFrame {
	s.t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, b, err := s.ws.Read(ctx)
	if err != nil {
		s.t.Fatalf("read: %v", err)
	}
	var f acFrame
	if err := json.Unmarshal(b, &f); err != nil {
		s.t.Fatalf("not a JSON object: %s", b)
	}
	if f.typ() == "error" || (f.typ() == "ack" && f["ok"] != true) {
		s.t.Fatalf("refused: %s", b)
	}
	return f
}

// TestAgentCraftBoardSurvivesSIGKILL: through the AgentCraft endpoint of
// the real shardd, a goal of two tasks runs until one waits in review and
// the other's worker runs; shardd is killed with SIGKILL and started again
// on the same home; the new endpoint's snapshot has the board intact (the
// merge decision open, the cut run's task blocked), and the person
// finishes the goal from there: merge by label, cancel the other.
func TestAgentCraftBoardSurvivesSIGKILL(t *testing.T) {
	repo := wsRepo(t)
	home := newHome(t)
	flags := []string{"--agentcraft.enabled", "--agentcraft.listen", "127.0.0.1:0", "--team.repo", repo}
	d := startDaemonAt(t, home, flags...)
	ac := acConnect(t, d)
	deadline := time.Now().Add(60 * time.Second)
	for ac.read(deadline).typ() != "snapshot" {
	}
	ac.send(map[string]any{"type": "goal.submit", "id": "g", "text": "Two tasks.\n\n" +
		`- quick: sim: tool write {"path":"q.txt","content":"Q"}` + "\n" +
		"- slow: sim: sleep 60000\n"})

	goalID, merge, slow := "", "", ""
	slowDoing := false
	for merge == "" || !slowDoing {
		f := ac.read(deadline)
		switch f.typ() {
		case "ack":
			if f.str("re") == "g" {
				goalID = f.obj("result").str("goalId")
			}
		case "task.upsert":
			if task := f.obj("task"); task.str("title") == "slow" {
				slow, slowDoing = task.str("id"), task.str("status") == "doing"
			}
		case "decision.upsert":
			dec := f.obj("decision")
			if dec.str("status") != "open" {
				continue
			}
			switch dec.str("kind") {
			case "permission":
				ac.send(map[string]any{"type": "decision.answer", "id": "p", "decisionId": dec.str("id"), "option": "Allow once"})
			case "merge":
				merge = dec.str("id")
			}
		}
	}
	if goalID == "" {
		t.Fatal("goal.submit was never acknowledged")
	}

	if err := syscall.Kill(d.pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 10*time.Second)
	d2 := startDaemonAt(t, home, flags...)
	ac2 := acConnect(t, d2)
	var snap acFrame
	for snap = ac2.read(deadline); snap.typ() != "snapshot"; snap = ac2.read(deadline) {
	}
	if g := snap.obj("goal"); g.str("id") != goalID || g.str("status") != "active" {
		t.Fatalf("goal after the kill = %v", g)
	}
	open := false
	for _, dec := range snap.list("decisions") {
		open = open || (dec.str("id") == merge && dec.str("status") == "open")
	}
	if !open {
		t.Fatalf("the merge decision %s is not open after the kill: %v", merge, snap["decisions"])
	}
	// The cut run's task is blocked by the restart (the daemon may block it
	// just after the snapshot).
	blocked := func(task acFrame) bool {
		return task.str("id") == slow && task.str("status") == "blocked" && task.str("blockedReason") == "interrupted by a daemon restart"
	}
	isBlocked := false
	for _, task := range snap.list("tasks") {
		isBlocked = isBlocked || blocked(task)
	}

	ac2.send(map[string]any{"type": "decision.answer", "id": "m", "decisionId": merge, "option": "Merge"})
	cancelled := false
	for done := false; !done; {
		f := ac2.read(deadline)
		switch f.typ() {
		case "task.upsert":
			isBlocked = isBlocked || blocked(f.obj("task"))
		case "goal.upsert":
			done = f.obj("goal").str("id") == goalID && f.obj("goal").str("status") == "done"
		}
		if isBlocked && !cancelled {
			cancelled = true
			ac2.send(map[string]any{"type": "task.action", "id": "c", "taskId": slow, "action": "cancel"})
		}
	}
	if b, err := os.ReadFile(filepath.Join(repo, "q.txt")); err != nil || string(b) != "Q" {
		t.Fatalf("main checkout q.txt = %q, %v", b, err)
	}
}
