package main

import (
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// zero is a fresh value of v's type (decoding into a reused value keeps
// the fields a record omits).
func zero[T any](T) T {
	var z T
	return z
}

// ok fails the test unless r exited 0.
func ok(t *testing.T, r result) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// wantFail fails the test unless r exited code with stderr exactly.
func wantFail(t *testing.T, r result, code int, stderr string) {
	t.Helper()
	if r.code != code || r.stderr != stderr {
		t.Errorf("exit %d stderr %q, want %d %q (stdout %q)", r.code, r.stderr, code, stderr, r.stdout)
	}
}

func TestTeamSubmit(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "submit", "--cwd", "/src/app", "--cost-limit", "2.5", "--runtime", "sim",
		"--provider", "p", "--model", "m", "--request-id", "req-1", "add", "a", "flag"))
	if r.stdout != tid("goal", "new")+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	var m protocol.TeamGoalSubmit
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamGoalSubmit)[0], &m)
	if m.Text != "add a flag" || m.Cwd != "/src/app" || m.CostLimitUSD == nil || *m.CostLimitUSD != 2.5 || m.Runtime != "sim" ||
		m.Provider != "p" || m.Model != "m" || m.RequestID != "req-1" || m.AgentID != "" {
		t.Errorf("sent %+v", m)
	}

	// The goal from stdin; the cwd defaults to the current directory; no
	// limit unless given.
	r = ok(t, runCtl(t, nil, f.path, "- a: sim: say a\n- b: sim: say b (after 1)\n", "team", "submit", "-f", "-", "-o", "json"))
	var data protocol.TeamGoalData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || data.Goal.Status != protocol.GoalPlanning {
		t.Errorf("json %q: %v", r.stdout, err)
	}
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamGoalSubmit)[1], &m)
	wd, _ := os.Getwd()
	if m.Text != "- a: sim: say a\n- b: sim: say b (after 1)\n" || m.Cwd != wd || m.CostLimitUSD != nil {
		t.Errorf("sent %+v", m)
	}

	// A file.
	goalFile := t.TempDir() + "/goal.md"
	if err := os.WriteFile(goalFile, []byte("from a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, runCtl(t, nil, f.path, "", "team", "submit", "--file", goalFile))
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamGoalSubmit)[2], &m)
	if m.Text != "from a file" {
		t.Errorf("sent %+v", m)
	}

	// The daemon's refusal: its code and message, exit 1.
	wantFail(t, runCtl(t, nil, f.path, "", "team", "submit", "--cwd", "/not/a/repo", "x"), exitFailed,
		"shardctl: INVALID_REQUEST: /not/a/repo is not in a git repository\n")

	// Usage errors never reach the daemon.
	for _, args := range [][]string{
		{"team", "submit"},
		{"team", "submit", "   "},
		{"team", "submit", "-f", goalFile, "text"},
		{"team", "submit", "--cost-limit", "-1", "x"},
		{"team", "submit", "--cost-limit", "0", "x"},
		{"team", "submit", "-f", "/nonexistent/goal.md"},
	} {
		if r := runCtl(t, nil, f.path, "", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	if n := len(f.records(protocol.TypeTeamGoalSubmit)); n != 4 {
		t.Errorf("%d submits sent, want 4", n)
	}
}

func TestTeamGoalsGolden(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "goals"))
	golden(t, "team_goals.golden", r.stdout)
	r = ok(t, runCtl(t, nil, f.path, "", "team", "goals", "--open", "-o", "wide"))
	golden(t, "team_goals_open_wide.golden", r.stdout)
	var m protocol.TeamGoalList
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamGoalList)[1], &m)
	if !m.OpenOnly {
		t.Errorf("--open sent %+v", m)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "goals", "-o", "json"))
	var data protocol.TeamGoalListData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || len(data.Goals) != 3 || data.Goals[1].GoalID != goalA || *data.Goals[1].CostLimitUSD != 5 {
		t.Errorf("json %s: %v", r.stdout, err)
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colors on a non-terminal")
	}

	empty := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) { c.respond(h, protocol.TeamGoalListData{}) })
	r = ok(t, runCtl(t, nil, empty.path, "", "team", "goals"))
	if r.stdout != "" || r.stderr != "No goals.\n" {
		t.Errorf("empty: stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = ok(t, runCtl(t, nil, empty.path, "", "team", "goals", "-o", "json"))
	if strings.Join(strings.Fields(r.stdout), "") != `{"goals":[]}` {
		t.Errorf("empty json %q", r.stdout)
	}
}

func TestTeamShowGolden(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "show", goalA))
	golden(t, "team_show.golden", r.stdout)
	// --all shows the cancelled column and the closed decisions; a unique
	// prefix (without its kind) names the goal.
	r = ok(t, runCtl(t, nil, f.path, "", "team", "show", "01hgm7x2a0a", "--all", "-o", "wide"))
	golden(t, "team_show_all_wide.golden", r.stdout)
	// A goal without tasks yet.
	r = ok(t, runCtl(t, nil, f.path, "", "team", "show", "goal-01hgm7x2a0c"))
	if !strings.Contains(r.stdout, "No tasks yet: the lead is planning.") || !strings.Contains(r.stdout, "No open decisions.") {
		t.Errorf("planning goal:\n%s", r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "show", goalA, "-o", "json"))
	var data protocol.TeamGoalShowData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || len(data.Tasks) != 6 || len(data.Decisions) != 4 || data.Tasks[1].Diff.Additions != 12 {
		t.Errorf("json: %v\n%s", err, r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "show", goalC, "-o", "json"))
	if !strings.Contains(r.stdout, `"tasks": []`) || !strings.Contains(r.stdout, `"decisions": []`) {
		t.Errorf("empty lists are not []:\n%s", r.stdout)
	}
	wantFail(t, runCtl(t, nil, f.path, "", "team", "show", "goal-nope"), exitFailed, "shardctl: NOT_FOUND: no goal goal-nope\n")
	// A prefix that several goals share is refused, naming them.
	r = runCtl(t, nil, f.path, "", "team", "show", "goal-01hgm7x2a0")
	if r.code != exitFailed || !strings.Contains(r.stderr, `"goal-01hgm7x2a0" names 3 goals`) {
		t.Errorf("ambiguous: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, f.path, "", "team", "show"); r.code != exitUsage {
		t.Errorf("no goal: exit %d", r.code)
	}

	// What agents wrote never acts on the terminal.
	f.mu.Lock()
	f.state.tasks[0].Title = "evil\x1b]0;pwned\a title"
	f.state.goals[1].Text = "line one\n\x1b[2Jline two"
	f.state.decisions[2].Context = "ctx\u009b31m"
	f.mu.Unlock()
	for _, args := range [][]string{{"show", goalA, "--all"}, {"goals"}, {"decisions"}, {"watch", "--help"}} {
		r = ok(t, runCtl(t, nil, f.path, "", append([]string{"team"}, args...)...))
		if strings.ContainsAny(r.stdout, "\x1b\u009b\a") {
			t.Errorf("%v printed a control character:\n%q", args, r.stdout)
		}
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "show", goalA))
	if !strings.Contains(r.stdout, `evil\x1b]0;pwned\x07 title`) || !strings.Contains(r.stdout, "  line one\n  \\x1b[2Jline two\n") || !strings.Contains(r.stdout, `ctx\u009b31m`) {
		t.Errorf("escapes:\n%s", r.stdout)
	}
}

