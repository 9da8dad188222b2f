package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// tid is a whole team id of kind: the prefix, a ULID whose first ten
// characters (the time) the sample ids share, then tag.
func tid(kind, tag string) string {
	return kind + "-01hgm7x2a0" + tag + strings.Repeat("0", 16-len(tag))
}

// The sample team: goal A active with a board of every column, goal B
// done, goal C planning.
var (
	goalA = tid("goal", "a")
	goalB = tid("goal", "b")
	goalC = tid("goal", "c")
	taskT = func(n int) string { return tid("task", fmt.Sprintf("t%d", n)) }
	decD  = func(n int) string { return tid("decision", fmt.Sprintf("d%d", n)) }
	memM  = func(n int) string { return tid("memory", fmt.Sprintf("m%d", n)) }
	limit = 5.0
)

// teamAgents are the agents of the sample team.
var teamAgents = []protocol.AgentInfo{
	{AgentID: "agent-lead", Name: "lead"},
	{AgentID: "agent-w1", Alias: "ada"},
	{AgentID: "agent-w2", Alias: "alan"},
	{AgentID: "agent-w3"},
}

// teamState is the fake daemon's team, mutable by the commands.
type teamState struct {
	goals     []protocol.TeamGoal // newest first
	tasks     []protocol.TeamTask
	decisions []protocol.TeamDecision
	memory    []protocol.TeamMemoryEntry
	feed      []protocol.TeamFeedItem // oldest first
}

