package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/protocol"
)

// ackOf reads frames until the ack of id and returns it.
func (c *wsClient) ackOf(id string) frame {
	c.t.Helper()
	return c.next("ack", func(f frame) bool { return f.body["re"] == id })
}

// TestClientVectors sends every client example of the dialect and checks
// the Shard command each becomes, and the ack.
func TestClientVectors(t *testing.T) {
	repo := gitRepo(t, "demo-app")
	f := newFakeDaemon(t)
	exampleWorld(f, repo)
	s := startServer(t, f, nil)
	c := dialWS(t, s.Addr())
	c.hello()

	c.sendRaw(string(readVector(t, "goal.submit")))
	if a := c.ackOf("c12"); a.body["ok"] != true {
		t.Errorf("goal.submit ack = %s", a.raw)
	}
	if cmd := f.nextCmd(t, protocol.TypeTeamGoalSubmit).(*protocol.TeamGoalSubmit); cmd.Cwd != repo {
		t.Errorf("team.goal.submit cwd = %q, want the repo's path", cmd.Cwd)
	}

	// "@kit ..." to all goes to Kit, without the "@kit".
	c.sendRaw(string(readVector(t, "user.message")))
	if a := c.ackOf("c13"); a.body["ok"] != true {
		t.Errorf("user.message ack = %s", a.raw)
	}
	if cmd := f.nextCmd(t, protocol.TypeTeamMessage).(*protocol.TeamMessage); cmd.To != kitID || cmd.Text != "please also cover #tags with emoji" || cmd.GoalID != "g1" {
		t.Errorf("team.message = %+v", cmd)
	}
	// To everyone without a name: the daemon's "all" (the lead).
	c.send(map[string]any{"v": 1, "type": "user.message", "id": "m2", "to": "all", "text": "how is it going?"})
	c.ackOf("m2")
	if cmd := f.nextCmd(t, protocol.TypeTeamMessage).(*protocol.TeamMessage); cmd.To != "all" || cmd.Text != "how is it going?" {
		t.Errorf("team.message = %+v", cmd)
	}
	// To an agent by id.
	c.send(map[string]any{"v": 1, "type": "user.message", "id": "m3", "to": "juniper", "text": "hi"})
	c.ackOf("m3")
	if cmd := f.nextCmd(t, protocol.TypeTeamMessage).(*protocol.TeamMessage); cmd.To != juniperID {
		t.Errorf("team.message = %+v", cmd)
	}

	// decision.answer by label, then by index.
	c.sendRaw(string(readVector(t, "decision.answer")))
	c.ackOf("c14")
	if cmd := f.nextCmd(t, protocol.TypeTeamDecisionAnswer).(*protocol.TeamDecisionAnswer); cmd.DecisionID != "d2" || cmd.Option != wire.OptionRequestChanges ||
		cmd.Text != "Export TAG_RE so format.ts can reuse it." || cmd.Index != nil {
		t.Errorf("team.decision.answer = %+v", cmd)
	}
	c.sendRaw(`{"v":1,"type":"decision.answer","id":"i0","decisionId":"d2","option":2}`)
	c.ackOf("i0")
	if cmd := f.nextCmd(t, protocol.TypeTeamDecisionAnswer).(*protocol.TeamDecisionAnswer); cmd.Option != wire.OptionReject {
		t.Errorf("by index 2: option %q, want %q", cmd.Option, wire.OptionReject)
	}
	// An index past the options, a label it does not offer, an unknown
	// decision: error and a failed ack, nothing sent to the daemon.
	for _, bad := range []string{
		`{"v":1,"type":"decision.answer","id":"b1","decisionId":"d2","option":3}`,
		`{"v":1,"type":"decision.answer","id":"b2","decisionId":"d2","option":"merge"}`,
		`{"v":1,"type":"decision.answer","id":"b3","decisionId":"d9","option":"Merge"}`,
	} {
		c.sendRaw(bad)
		var m map[string]any
		_ = json.Unmarshal([]byte(bad), &m)
		e := c.next("error", nil)
		if e.body["re"] != m["id"] {
			t.Errorf("error = %s", e.raw)
		}
		if a := c.ackOf(m["id"].(string)); a.body["ok"] != false || a.body["error"] == "" {
			t.Errorf("ack = %s", a.raw)
		}
	}

	c.sendRaw(string(readVector(t, "task.action")))
	c.ackOf("c15")
	if cmd := f.nextCmd(t, protocol.TypeTeamTaskAction).(*protocol.TeamTaskAction); cmd.TaskID != "t5" || cmd.Action != "reassign" || cmd.Arg != wrenID {
		t.Errorf("team.task.action = %+v", cmd)
	}
	c.sendRaw(`{"v":1,"type":"task.action","id":"p1","taskId":"t2","action":"prioritize"}`)
	c.ackOf("p1")
	if cmd := f.nextCmd(t, protocol.TypeTeamTaskAction).(*protocol.TeamTaskAction); cmd.Action != "prioritize" || cmd.Arg != "3" {
		t.Errorf("prioritize without a priority = %+v, want arg 3 (above every task)", cmd)
	}

	// pause: the agent's turn is aborted (attach, abort, detach).
	c.sendRaw(string(readVector(t, "agent.action")))
	up := c.next("agent.upsert", func(f frame) bool { return f.body["agent"].(map[string]any)["id"] == "juniper" })
	if up.body["agent"].(map[string]any)["paused"] != true {
		t.Errorf("paused juniper = %s", up.raw)
	}
	c.ackOf("c16")
	if cmd := f.nextCmd(t, protocol.TypeAgentAttach).(*protocol.AgentAttach); cmd.AgentID != juniperID || cmd.Role != protocol.RoleInteractive {
		t.Errorf("agent.attach = %+v", cmd)
	}
	if cmd := f.nextCmd(t, protocol.TypeAbort); cmd.Head().AgentID != juniperID {
		t.Errorf("abort = %+v", cmd)
	}
	f.nextCmd(t, protocol.TypeAgentDetach)
	// stop: agent.terminate, off shift.
	c.send(map[string]any{"v": 1, "type": "agent.action", "id": "s1", "agentId": "juniper", "action": "stop"})
	up = c.next("agent.upsert", func(f frame) bool { return f.body["agent"].(map[string]any)["id"] == "juniper" })
	if a := up.body["agent"].(map[string]any); a["active"] != false || a["station"] != "lounge" {
		t.Errorf("stopped juniper = %s", up.raw)
	}
	c.ackOf("s1")
	if cmd := f.nextCmd(t, protocol.TypeAgentTerminate); cmd.Head().AgentID != juniperID {
		t.Errorf("agent.terminate = %+v", cmd)
	}
	// spawn with a task: back on shift, the task reassigned to it.
	c.send(map[string]any{"v": 1, "type": "agent.action", "id": "s2", "agentId": "juniper", "action": "spawn", "arg": "t7"})
	c.ackOf("s2")
	if cmd := f.nextCmd(t, protocol.TypeTeamTaskAction).(*protocol.TeamTaskAction); cmd.TaskID != "t7" || cmd.Action != "reassign" || cmd.Arg != juniperID {
		t.Errorf("spawn = %+v", cmd)
	}
	// resume of the lead: a prompt to continue.
	c.send(map[string]any{"v": 1, "type": "agent.action", "id": "r1", "agentId": "marlow", "action": "resume"})
	c.ackOf("r1")
	if cmd := f.nextCmd(t, protocol.TypePrompt).(*protocol.Prompt); cmd.AgentID != leadID || cmd.Message != resumePrompt {
		t.Errorf("prompt = %+v", cmd)
	}

	c.sendRaw(string(readVector(t, "diff.request")))
	c.next("diff", nil)
	c.ackOf("c17")
	// An agent id resolves to the agent's worktree.
	c.sendRaw(`{"v":1,"type":"diff.request","requestId":"r8","repoId":"demo-app","worktree":"kit"}`)
	if d := c.next("diff", nil); d.body["requestId"] != "r8" || d.body["worktree"] != "kit" || d.body["error"] != nil {
		t.Errorf("diff by agent = %s", d.raw)
	}
	if cmd := f.nextCmd(t, protocol.TypeWorkspaceDiff).(*protocol.WorkspaceDiff); cmd.WorkspaceID != "kit-t2" {
		t.Errorf("workspace.diff = %+v", cmd)
	}
	// An unknown worktree: a diff carrying the error.
	c.sendRaw(`{"v":1,"type":"diff.request","id":"c18","requestId":"r9","repoId":"demo-app","worktree":"nobody"}`)
	if d := c.next("diff", nil); d.body["error"] == nil || len(d.body["files"].([]any)) != 0 {
		t.Errorf("diff of nothing = %s", d.raw)
	}
	if a := c.ackOf("c18"); a.body["ok"] != false {
		t.Errorf("ack = %s", a.raw)
	}

	// The example's repo.add names a Windows path: here it is not an
	// absolute path, refused with error and a failed ack.
	c.sendRaw(string(readVector(t, "repo.add")))
	if e := c.next("error", nil); e.body["re"] != "c18" || !strings.Contains(e.body["message"].(string), "not a git repository") {
		t.Errorf("repo.add of the example: %s", e.raw)
	}
	if a := c.ackOf("c18"); a.body["ok"] != false {
		t.Errorf("ack = %s", a.raw)
	}

	// A failure the daemon reports reaches the client as error + ack.
	f.mu.Lock()
	f.answer = func(cmd protocol.Command) (any, error) {
		if _, ok := cmd.(*protocol.TeamTaskAction); ok {
			return nil, protocol.Errorf(protocol.CodeNotFound, "no task t404")
		}
		return nil, nil
	}
	f.mu.Unlock()
	c.send(map[string]any{"v": 1, "type": "task.action", "id": "x1", "taskId": "t404", "action": "cancel"})
	if e := c.next("error", nil); !strings.Contains(e.body["message"].(string), "no task t404") || e.body["re"] != "x1" {
		t.Errorf("error = %s", e.raw)
	}
	c.ackOf("x1")
}