func TestTeamCancel(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "cancel", goalA))
	if r.stdout != goalA+" cancelled\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	var m protocol.TeamGoalCancel
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamGoalCancel)[0], &m)
	if m.GoalID != goalA {
		t.Errorf("sent %+v", m)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "cancel", goalB, "-o", "json"))
	if !strings.Contains(r.stdout, `"status": "cancelled"`) {
		t.Errorf("json %s", r.stdout)
	}
	wantFail(t, runCtl(t, nil, f.path, "", "team", "cancel", "goal-nope"), exitFailed, "shardctl: NOT_FOUND: no goal goal-nope\n")
}

func TestTeamTask(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "task", taskT(6), "retry"))
	if r.stdout != taskT(6)+" todo, priority 0, assignee agent-w1\n" {
		t.Errorf("retry: %q", r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "task", "task-01hgm7x2a0t4", "prioritize", "7"))
	if r.stdout != taskT(4)+" todo, priority 7\n" {
		t.Errorf("prioritize: %q", r.stdout)
	}
	ok(t, runCtl(t, nil, f.path, "", "team", "task", taskT(4), "prioritize", "--", "-3"))
	// Reassign takes an agent's name.
	r = ok(t, runCtl(t, nil, f.path, "", "team", "task", taskT(4), "reassign", "alan", "-o", "json"))
	var data protocol.TeamTaskData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || data.Task.Assignee != "agent-w2" {
		t.Errorf("reassign: %v %s", err, r.stdout)
	}
	var sent []protocol.TeamTaskAction
	for _, rec := range f.records(protocol.TypeTeamTaskAction) {
		var m protocol.TeamTaskAction
		m = zero(m)
		mustUnmarshal(t, rec, &m)
		sent = append(sent, m)
	}
	want := []protocol.TeamTaskAction{
		{TaskID: taskT(6), Action: "retry"}, {TaskID: taskT(4), Action: "prioritize", Arg: "7"},
		{TaskID: taskT(4), Action: "prioritize", Arg: "-3"}, {TaskID: taskT(4), Action: "reassign", Arg: "agent-w2"},
	}
	for i, w := range want {
		if i >= len(sent) || sent[i].TaskID != w.TaskID || sent[i].Action != w.Action || sent[i].Arg != w.Arg {
			t.Errorf("action %d sent %+v, want %+v", i, sent, w)
			break
		}
	}
	wantFail(t, runCtl(t, nil, f.path, "", "team", "task", taskT(1), "cancel"), exitFailed, "shardctl: CONFLICT: task "+taskT(1)+" is done\n")
	wantFail(t, runCtl(t, nil, f.path, "", "team", "task", "task-nope", "cancel"), exitFailed, "shardctl: NOT_FOUND: no task task-nope\n")
	for _, args := range [][]string{
		{taskT(1), "explode"}, {taskT(1), "retry", "now"}, {taskT(1), "prioritize"}, {taskT(1), "prioritize", "high"},
		{taskT(1), "reassign"}, {taskT(1)},
	} {
		if r := runCtl(t, nil, f.path, "", append([]string{"team", "task"}, args...)...); r.code != exitUsage {
			t.Errorf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	if n := len(f.records(protocol.TypeTeamTaskAction)); n != 6 {
		t.Errorf("%d actions sent, want 6", n)
	}
}

func TestTeamDecisionsGolden(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "decisions"))
	golden(t, "team_decisions.golden", r.stdout)
	r = ok(t, runCtl(t, nil, f.path, "", "team", "decisions", "--all", "--goal", "01hgm7x2a0a"))
	golden(t, "team_decisions_all.golden", r.stdout)
	var m protocol.TeamDecisionList
	recs := f.records(protocol.TypeTeamDecisionList)
	m = zero(m)
	mustUnmarshal(t, recs[0], &m)
	if !m.OpenOnly || m.GoalID != "" {
		t.Errorf("default sent %+v", m)
	}
	m = zero(m)
	mustUnmarshal(t, recs[len(recs)-1], &m)
	if m.OpenOnly || m.GoalID != goalA {
		t.Errorf("--all --goal sent %+v", m)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "decisions", "-o", "json"))
	var data protocol.TeamDecisionListData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || len(data.Decisions) != 2 || data.Decisions[1].Options == nil {
		t.Errorf("json: %v %s", err, r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "decisions", "--goal", goalB))
	if r.stdout != "" || r.stderr != "No open decisions.\n" {
		t.Errorf("none: %q %q", r.stdout, r.stderr)
	}
}

