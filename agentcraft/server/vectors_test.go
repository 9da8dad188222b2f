package server

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// gitRepo makes a real git repository named name with one commit on main.
func gitRepo(t *testing.T, name string) string {
	t.Helper()
	git := testhost.Tool(t, "git")
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		cmd := exec.Command(git, append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", ".")
	run("commit", "-q", "-m", "init")
	return dir
}

// The Shard records of the dialect's example world (docs/agentcraft.md):
// Marlow leads, Kit builds t2 in worktree kit-t2, a merge decision d2
// waits.
const (
	leadID    = "agent-01lead"
	kitID     = "agent-02kit"
	juniperID = "agent-03juniper"
	wrenID    = "agent-04wren"
)

// exampleWorld fills f with the example's records in repo.
func exampleWorld(f *fakeDaemon, repo string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents = []protocol.AgentInfo{
		{AgentID: leadID, DisplayName: "marlow", Cwd: repo, Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeRunning, CreatedAt: 1},
		{AgentID: kitID, Alias: "kit", ParentAgentID: leadID, Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeRunning, CreatedAt: 2},
		{AgentID: juniperID, Alias: "juniper", ParentAgentID: leadID, Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeRunning, CreatedAt: 3},
		{AgentID: wrenID, Alias: "wren", ParentAgentID: leadID, Status: protocol.StatusIdle, RuntimeState: protocol.RuntimeStopped, CreatedAt: 4},
	}
	f.goals = []protocol.TeamGoal{{GoalID: "g1", Text: "Add #tags to pocket-notes", Status: protocol.GoalActive, LeadAgentID: leadID,
		Cwd: repo, CostUSD: 0.42, Progress: 0.39, CreatedAt: 1790850000000, UpdatedAt: 1790850120000}}
	f.tasks = []protocol.TeamTask{exampleTask(3)}
	f.decisions = []protocol.TeamDecision{{DecisionID: "d2", GoalID: "g1", TaskID: "t2", AgentID: leadID, Kind: protocol.DecisionKindMerge,
		Question: `Merge t2 "Tag parser module (src/tags.ts)" (agentcraft/kit/t2-tag-parser-module) into main?`,
		Context:  "2 files, +45 -0 | tests: pass", Options: wire.MergeOptions(), State: protocol.DecisionOpen,
		CreatedAt: 1790850120000, UpdatedAt: 1790850120000}}
	f.memory = []protocol.TeamMemoryEntry{{MemoryID: "mem-1", Scope: protocol.MemoryScopeShared, Key: "plan", Title: "Plan: #tags for pocket-notes",
		Body: "# Plan\n\n- t2 Tag parser module - Kit\n- t3 `list --tag` - Juniper", Author: leadID, Updated: 1790850030000}}
	f.feed = []protocol.TeamFeedItem{{FeedID: "f1", GoalID: "g1", Kind: protocol.FeedPlan, Text: "Marlow planned the goal into 9 tasks",
		AgentID: leadID, At: 1790850005000}}
	f.diff = exampleDiff()
}

// exampleTask is t2 at a revision.
func exampleTask(rev int64) protocol.TeamTask {
	return protocol.TeamTask{TaskID: "t2", GoalID: "g1", Title: "Tag parser module (src/tags.ts)",
		Description: "parseTags/hasTag/normalizeTag with unit tests.", State: protocol.TaskDoing, Priority: 2, Deps: []string{"t1"},
		Assignee: kitID, CreatedBy: leadID, WorkspaceID: "kit-t2", Branch: "agentcraft/kit/t2-tag-parser-module",
		Worktree: "/home/you/.shard/worktrees/demo-app/kit-t2", Diff: &protocol.TeamDiffStats{Files: 2, Additions: 45, Ahead: 1},
		CI: protocol.TeamCI{Status: protocol.CIFail}, CreatedAt: 1790850000000, UpdatedAt: 1790850060000 + rev, Revision: rev}
}

// exampleDiff is the dialect's diff example as workspace.diff answers it.
func exampleDiff() protocol.WorkspaceDiffData {
	var d protocol.WorkspaceDiffData
	b, err := os.ReadFile(filepath.Join("..", "wire", "testdata", "diff.json"))
	if err != nil {
		panic(err)
	}
	var w wire.Diff
	if err := json.Unmarshal(b, &w); err != nil {
		panic(err)
	}
	d.Branch, d.IntegrationTarget, d.Truncated = w.Branch, w.Base, w.Truncated
	d.Stats = protocol.DiffStats{Files: w.Stats.Files, Additions: w.Stats.Additions, Deletions: w.Stats.Deletions}
	for _, f := range w.Files {
		pf := protocol.DiffFile{Path: f.Path, OldPath: f.OldPath, Status: protocol.DiffFileStatus(f.Status), Binary: f.Binary,
			Additions: f.Additions, Deletions: f.Deletions}
		for _, h := range f.Hunks {
			ph := protocol.DiffHunk{Header: h.Header, OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines}
			for _, l := range h.Lines {
				pl := protocol.DiffLine{Kind: protocol.DiffLineKind(l.Kind), Text: l.Text}
				if l.OldNo != nil {
					pl.OldNo = *l.OldNo
				}
				if l.NewNo != nil {
					pl.NewNo = *l.NewNo
				}
				ph.Lines = append(ph.Lines, pl)
			}
			pf.Hunks = append(pf.Hunks, ph)
		}
		d.Files = append(d.Files, pf)
	}
	return d
}

// readVector reads one of the dialect's examples.
func readVector(t *testing.T, typ string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "wire", "testdata", typ+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// covers reports where got lacks a field of want or holds another JSON
// kind there: every field of the example, at every level (the first
// element of each list, which some element must cover), must be in what the server produced.
func covers(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T, want an object", path, got)}
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"."+k+": missing")
				continue
			}
			out = append(out, covers(path+"."+k, wv, gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T, want a list", path, got)}
		}
		if len(w) == 0 {
			return nil
		}
		if len(g) == 0 {
			return []string{path + ": empty, want elements"}
		}
		// Some element must have the example's first element's shape.
		var first []string
		for i, gv := range g {
			out := covers(fmt.Sprintf("%s[%d]", path, i), w[0], gv)
			if len(out) == 0 {
				return nil
			}
			if i == 0 {
				first = out
			}
		}
		return first
	default:
		if reflect.TypeOf(want) != reflect.TypeOf(got) {
			return []string{fmt.Sprintf("%s: %T, want %T", path, got, want)}
		}
		return nil
	}
}