func sampleTeam() *teamState {
	at := func(d time.Duration) int64 { return ms(testNow.Add(-d)) }
	s := &teamState{
		goals: []protocol.TeamGoal{
			{GoalID: goalC, Text: "Write a changelog", Status: protocol.GoalPlanning, LeadAgentID: "agent-lead", Cwd: "/src/app", CreatedAt: at(30 * time.Second), UpdatedAt: at(30 * time.Second)},
			{GoalID: goalA, Text: "Add a --version flag\nsplit the work; show me each change", Status: protocol.GoalActive, LeadAgentID: "agent-lead",
				Cwd: "/src/app", CostLimitUSD: &limit, CostUSD: 0.4213, Progress: 0.2, CreatedAt: at(10 * time.Minute), UpdatedAt: at(time.Minute)},
			{GoalID: goalB, Text: "Fix the typo in README", Status: protocol.GoalDone, LeadAgentID: "agent-lead", Cwd: "/src/app",
				CostUSD: 0.001, Progress: 1, CreatedAt: at(3 * time.Hour), UpdatedAt: at(2 * time.Hour), EndedAt: at(2 * time.Hour)},
		},
		tasks: []protocol.TeamTask{
			{TaskID: taskT(1), GoalID: goalA, Title: "Add a version constant", State: protocol.TaskDone, Deps: []string{}, Assignee: "agent-w1",
				Branch: "team/version-const", Diff: &protocol.TeamDiffStats{Files: 1, Additions: 3, Ahead: 1}, CI: protocol.TeamCI{Status: protocol.CIPass}, Summary: "added version.go", CreatedAt: at(9 * time.Minute)},
			{TaskID: taskT(2), GoalID: goalA, Title: "Wire the --version flag", State: protocol.TaskReview, Deps: []string{taskT(1)}, Assignee: "agent-w2",
				Branch: "team/version-flag", WorkspaceID: "workspace-01hgm7x2a0w2", Diff: &protocol.TeamDiffStats{Files: 2, Additions: 12, Deletions: 2, Ahead: 2}, CI: protocol.TeamCI{Status: protocol.CIFail, Summary: "FAIL TestVersion"}, CreatedAt: at(9 * time.Minute)},
			{TaskID: taskT(3), GoalID: goalA, Title: "Document the flag", State: protocol.TaskDoing, Deps: []string{taskT(1)}, Assignee: "agent-w3",
				Branch: "team/version-docs", CI: protocol.TeamCI{Status: protocol.CIUnknown}, CreatedAt: at(9 * time.Minute)},
			{TaskID: taskT(4), GoalID: goalA, Title: "Release notes", State: protocol.TaskTodo, Priority: 2, Deps: []string{taskT(2), taskT(3)}, CI: protocol.TeamCI{Status: protocol.CIUnknown}, CreatedAt: at(9 * time.Minute)},
			{TaskID: taskT(5), GoalID: goalA, Title: "An abandoned approach", State: protocol.TaskCancelled, Deps: []string{}, CI: protocol.TeamCI{Status: protocol.CIUnknown}, CreatedAt: at(9 * time.Minute)},
			{TaskID: taskT(6), GoalID: goalA, Title: "Benchmark startup", State: protocol.TaskBlocked, Deps: []string{}, Assignee: "agent-w1",
				BlockedReason: "interrupted by a daemon restart", CI: protocol.TeamCI{Status: protocol.CIUnknown}, CreatedAt: at(9 * time.Minute)},
			{TaskID: taskT(7), GoalID: goalB, Title: "Fix the typo", State: protocol.TaskDone, Deps: []string{}, CI: protocol.TeamCI{Status: protocol.CIUnknown}, CreatedAt: at(3 * time.Hour)},
		},
		decisions: []protocol.TeamDecision{
			{DecisionID: decD(4), GoalID: goalA, TaskID: taskT(1), AgentID: "agent-w1", Kind: protocol.DecisionKindMerge, Question: `Merge "Add a version constant"?`,
				Options: []string{protocol.OptionMerge, protocol.OptionRequestChanges, protocol.OptionReject}, State: protocol.DecisionAnswered,
				Answer: &protocol.TeamAnswer{Option: protocol.OptionMerge, By: "user", At: at(5 * time.Minute)}, CreatedAt: at(6 * time.Minute)},
			{DecisionID: decD(3), GoalID: goalA, TaskID: taskT(3), AgentID: "agent-w3", Kind: protocol.DecisionKindPermission, Question: "Run go test ./...?", Tool: "bash",
				Options: []string{protocol.OptionAllowOnce, protocol.OptionAlwaysAllow, protocol.OptionDeny}, State: protocol.DecisionAnswered,
				Answer: &protocol.TeamAnswer{Option: protocol.OptionAllowOnce, By: "web", At: at(4 * time.Minute)}, CreatedAt: at(4 * time.Minute)},
			{DecisionID: decD(1), GoalID: goalA, TaskID: taskT(2), AgentID: "agent-w2", Kind: protocol.DecisionKindMerge, Question: `Merge "Wire the --version flag"?`,
				Context: "+12 −2 in 2 files on team/version-flag\nCI: fail", Options: []string{protocol.OptionMerge, protocol.OptionRequestChanges, protocol.OptionReject},
				State: protocol.DecisionOpen, CreatedAt: at(2 * time.Minute)},
			{DecisionID: decD(2), GoalID: goalA, TaskID: taskT(3), AgentID: "agent-w3", Kind: protocol.DecisionKindQuestion, Question: "Which README section?",
				Options: []string{}, State: protocol.DecisionOpen, CreatedAt: at(time.Minute)},
		},
		memory: []protocol.TeamMemoryEntry{
			{MemoryID: memM(1), Scope: protocol.MemoryScopeShared, Key: "style", Title: "House style", Body: "Tabs, not spaces.\nDoc comments everywhere.", Updated: at(20 * time.Minute)},
			{MemoryID: memM(2), Scope: "agent-w1", Key: "notes", Body: "version.go holds the constant", Author: "agent-w1", Updated: at(8 * time.Minute)},
		},
		feed: []protocol.TeamFeedItem{
			{FeedID: tid("feed", "f1"), GoalID: goalA, Kind: protocol.FeedGoal, Text: "goal submitted", At: at(10 * time.Minute)},
			{FeedID: tid("feed", "f2"), GoalID: goalA, Kind: protocol.FeedPlan, Text: "planned 6 tasks", AgentID: "agent-lead", At: at(9 * time.Minute)},
			{FeedID: tid("feed", "f3"), GoalID: goalA, Kind: protocol.FeedMerge, Text: `merged "Add a version constant"`, TaskID: taskT(1), At: at(5 * time.Minute)},
			{FeedID: tid("feed", "f4"), GoalID: goalA, Kind: protocol.FeedMessage, Text: "which section?", AgentID: "agent-w3", To: "user", At: at(time.Minute)},
			{FeedID: tid("feed", "f5"), GoalID: goalC, Kind: protocol.FeedGoal, Text: "goal submitted", At: at(30 * time.Second)},
		},
	}
	return s
}

// teamFake is the fake daemon serving a teamState; after, when set, runs
// once a command is answered (tests push events from it).
type teamFake struct {
	*fakeDaemon
	mu    sync.Mutex
	state *teamState
	after func(c *daemonConn, h protocol.Header)
	// refuseMerge makes the next Merge answer refused (open again).
	refuseMerge string
}

func newTeamFake(t *testing.T) *teamFake {
	f := &teamFake{state: sampleTeam()}
	f.fakeDaemon = newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		f.handle(t, c, h, rec)
		f.mu.Lock()
		after := f.after
		f.mu.Unlock()
		if after != nil {
			after(c, h)
		}
	})
	return f
}