func TestTeamAnswer(t *testing.T) {
	f := newTeamFake(t)
	// A label, with the feedback of Request changes.
	r := ok(t, runCtl(t, nil, f.path, "", "team", "answer", decD(1), "Request changes", "--text", "use a constant"))
	if r.stdout != decD(1)+" answered: Request changes — use a constant (by shardctl)\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	var m protocol.TeamDecisionAnswer
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamDecisionAnswer)[0], &m)
	if m.DecisionID != decD(1) || m.Option != "Request changes" || m.Index != nil || m.Text != "use a constant" {
		t.Errorf("sent %+v", m)
	}
	// The first answer wins: a second is the daemon's CONFLICT.
	wantFail(t, runCtl(t, nil, f.path, "", "team", "answer", decD(1), "Merge"), exitFailed, "shardctl: CONFLICT: decision "+decD(1)+" is answered\n")

	// A number is sent as the 0-based index; a label in any case as the label.
	f = newTeamFake(t)
	ok(t, runCtl(t, nil, f.path, "", "team", "answer", "decision-01hgm7x2a0d1", "3"))
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamDecisionAnswer)[0], &m)
	if m.Index == nil || *m.Index != 2 || m.Option != "" {
		t.Errorf("by number sent %+v", m)
	}
	f = newTeamFake(t)
	ok(t, runCtl(t, nil, f.path, "", "team", "answer", decD(1), "request CHANGES"))
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamDecisionAnswer)[0], &m)
	if m.Option != "Request changes" || m.Index != nil {
		t.Errorf("folded label sent %+v", m)
	}

	// A refused merge: the reason, open again, exit 1.
	f = newTeamFake(t)
	f.refuseMerge = "merge_conflict: README.md"
	r = runCtl(t, nil, f.path, "", "team", "answer", decD(1), "merge")
	wantFail(t, r, exitFailed, "shardctl: "+decD(1)+" reopened: merge_conflict: README.md\nAnswer it again once the cause is fixed.\n")

	// Without an option: the decision, its options numbered, exit 2.
	r = runCtl(t, nil, f.path, "", "team", "answer", decD(1))
	golden(t, "team_answer_explain.golden", r.stdout)
	wantFail(t, r, exitUsage, "shardctl: "+decD(1)+" needs an option: its label or its number\nRun 'shardctl team answer "+decD(1)+" <option> [--text …]'.\n")
	// Not an option: the options, exit 2, nothing sent.
	before := len(f.records(protocol.TypeTeamDecisionAnswer))
	r = runCtl(t, nil, f.path, "", "team", "answer", decD(1), "4")
	if r.code != exitUsage || !strings.Contains(r.stderr, `"4" is not an option of `+decD(1)+`: 1) Merge, 2) Request changes, 3) Reject`) {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	if len(f.records(protocol.TypeTeamDecisionAnswer)) != before {
		t.Errorf("a bad option was sent")
	}

	// A free-text question takes the answer as its argument (or --text).
	r = ok(t, runCtl(t, nil, f.path, "", "team", "answer", decD(2), "the Usage section", "-o", "json"))
	var data protocol.TeamDecisionData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || data.Decision.State != protocol.DecisionAnswered || data.Decision.Answer.Text != "the Usage section" {
		t.Errorf("free text: %v %s", err, r.stdout)
	}
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamDecisionAnswer)[before], &m)
	if m.Option != "" || m.Index != nil || m.Text != "the Usage section" {
		t.Errorf("free text sent %+v", m)
	}
	// A closed decision asked about: printed with its answer, exit 1.
	r = runCtl(t, nil, f.path, "", "team", "answer", decD(4))
	if r.code != exitFailed || !strings.Contains(r.stdout, "answered: Merge (by user)") || !strings.Contains(r.stderr, decD(4)+" is answered, not open") {
		t.Errorf("closed: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// An unknown decision goes to the daemon as given.
	wantFail(t, runCtl(t, nil, f.path, "", "team", "answer", "decision-nope", "Merge"), exitFailed, "shardctl: NOT_FOUND: no decision decision-nope\n")
	if r := runCtl(t, nil, f.path, "", "team", "answer"); r.code != exitUsage {
		t.Errorf("no decision: exit %d", r.code)
	}
}

func TestTeamMemory(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "memory"))
	golden(t, "team_memory.golden", r.stdout)
	r = ok(t, runCtl(t, nil, f.path, "", "team", "memory", "ls", "--scope", "shared", "-o", "json"))
	var list protocol.TeamMemoryListData
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Entries) != 1 || list.Entries[0].Body != "Tabs, not spaces.\nDoc comments everywhere." {
		t.Errorf("json: %v %s", err, r.stdout)
	}

	r = ok(t, runCtl(t, nil, f.path, "", "team", "memory", "put", "style", "--title", "House style", "--body", "Tabs."))
	if r.stdout != memM(9)+"\n" {
		t.Errorf("put: %q", r.stdout)
	}
	// A body from stdin, in an agent's own scope, named by its alias.
	ok(t, runCtl(t, nil, f.path, "# Notes\nfrom stdin\n", "team", "memory", "put", "notes", "--scope", "ada", "-f", "-"))
	var puts []protocol.TeamMemoryPut
	for _, rec := range f.records(protocol.TypeTeamMemoryPut) {
		var m protocol.TeamMemoryPut
		m = zero(m)
		mustUnmarshal(t, rec, &m)
		puts = append(puts, m)
	}
	if len(puts) != 2 || puts[0].Scope != "shared" || puts[0].Key != "style" || puts[0].Title != "House style" || puts[0].Body != "Tabs." || puts[0].Author != "" ||
		puts[1].Scope != "agent-w1" || puts[1].Body != "# Notes\nfrom stdin\n" {
		t.Errorf("sent %+v", puts)
	}
	for _, args := range [][]string{{"put", "k"}, {"put", "k", "--body", "b", "--file", "-"}, {"put", "--body", "b"}, {"put", "", "--body", "b"}} {
		if r := runCtl(t, nil, f.path, "", append([]string{"team", "memory"}, args...)...); r.code != exitUsage {
			t.Errorf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
	}

	r = ok(t, runCtl(t, nil, f.path, "", "team", "memory", "rm", "memory-01hgm7x2a0m2"))
	if r.stdout != memM(2)+"\n" {
		t.Errorf("rm: %q", r.stdout)
	}
	wantFail(t, runCtl(t, nil, f.path, "", "team", "memory", "rm", memM(2)), exitFailed, "shardctl: NOT_FOUND: no memory entry "+memM(2)+"\n")
	if r := runCtl(t, nil, f.path, "", "team", "memory", "bogus"); r.code != exitUsage {
		t.Errorf("unknown subcommand: exit %d", r.code)
	}
}