// checkShape fails unless f has the shape of the dialect's example of its
// type, field for field, and holds nothing the dialect does not define
// (decoding it strictly and encoding it again gives the same JSON).
func checkShape(t *testing.T, f frame) {
	t.Helper()
	var want any
	if err := json.Unmarshal(readVector(t, f.typ), &want); err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(f.raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, p := range covers(f.typ, want, got) {
		t.Errorf("%s differs from the example: %s\n got: %s", f.typ, p, f.raw)
	}
	m, err := wire.DecodeServer(f.raw)
	if err != nil {
		t.Fatalf("%s: %v", f.typ, err)
	}
	again, err := wire.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	var back any
	_ = json.Unmarshal(again, &back)
	if !reflect.DeepEqual(back, got) {
		t.Errorf("%s carries what the dialect does not define:\n got: %s\nkept: %s", f.typ, f.raw, again)
	}
}

// sameValue fails unless f is, as a JSON value, the example.
func sameValue(t *testing.T, f frame) {
	t.Helper()
	var want, got any
	_ = json.Unmarshal(readVector(t, f.typ), &want)
	_ = json.Unmarshal(f.raw, &got)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s differs from the example\n got: %s\nwant: %s", f.typ, f.raw, readVector(t, f.typ))
	}
}

// TestServerVectors produces every server message of the dialect from
// Shard records and events, and checks each against the dialect's example
// of it: the snapshot after hello, then the upserts, log, say, notify,
// foreman status, ack, error and diff.
func TestServerVectors(t *testing.T) {
	repo := gitRepo(t, "demo-app")
	f := newFakeDaemon(t)
	exampleWorld(f, repo)
	s := startServer(t, f, func(c *Config) {
		c.Foreman = wire.ForemanStatus{Backend: wire.BackendClaude, Auth: wire.AuthOK, Account: "fal · Claude Enterprise",
			Message: "Claude (lead opus, workers sonnet)"}
	})
	c := dialWS(t, s.Addr())
	snap := c.hello()
	if len(snap.Agents) != 4 || snap.Agents[0].ID != "marlow" || snap.Agents[0].Role != wire.RoleLead || snap.Agents[1].ID != "kit" {
		t.Fatalf("snapshot agents = %+v", snap.Agents)
	}

	// An edit by Kit: agent.log and agent.upsert (editing at the desk).
	f.emit(protocol.AgentActivity{Header: protocol.Header{Type: protocol.TypeAgentActivity, AgentID: kitID},
		Timestamp: 1790850090000, Phase: protocol.PhaseTool, Status: protocol.StatusStreaming, ToolName: "edit"})
	checkShape(t, c.next("agent.log", nil))
	up := c.next("agent.upsert", nil)
	checkShape(t, up)
	if a := up.body["agent"].(map[string]any); a["state"] != "editing" || a["station"] != "desk" || a["taskId"] != "t2" || a["worktree"] != "kit-t2" {
		t.Errorf("kit editing: %s", up.raw)
	}

	// hello again: the snapshot now has Kit's log.
	c.sendRaw(`{"v":1,"type":"hello","modVersion":"0.1.0","protocol":1}`)
	sf := c.next("snapshot", nil)
	checkShape(t, sf)

	// A task changes (new diff stat): task.upsert and repo.upsert.
	t2 := exampleTask(4)
	t2.Diff = &protocol.TeamDiffStats{Files: 2, Additions: 45, Ahead: 2}
	f.emit(protocol.TeamTaskChanged{Header: protocol.Header{Type: protocol.TypeTeamTaskChanged}, Task: t2})
	checkShape(t, c.next("task.upsert", nil))
	rf := c.next("repo.upsert", nil)
	checkShape(t, rf)
	if wt := rf.body["repo"].(map[string]any)["worktrees"].([]any)[0].(map[string]any); wt["ahead"] != 2.0 || wt["id"] != "kit-t2" || wt["agentId"] != "kit" {
		t.Errorf("repo.upsert worktree = %v", wt)
	}

	// A decision opens: decision.upsert and notify.
	d3 := protocol.TeamDecision{DecisionID: "d3", GoalID: "g1", TaskID: "t2", AgentID: leadID, Kind: protocol.DecisionKindMerge,
		Question: "Merge t2?", Context: "2 files, +45 -0 | tests: pass", Options: wire.MergeOptions(), State: protocol.DecisionOpen,
		CreatedAt: 1790850130000, UpdatedAt: 1790850130000}
	f.emit(protocol.TeamDecisionChanged{Header: protocol.Header{Type: protocol.TypeTeamDecisionChanged}, Decision: d3})
	checkShape(t, c.next("decision.upsert", nil))
	n := c.next("notify", nil)
	checkShape(t, n)
	if n.body["level"] != "need_user" || n.body["decisionId"] != "d3" {
		t.Errorf("notify = %s", n.raw)
	}

	f.emit(protocol.TeamMemoryChanged{Header: protocol.Header{Type: protocol.TypeTeamMemoryChanged}, Entry: protocol.TeamMemoryEntry{
		MemoryID: "mem-1", Scope: protocol.MemoryScopeShared, Key: "plan", Title: "Plan", Body: "# Plan", Author: leadID, Updated: 1790850031000}})
	m := c.next("memory.upsert", nil)
	checkShape(t, m)
	if e := m.body["entry"].(map[string]any); e["id"] != "shared/plan" || e["author"] != "marlow" {
		t.Errorf("memory.upsert = %s", m.raw)
	}

	// The goal moves on and spends more: goal.upsert and foreman.status.
	f.emit(protocol.TeamGoalChanged{Header: protocol.Header{Type: protocol.TypeTeamGoalChanged}, Goal: protocol.TeamGoal{GoalID: "g1",
		Text: "Add #tags to pocket-notes", Status: protocol.GoalActive, LeadAgentID: leadID, Cwd: repo, CostUSD: 0.5, Progress: 0.56,
		CreatedAt: 1790850000000, UpdatedAt: 1790850200000}})
	g := c.next("goal.upsert", nil)
	checkShape(t, g)
	if g.body["goal"].(map[string]any)["repoId"] != "demo-app" {
		t.Errorf("goal.upsert = %s", g.raw)
	}
	checkShape(t, c.next("foreman.status", nil))

	f.emit(protocol.TeamFeedAdded{Header: protocol.Header{Type: protocol.TypeTeamFeedAdded}, Item: protocol.TeamFeedItem{FeedID: "f2",
		Kind: protocol.FeedMerge, Text: "Merged agentcraft/kit/t2-tag-parser-module into main (7cf1999, 2 files)", AgentID: leadID, At: 1790850210000}})
	fa := c.next("feed.add", nil)
	sameValue(t, fa) // Shard's record gives exactly the example
	// ... and the lead's monitor has it as a result.
	if l := c.next("agent.log", nil); l.body["agentId"] != "marlow" || l.body["entries"].([]any)[0].(map[string]any)["kind"] != "result" {
		t.Errorf("agent.log of a merge = %s", l.raw)
	}

	f.emit(protocol.TeamFeedAdded{Header: protocol.Header{Type: protocol.TypeTeamFeedAdded}, Item: protocol.TeamFeedItem{FeedID: "f3",
		Kind: protocol.FeedMessage, Text: "parseTags() is in src/tags.ts - you are unblocked once it merges.", AgentID: kitID, To: juniperID, At: 1790850095000}})
	sameValue(t, c.next("agent.say", nil))

	// An error in the feed is a warning toast.
	f.emit(protocol.TeamFeedAdded{Header: protocol.Header{Type: protocol.TypeTeamFeedAdded}, Item: protocol.TeamFeedItem{FeedID: "f4",
		Kind: protocol.FeedError, Text: "beta blocked: the worker could not start", At: 1790850096000}})
	if n := c.next("notify", nil); n.body["level"] != "warn" || n.body["text"] != "beta blocked: the worker could not start" {
		t.Errorf("notify = %s", n.raw)
	}

	// goal.submit with an id: ack {re, ok, result: {goalId}}.
	c.sendRaw(string(readVector(t, "goal.submit")))
	sameValue(t, c.next("ack", nil))
	if cmd := f.nextCmd(t, protocol.TypeTeamGoalSubmit).(*protocol.TeamGoalSubmit); cmd.Cwd != repo || cmd.Text != "Add a --version flag to the CLI" {
		t.Errorf("team.goal.submit = %+v", cmd)
	}

	// A message to an agent nobody has: the example's error.
	c.sendRaw(`{"v":1,"type":"user.message","id":"c13","to":"all","text":"@kitt please also cover #tags with emoji"}`)
	sameValue(t, c.next("error", nil))
	if a := c.next("ack", nil); a.body["ok"] != false || a.body["re"] != "c13" {
		t.Errorf("ack = %s", a.raw)
	}

	// diff.request: the diff goes to the requester, as the example.
	c.sendRaw(string(readVector(t, "diff.request")))
	sameValue(t, c.next("diff", nil))
	if cmd := f.nextCmd(t, protocol.TypeWorkspaceDiff).(*protocol.WorkspaceDiff); cmd.WorkspaceID != "kit-t2" {
		t.Errorf("workspace.diff = %+v", cmd)
	}
}