// TestRejectedHandshakes: any Origin header (a value, "null", empty) and a
// Host other than 127.0.0.1, localhost or [::1] are refused with HTTP 401
// before the upgrade; the loopback hosts, with or without a port, are
// served.
func TestRejectedHandshakes(t *testing.T) {
	f := newFakeDaemon(t)
	s := startServer(t, f, nil)
	_, port, _ := strings.Cut(s.Addr(), ":")
	dial := func(host string, origin []string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		opts := &websocket.DialOptions{Host: host, HTTPHeader: http.Header{}}
		if origin != nil {
			opts.HTTPHeader["Origin"] = origin
		}
		ws, resp, err := websocket.Dial(ctx, "ws://"+s.Addr()+"/", opts)
		if err == nil {
			ws.CloseNow()
		}
		return resp, err
	}
	for _, tc := range []struct {
		name   string
		host   string
		origin []string
	}{
		{"origin", "", []string{"https://evil.example"}},
		{"origin null", "", []string{"null"}},
		{"origin empty", "", []string{""}},
		{"origin of the server itself", "", []string{"http://" + s.Addr()}},
		{"host elsewhere", "evil.example", nil},
		{"host elsewhere with port", "evil.example:" + port, nil},
		{"host with a loopback prefix", "127.0.0.1.evil.example", nil},
		{"host of the LAN", "192.168.1.2:" + port, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := dial(tc.host, tc.origin)
			if err == nil {
				t.Fatal("the upgrade succeeded")
			}
			if resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("response %v, err %v; want 401", resp, err)
			}
		})
	}
	for _, host := range []string{"", "127.0.0.1", "localhost", "localhost:" + port, "[::1]:" + port, "[::1]"} {
		t.Run("host "+host, func(t *testing.T) {
			if _, err := dial(host, nil); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestBadFrames: what the decoder refuses gets error (and a failed ack when
// the id could be read); the connection stays usable.
func TestBadFrames(t *testing.T) {
	f := newFakeDaemon(t)
	s := startServer(t, f, nil)
	c := dialWS(t, s.Addr())
	for _, tc := range []struct {
		frame string
		id    string
	}{
		{`{not json`, ""},
		{`[1,2]`, ""},
		{`{"v":2,"type":"hello","modVersion":"x","protocol":1}`, ""},
		{`{"v":1,"type":"hello","id":"h","modVersion":"x","protocol":2}`, "h"},
		{`{"v":1,"type":"snapshot","id":"u"}`, "u"},
		{`{"v":1,"type":"goal.submit","id":"g"}`, "g"},
		{`{"v":1,"type":"task.action","id":"e","taskId":"t1","action":"explode"}`, "e"},
		{`{"v":1,"type":"task.action","id":"w","taskId":"t1","action":"prioritize","arg":5}`, "w"},
	} {
		c.sendRaw(tc.frame)
		e := c.next("error", nil)
		if msg, _ := e.body["message"].(string); msg == "" {
			t.Errorf("%s: error without a message: %s", tc.frame, e.raw)
		}
		if tc.id != "" {
			if e.body["re"] != tc.id {
				t.Errorf("%s: error re = %v", tc.frame, e.body["re"])
			}
			if a := c.read(); a.typ != "ack" || a.body["re"] != tc.id || a.body["ok"] != false {
				t.Errorf("%s: after the error %s, want a failed ack", tc.frame, a.raw)
			}
		}
	}
	// A binary frame is refused too.
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageBinary, []byte(`{"v":1,"type":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	c.next("error", nil)
	// Still served: hello → snapshot, and its ack.
	c.sendRaw(`{"v":1,"type":"hello","id":"ok","modVersion":"0.1.0","protocol":1}`)
	c.next("snapshot", nil)
	c.ackOf("ok")
}

// TestHeartbeat: the server pings every Heartbeat (here a short one).
func TestHeartbeat(t *testing.T) {
	f := newFakeDaemon(t)
	s := startServer(t, f, func(c *Config) { c.Heartbeat = 5e6 }) // 5 ms
	pings := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+s.Addr()+"/", &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool {
			select {
			case pings <- struct{}{}:
			default:
			}
			return true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ctx = ws.CloseRead(ctx) // reads (and answers) control frames
	for i := 0; i < 3; i++ {
		select {
		case <-pings:
		case <-ctx.Done():
			t.Fatalf("ping %d never came", i+1)
		}
	}
}

// TestRepoAdd: repo.add registers a git checkout (its top), durably; a
// path outside git is refused; a restarted server lists it.
func TestRepoAdd(t *testing.T) {
	repo := gitRepo(t, "pocket-notes")
	f := newFakeDaemon(t)
	reposFile := filepath.Join(t.TempDir(), "repos.json")
	s := startServer(t, f, func(c *Config) { c.ReposFile = reposFile })
	c := dialWS(t, s.Addr())
	if snap := c.hello(); len(snap.Repos) != 0 {
		t.Fatalf("repos = %+v", snap.Repos)
	}
	sub := filepath.Join(repo, "src")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	c.send(map[string]any{"v": 1, "type": "repo.add", "id": "c18", "path": sub})
	up := c.next("repo.upsert", nil)
	checkShapeNoWorktrees(t, up)
	r := up.body["repo"].(map[string]any)
	if r["id"] != "pocket-notes" || r["path"] != repo || r["branch"] != "main" || r["head"] == "" || r["dirty"] != false {
		t.Errorf("repo.upsert = %s", up.raw)
	}
	a := c.ackOf("c18")
	if res, _ := a.body["result"].(map[string]any); a.body["ok"] != true || res["repoId"] != "pocket-notes" {
		t.Errorf("ack = %s", a.raw)
	}
	b, err := os.ReadFile(reposFile)
	if err != nil || !strings.Contains(string(b), repo) {
		t.Fatalf("repos file = %s, %v", b, err)
	}
	// Adding it again answers the same id.
	c.send(map[string]any{"v": 1, "type": "repo.add", "id": "again", "path": repo})
	if a := c.ackOf("again"); a.body["result"].(map[string]any)["repoId"] != "pocket-notes" {
		t.Errorf("ack = %s", a.raw)
	}
	// Not a repository; not absolute.
	for _, p := range []string{t.TempDir(), "relative/path"} {
		c.send(map[string]any{"v": 1, "type": "repo.add", "id": "bad", "path": p})
		c.next("error", nil)
		if a := c.ackOf("bad"); a.body["ok"] != false {
			t.Errorf("repo.add %s: ack = %s", p, a.raw)
		}
	}
	// goal.submit without a repoId goes to the most recent repo; an
	// unknown repoId is refused.
	c.send(map[string]any{"v": 1, "type": "goal.submit", "id": "g", "text": "x"})
	c.ackOf("g")
	if cmd := f.nextCmd(t, protocol.TypeTeamGoalSubmit).(*protocol.TeamGoalSubmit); cmd.Cwd != repo {
		t.Errorf("cwd = %q", cmd.Cwd)
	}
	c.send(map[string]any{"v": 1, "type": "goal.submit", "id": "g2", "text": "x", "repoId": "nope"})
	if a := c.ackOf("g2"); a.body["ok"] != false {
		t.Errorf("ack = %s", a.raw)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, f, func(c *Config) { c.ReposFile = reposFile })
	c2 := dialWS(t, s2.Addr())
	snap := c2.hello()
	if len(snap.Repos) != 1 || snap.Repos[0].Path != repo || snap.Repos[0].ID != "pocket-notes" {
		t.Errorf("after a restart, repos = %+v", snap.Repos)
	}
}

// checkShapeNoWorktrees is checkShape for a repo.upsert of a repository
// without worktrees (the example has one).
func checkShapeNoWorktrees(t *testing.T, f frame) {
	t.Helper()
	if _, err := wire.DecodeServer(f.raw); err != nil {
		t.Fatal(err)
	}
	r := f.body["repo"].(map[string]any)
	for _, k := range []string{"id", "name", "path", "branch", "head", "dirty", "worktrees", "ci"} {
		if _, ok := r[k]; !ok {
			t.Errorf("repo.upsert lacks %s: %s", k, f.raw)
		}
	}
}

// TestBroadcast: every client that said hello gets every change; a client
// that did not say hello gets none.
func TestBroadcast(t *testing.T) {
	repo := gitRepo(t, "demo-app")
	f := newFakeDaemon(t)
	exampleWorld(f, repo)
	s := startServer(t, f, nil)
	a, b := dialWS(t, s.Addr()), dialWS(t, s.Addr())
	a.hello()
	b.hello()
	quiet := dialWS(t, s.Addr())
	f.emit(protocol.TeamTaskChanged{Header: protocol.Header{Type: protocol.TypeTeamTaskChanged}, Task: exampleTask(9)})
	for _, c := range []*wsClient{a, b} {
		if u := c.next("task.upsert", nil); u.body["task"].(map[string]any)["updatedAt"] != float64(exampleTask(9).UpdatedAt) {
			t.Errorf("task.upsert = %s", u.raw)
		}
	}
	// An older revision arriving late changes nothing.
	f.emit(protocol.TeamTaskChanged{Header: protocol.Header{Type: protocol.TypeTeamTaskChanged}, Task: exampleTask(5)})
	quiet.sendRaw(`{"v":1,"type":"hello","modVersion":"0.1.0","protocol":1}`)
	snap := quiet.next("snapshot", nil)
	var got wire.Snapshot
	m, _ := wire.DecodeServer(snap.raw)
	got = m.(wire.Snapshot)
	if i := slices.IndexFunc(got.Tasks, func(t wire.Task) bool { return t.ID == "t2" }); i < 0 || got.Tasks[i].UpdatedAt != exampleTask(9).UpdatedAt {
		t.Errorf("t2 = %+v, want revision 9's", got.Tasks)
	}
}

// TestCheckListen: a non-loopback listen address is refused unless
// allowed.
func TestCheckListen(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:7878", "127.0.0.2:0", "[::1]:7878", "localhost:7878"} {
		if err := CheckListen(ok, false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:7878", ":7878", "192.168.1.2:7878", "[::]:7878", "example.com:7878"} {
		if err := CheckListen(bad, false); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("%s: %v, want ErrNotLoopback", bad, err)
		}
		if err := CheckListen(bad, true); err != nil {
			t.Errorf("%s allowed: %v", bad, err)
		}
	}
	if err := CheckListen("no-port", false); err == nil {
		t.Error("no-port accepted")
	}
	if _, err := New(Config{Listen: "0.0.0.0:0", Socket: "/x"}); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("New: %v", err)
	}
}

// TestLargeFrame: a goal's text past coder/websocket's 32 KiB default is
// read whole (up to MaxFrame).
func TestLargeFrame(t *testing.T) {
	f := newFakeDaemon(t)
	s := startServer(t, f, nil)
	c := dialWS(t, s.Addr())
	text := strings.Repeat("x", 200<<10)
	c.send(map[string]any{"v": 1, "type": "goal.submit", "id": "big", "text": text})
	if a := c.ackOf("big"); a.body["ok"] != true {
		t.Fatalf("ack = %.200s", a.raw)
	}
	if cmd := f.nextCmd(t, protocol.TypeTeamGoalSubmit).(*protocol.TeamGoalSubmit); cmd.Text != text {
		t.Errorf("the daemon got %d bytes of text, want %d", len(cmd.Text), len(text))
	}
}

// TestErrorEchoBound: an error repeats at most 64 bytes of what the client
// sent (docs/agentcraft.md §9 C15).
func TestErrorEchoBound(t *testing.T) {
	f := newFakeDaemon(t)
	s := startServer(t, f, nil)
	c := dialWS(t, s.Addr())
	long := strings.Repeat("é", 100)
	c.send(map[string]any{"v": 1, "type": "user.message", "to": long, "text": "hi"})
	e := c.next("error", nil)
	msg := e.body["message"].(string)
	if !strings.HasPrefix(msg, `no agent named "`) || len(msg) > len(`no agent named ""`)+echoMax+len("…") {
		t.Errorf("error message = %q", msg)
	}
}

// TestStopRefused: a stop the daemon refuses takes its mark back: the
// agent is on shift again, and the client gets error and a failed ack.
func TestStopRefused(t *testing.T) {
	repo := gitRepo(t, "demo-app")
	f := newFakeDaemon(t)
	exampleWorld(f, repo)
	f.mu.Lock()
	f.answer = func(cmd protocol.Command) (any, error) {
		if _, ok := cmd.(*protocol.AgentTerminate); ok {
			return nil, protocol.Errorf(protocol.CodeConflict, "busy")
		}
		return nil, nil
	}
	f.mu.Unlock()
	s := startServer(t, f, nil)
	c := dialWS(t, s.Addr())
	c.hello()
	c.send(map[string]any{"v": 1, "type": "agent.action", "id": "s", "agentId": "kit", "action": "stop"})
	isKit := func(f frame) bool { return f.body["agent"].(map[string]any)["id"] == "kit" }
	if u := c.next("agent.upsert", isKit); u.body["agent"].(map[string]any)["active"] != false {
		t.Errorf("stopping kit = %s", u.raw)
	}
	if u := c.next("agent.upsert", isKit); u.body["agent"].(map[string]any)["active"] != true {
		t.Errorf("after the refusal kit = %s", u.raw)
	}
	c.next("error", nil)
	if a := c.ackOf("s"); a.body["ok"] != false {
		t.Errorf("ack = %s", a.raw)
	}
}