// setAfter installs the hook run after each answer.
func (f *teamFake) setAfter(fn func(c *daemonConn, h protocol.Header)) {
	f.mu.Lock()
	f.after = fn
	f.mu.Unlock()
}

func (f *teamFake) handle(t *testing.T, c *daemonConn, h protocol.Header, rec []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.state
	goal := func(id string) (int, bool) {
		i := slices.IndexFunc(s.goals, func(g protocol.TeamGoal) bool { return g.GoalID == id })
		return i, i >= 0
	}
	switch h.Type {
	case protocol.TypeAgentList:
		c.respond(h, protocol.AgentListData{Agents: teamAgents})
	case protocol.TypeAgentStatus:
		for _, a := range teamAgents {
			if a.AgentID == h.AgentID {
				c.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{a}})
				return
			}
		}
		c.respondError(h, protocol.CodeNotFound, "no agent "+h.AgentID)
	case protocol.TypeTeamGoalSubmit:
		var m protocol.TeamGoalSubmit
		mustUnmarshal(t, rec, &m)
		if m.Cwd == "/not/a/repo" {
			e := protocol.Errorf(protocol.CodeInvalidRequest, "%s is not in a git repository", m.Cwd)
			e.Data = map[string]string{"kind": "not_a_repository"}
			c.sendRaw(protocol.NewErrorResponse(h.ID, h.Type, e))
			return
		}
		g := protocol.TeamGoal{GoalID: tid("goal", "new"), Text: m.Text, Status: protocol.GoalPlanning, Cwd: m.Cwd, CostLimitUSD: m.CostLimitUSD, CreatedAt: ms(testNow)}
		s.goals = append([]protocol.TeamGoal{g}, s.goals...)
		c.respond(h, protocol.TeamGoalData{Goal: g})
	case protocol.TypeTeamGoalList:
		var m protocol.TeamGoalList
		mustUnmarshal(t, rec, &m)
		out := []protocol.TeamGoal{}
		for _, g := range s.goals {
			if !m.OpenOnly || g.Status == protocol.GoalPlanning || g.Status == protocol.GoalActive {
				out = append(out, g)
			}
		}
		c.respond(h, protocol.TeamGoalListData{Goals: out})
	case protocol.TypeTeamGoalShow, protocol.TypeTeamGoalCancel:
		var m protocol.TeamGoalShow
		mustUnmarshal(t, rec, &m)
		i, ok := goal(m.GoalID)
		if !ok {
			c.respondError(h, protocol.CodeNotFound, "no goal "+m.GoalID)
			return
		}
		if h.Type == protocol.TypeTeamGoalCancel {
			s.goals[i].Status = protocol.GoalCancelled
			c.respond(h, protocol.TeamGoalData{Goal: s.goals[i]})
			return
		}
		out := protocol.TeamGoalShowData{Goal: s.goals[i]}
		for _, tk := range s.tasks {
			if tk.GoalID == m.GoalID {
				out.Tasks = append(out.Tasks, tk)
			}
		}
		for _, d := range s.decisions {
			if d.GoalID == m.GoalID {
				out.Decisions = append(out.Decisions, d)
			}
		}
		c.respond(h, out)
	case protocol.TypeTeamTaskAction:
		var m protocol.TeamTaskAction
		mustUnmarshal(t, rec, &m)
		i := slices.IndexFunc(s.tasks, func(tk protocol.TeamTask) bool { return tk.TaskID == m.TaskID })
		if i < 0 {
			c.respondError(h, protocol.CodeNotFound, "no task "+m.TaskID)
			return
		}
		tk := &s.tasks[i]
		switch m.Action {
		case protocol.TaskActionCancel:
			if tk.State == protocol.TaskDone {
				c.respondError(h, protocol.CodeConflict, "task "+tk.TaskID+" is done")
				return
			}
			tk.State = protocol.TaskCancelled
		case protocol.TaskActionRetry:
			tk.State, tk.BlockedReason = protocol.TaskTodo, ""
		case protocol.TaskActionPrioritize:
			fmt.Sscan(m.Arg, &tk.Priority)
		case protocol.TaskActionReassign:
			tk.Assignee = m.Arg
		}
		c.respond(h, protocol.TeamTaskData{Task: *tk})
	case protocol.TypeTeamDecisionList:
		var m protocol.TeamDecisionList
		mustUnmarshal(t, rec, &m)
		out := []protocol.TeamDecision{}
		for _, d := range s.decisions {
			if (m.GoalID == "" || d.GoalID == m.GoalID) && (!m.OpenOnly || d.State == protocol.DecisionOpen) {
				out = append(out, d)
			}
		}
		c.respond(h, protocol.TeamDecisionListData{Decisions: out})
	case protocol.TypeTeamDecisionAnswer:
		var m protocol.TeamDecisionAnswer
		mustUnmarshal(t, rec, &m)
		i := slices.IndexFunc(s.decisions, func(d protocol.TeamDecision) bool { return d.DecisionID == m.DecisionID })
		if i < 0 {
			c.respondError(h, protocol.CodeNotFound, "no decision "+m.DecisionID)
			return
		}
		d := &s.decisions[i]
		if d.State != protocol.DecisionOpen {
			c.respondError(h, protocol.CodeConflict, "decision "+d.DecisionID+" is "+d.State)
			return
		}
		option := m.Option
		if m.Index != nil {
			if *m.Index >= len(d.Options) {
				c.respondError(h, protocol.CodeInvalidRequest, "index out of range")
				return
			}
			option = d.Options[*m.Index]
		}
		if len(d.Options) > 0 && !slices.Contains(d.Options, option) {
			c.respondError(h, protocol.CodeInvalidRequest, fmt.Sprintf("%q is not an option of %s", option, d.DecisionID))
			return
		}
		if option == protocol.OptionMerge && f.refuseMerge != "" {
			d.RefusedReason, f.refuseMerge = f.refuseMerge, ""
			c.respond(h, protocol.TeamDecisionData{Decision: *d})
			return
		}
		d.State = protocol.DecisionAnswered
		d.Answer = &protocol.TeamAnswer{Option: option, Text: m.Text, By: "shardctl", At: ms(testNow)}
		c.respond(h, protocol.TeamDecisionData{Decision: *d})
	case protocol.TypeTeamMemoryList:
		var m protocol.TeamMemoryList
		mustUnmarshal(t, rec, &m)
		out := []protocol.TeamMemoryEntry{}
		for _, e := range s.memory {
			if m.Scope == "" || e.Scope == m.Scope {
				out = append(out, e)
			}
		}
		c.respond(h, protocol.TeamMemoryListData{Entries: out})
	case protocol.TypeTeamMemoryPut:
		var m protocol.TeamMemoryPut
		mustUnmarshal(t, rec, &m)
		e := protocol.TeamMemoryEntry{MemoryID: memM(9), Scope: m.Scope, Key: m.Key, Title: m.Title, Body: m.Body, Author: m.Author, Updated: ms(testNow)}
		s.memory = append(s.memory, e)
		c.respond(h, protocol.TeamMemoryData{Entry: e})
	case protocol.TypeTeamMemoryDelete:
		var m protocol.TeamMemoryDelete
		mustUnmarshal(t, rec, &m)
		i := slices.IndexFunc(s.memory, func(e protocol.TeamMemoryEntry) bool { return e.MemoryID == m.MemoryID })
		if i < 0 {
			c.respondError(h, protocol.CodeNotFound, "no memory entry "+m.MemoryID)
			return
		}
		s.memory = slices.Delete(s.memory, i, i+1)
		c.respond(h, nil)
	case protocol.TypeTeamFeed:
		var m protocol.TeamFeed
		mustUnmarshal(t, rec, &m)
		var out protocol.TeamFeedData
		out.Items = []protocol.TeamFeedItem{}
		n := m.Limit
		if n == 0 {
			n = 50
		}
		for i := len(s.feed) - 1; i >= 0; i-- {
			it := s.feed[i]
			if (m.GoalID != "" && it.GoalID != m.GoalID) || (m.Before != "" && it.FeedID >= m.Before) {
				continue
			}
			if len(out.Items) == n {
				out.NextBefore = out.Items[n-1].FeedID
				break
			}
			out.Items = append(out.Items, it)
		}
		c.respond(h, out)
	case protocol.TypeTeamMessage:
		var m protocol.TeamMessage
		mustUnmarshal(t, rec, &m)
		if m.To != "lead" && m.To != "all" && m.To != "user" && !slices.ContainsFunc(teamAgents, func(a protocol.AgentInfo) bool { return a.AgentID == m.To }) {
			c.respondError(h, protocol.CodeNotFound, "no agent "+m.To)
			return
		}
		it := protocol.TeamFeedItem{FeedID: tid("feed", "f9"), GoalID: m.GoalID, Kind: protocol.FeedUser, Text: m.Text, To: m.To, At: ms(testNow)}
		s.feed = append(s.feed, it)
		c.respond(h, protocol.TeamFeedItemData{Item: it})
	default:
		c.respondError(h, protocol.CodeInvalidRequest, "unexpected "+h.Type)
	}
}