func TestTeamFeed(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "feed"))
	golden(t, "team_feed.golden", r.stdout)
	r = ok(t, runCtl(t, nil, f.path, "", "team", "feed", "--goal", goalA, "-n", "2"))
	want := "22:14:00 message agent-w3 -> user which section?\n"
	if !strings.HasSuffix(r.stdout, want) || strings.Count(r.stdout, "\n") != 2 || r.stderr != "Older items: shardctl team feed --before "+tid("feed", "f3")+"\n" {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	var m protocol.TeamFeed
	m = zero(m)
	mustUnmarshal(t, f.records(protocol.TypeTeamFeed)[1], &m)
	if m.GoalID != goalA || m.Limit != 2 {
		t.Errorf("sent %+v", m)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "team", "feed", "-o", "json", "--before", tid("feed", "f2")))
	var data protocol.TeamFeedData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || len(data.Items) != 1 || data.Items[0].Kind != protocol.FeedGoal {
		t.Errorf("json: %v %s", err, r.stdout)
	}
	for _, args := range [][]string{{"-n", "201"}, {"-n", "-1"}, {"--follow", "-o", "yaml"}} {
		if r := runCtl(t, nil, f.path, "", append([]string{"team", "feed"}, args...)...); r.code != exitUsage {
			t.Errorf("%v: exit %d", args, r.code)
		}
	}
}

// TestTeamFeedFollow: the page, then the items added as they come — those
// of another goal and those the page holds left out — until the
// connection ends (exit 1).
func TestTeamFeedFollow(t *testing.T) {
	f := newTeamFake(t)
	f.setAfter(func(c *daemonConn, h protocol.Header) {
		if h.Type != protocol.TypeTeamFeed {
			return
		}
		added := func(it protocol.TeamFeedItem) protocol.TeamFeedAdded {
			return protocol.TeamFeedAdded{Header: protocol.Header{Type: protocol.TypeTeamFeedAdded}, Item: it}
		}
		c.send(added(protocol.TeamFeedItem{FeedID: tid("feed", "f4"), GoalID: goalA, Kind: protocol.FeedMessage, Text: "a repeat", At: ms(testNow)}))
		c.send(added(protocol.TeamFeedItem{FeedID: tid("feed", "f6"), GoalID: goalC, Kind: protocol.FeedPlan, Text: "another goal", At: ms(testNow)}))
		c.send(added(protocol.TeamFeedItem{FeedID: tid("feed", "f7"), GoalID: goalA, Kind: protocol.FeedDecision, Text: "merge decision opened\x1b[2J", TaskID: taskT(2), At: ms(testNow)}))
		c.close()
	})
	r := runCtl(t, nil, f.path, "", "team", "feed", "--follow", "--goal", goalA)
	// The connection ends before the agents are named: ids, then the loss.
	if r.code != exitFailed || !strings.HasPrefix(r.stderr, "shardctl: ") || !strings.Contains(r.stderr, "connection") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	want := []string{
		"22:05:00 goal - goal submitted",
		"22:06:00 plan agent-lead planned 6 tasks",
		`22:10:00 merge - merged "Add a version constant"`,
		"22:14:00 message agent-w3 -> user which section?",
		`22:15:00 decision - merge decision opened\x1b[2J`,
	}
	if got := strings.TrimSuffix(r.stdout, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}

	// -o json: one item a line.
	f2 := newTeamFake(t)
	f2.setAfter(func(c *daemonConn, h protocol.Header) {
		if h.Type == protocol.TypeTeamFeed {
			c.close()
		}
	})
	r = runCtl(t, nil, f2.path, "", "team", "feed", "-F", "-o", "json", "--goal", goalC)
	if r.code != exitFailed || r.stdout != `{"feed_id":"`+tid("feed", "f5")+`","goal_id":"`+goalC+`","kind":"goal","text":"goal submitted","at":1700000070000}`+"\n" {
		t.Errorf("exit %d stdout %q", r.code, r.stdout)
	}
}

func TestTeamMessage(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "team", "message", "lead", "also", "update", "the", "README", "--goal", "01hgm7x2a0a"))
	if r.stdout != tid("feed", "f9")+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	ok(t, runCtl(t, nil, f.path, "", "team", "message", "alan", "use the helper", "-o", "json"))
	ok(t, runCtl(t, nil, f.path, "", "team", "message", "all", "@ada hi"))
	var sent []protocol.TeamMessage
	for _, rec := range f.records(protocol.TypeTeamMessage) {
		var m protocol.TeamMessage
		m = zero(m)
		mustUnmarshal(t, rec, &m)
		sent = append(sent, m)
	}
	if len(sent) != 3 || sent[0].To != "lead" || sent[0].GoalID != goalA || sent[0].Text != "also update the README" || sent[0].FromAgentID != "" ||
		sent[1].To != "agent-w2" || sent[1].GoalID != "" || sent[2].To != "all" || sent[2].Text != "@ada hi" {
		t.Errorf("sent %+v", sent)
	}
	wantFail(t, runCtl(t, nil, f.path, "", "team", "message", "nobody", "hi"), exitFailed, "shardctl: NOT_FOUND: no agent nobody\n")
	if r := runCtl(t, nil, f.path, "", "team", "message", "lead"); r.code != exitUsage {
		t.Errorf("no text: exit %d", r.code)
	}
}

// TestTeamWatchGoal: the board, redrawn on each change of the goal; the
// bell rings at the start (two decisions open) and when a third opens,
// not when only a task changes; the connection's end exits 1.
func TestTeamWatchGoal(t *testing.T) {
	f := newTeamFake(t)
	var shows atomic.Int32
	f.setAfter(func(c *daemonConn, h protocol.Header) {
		// A view ends with the names of its agents, agent-w3's last: the
		// third view's end closes the connection (while shardctl sends
		// nothing).
		if h.Type == protocol.TypeAgentStatus && h.AgentID == "agent-w3" && shows.Load() == 3 {
			c.close()
		}
		if h.Type != protocol.TypeTeamGoalShow {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch shows.Add(1) {
		case 1:
			d := protocol.TeamDecision{DecisionID: decD(5), GoalID: goalA, TaskID: taskT(3), AgentID: "agent-w3", Kind: protocol.DecisionKindMerge,
				Question: `Merge "Document the flag"?`, Options: []string{protocol.OptionMerge, protocol.OptionRequestChanges, protocol.OptionReject},
				State: protocol.DecisionOpen, CreatedAt: ms(testNow)}
			f.state.decisions = append(f.state.decisions, d)
			f.state.tasks[2].State = protocol.TaskReview
			// Another goal's change and a feed item draw nothing.
			c.send(protocol.TeamTaskChanged{Header: teamHeader(protocol.TypeTeamTaskChanged), Task: f.state.tasks[6]})
			c.send(protocol.TeamFeedAdded{Header: teamHeader(protocol.TypeTeamFeedAdded), Item: protocol.TeamFeedItem{GoalID: goalA}})
			c.send(protocol.TeamDecisionChanged{Header: teamHeader(protocol.TypeTeamDecisionChanged), Decision: d})
		case 2:
			f.state.tasks[3].Priority = 9
			c.send(protocol.TeamTaskChanged{Header: teamHeader(protocol.TypeTeamTaskChanged), Task: f.state.tasks[3]})
		}
	})
	r := runCtl(t, nil, f.path, "", "team", "watch", "--reconnect", "0", goalA)
	if r.code != exitFailed || r.stderr != "shardctl: the daemon closed the connection\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	golden(t, "team_watch_goal.golden", r.stdout)
	if n := strings.Count(r.stdout, bell); n != 2 {
		t.Errorf("%d bells, want 2", n)
	}
	if n := shows.Load(); n != 3 {
		t.Errorf("%d redraws, want 3", n)
	}
}

// TestTeamWatchAll: the open goals and every open decision.
func TestTeamWatchAll(t *testing.T) {
	f := newTeamFake(t)
	f.setAfter(func(c *daemonConn, h protocol.Header) {
		if h.Type == protocol.TypeAgentStatus && h.AgentID == "agent-w3" {
			c.close() // the view's last call
		}
	})
	r := runCtl(t, nil, f.path, "", "team", "watch", "--reconnect", "0")
	if r.code != exitFailed {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	golden(t, "team_watch_all.golden", r.stdout)
	if r := runCtl(t, nil, f.path, "", "team", "watch", "-o", "json"); r.code != exitUsage {
		t.Errorf("-o json: exit %d", r.code)
	}
}

func TestTeamCompletion(t *testing.T) {
	f := newTeamFake(t)
	r := ok(t, runCtl(t, nil, f.path, "", "__complete", "team", "show", ""))
	if !strings.Contains(r.stdout, goalA+"\tactive Add a --version flag …") || !strings.Contains(r.stdout, goalB+"\tdone") {
		t.Errorf("goals: %q", r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "__complete", "team", "answer", decD(1), ""))
	if !strings.Contains(r.stdout, "Merge\nRequest changes\nReject\n") {
		t.Errorf("options: %q", r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "__complete", "team", "task", ""))
	if !strings.Contains(r.stdout, taskT(2)+"\treview Wire the --version flag") || strings.Contains(r.stdout, taskT(7)) {
		t.Errorf("tasks: %q", r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "__complete", "team", "decisions", "--goal", ""))
	if !strings.Contains(r.stdout, goalC) {
		t.Errorf("--goal: %q", r.stdout)
	}
	r = ok(t, runCtl(t, nil, f.path, "", "__complete", "team", "memory", "rm", ""))
	if !strings.Contains(r.stdout, memM(1)+"\tshared/style") {
		t.Errorf("memory: %q", r.stdout)
	}
}

func TestTeamUsageAndUnreachable(t *testing.T) {
	f := newTeamFake(t)
	if r := runCtl(t, nil, f.path, "", "team", "bogus"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "bogus" for "shardctl team"`) {
		t.Errorf("unknown verb: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, nil, f.path, "", "team", "goals", "-o", "xml"); r.code != exitUsage {
		t.Errorf("-o xml: exit %d", r.code)
	}
	r := ok(t, runCtl(t, nil, f.path, "", "team", "show", goalA, "-o", "yaml"))
	if !strings.Contains(r.stdout, "goal_id: "+goalA) || !strings.Contains(r.stdout, "options:\n      - Merge\n") {
		t.Errorf("yaml:\n%s", r.stdout)
	}
	r = runCtl(t, nil, "/nonexistent/daemon.sock", "", "team", "goals")
	if r.code != exitUnreachable || !strings.Contains(r.stderr, "cannot reach the daemon") {
		t.Errorf("no daemon: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestTeamWatchReconnects: a lost connection is reconnected and the view
// drawn again, without a second bell for the decisions it knew; a daemon
// that stays away ends the watch once --reconnect passed (exit 1).
func TestTeamWatchReconnects(t *testing.T) {
	f := newTeamFake(t)
	var shows atomic.Int32
	f.setAfter(func(c *daemonConn, h protocol.Header) {
		switch {
		case h.Type == protocol.TypeTeamGoalShow:
			shows.Add(1)
		case h.Type == protocol.TypeAgentStatus && h.AgentID == "agent-w3":
			// A view's last call: the connection ends; after the second
			// view the daemon stays away.
			if shows.Load() == 2 {
				f.ln.Close()
			}
			c.close()
		}
	})
	r := runCtl(t, nil, f.path, "", "team", "watch", "--reconnect", "300ms", goalA)
	if r.code != exitFailed {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"shardctl: the daemon closed the connection; reconnecting (for up to 300ms)…\nshardctl: reconnected\n",
		"shardctl: connection to the daemon lost, and no reconnect within 300ms: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stdout, "Goal:  "); n != 2 || strings.Count(r.stdout, bell) != 1 {
		t.Errorf("%d views, %d bells, want 2 and 1:\n%s", n, strings.Count(r.stdout, bell), r.stdout)
	}
}
