package server

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/protocol"
)

// agentRec is what the projection knows of one Shard agent: its AgentInfo,
// what its last agent_activity said, and the dialect's view of it (its
// stable id, and the pause and stop the dialect's clients asked for).
type agentRec struct {
	info protocol.AgentInfo
	// id is the dialect's id (docs/agentcraft.md §10.2); "" until the agent
	// is on a team.
	id string
	// phase, status and tool are the last agent_activity's (content-free).
	phase  string
	status protocol.AgentStatus
	tool   string
	// paused and stopped are the dialect's agent.action pause and stop,
	// until resume or spawn.
	paused, stopped bool
	// logs is the recent log tail (at most wire.LogTailMax).
	logs []wire.LogEntry
	// last is the Agent most recently sent, to send an upsert only on a
	// change.
	last *wire.Agent
}

// repoRec is one registered repository.
type repoRec struct {
	id, name, path string
	branch, head   string
	dirty          bool
	// last is the Repo most recently sent.
	last *wire.Repo
}

// model is the projection of the daemon's team records in the dialect's
// shapes. It is not safe for concurrent use: Server guards it with its mu.
type model struct {
	agents map[string]*agentRec // by Shard agent_id
	byID   map[string]string    // dialect agent id → Shard agent_id

	goals     map[string]protocol.TeamGoal
	tasks     map[string]protocol.TeamTask
	decisions map[string]protocol.TeamDecision
	memory    map[string]protocol.TeamMemoryEntry
	feed      []wire.FeedItem // oldest first, at most wire.FeedTailMax
	repos     []*repoRec      // in the order they were registered
	// workspaces are the tasks' workspaces as the workspace events and
	// workspace.list describe them: a task's branch and worktree path
	// before the task records them.
	workspaces map[string]protocol.WorkspaceInfo
}

func newModel() *model {
	return &model{
		agents:    map[string]*agentRec{},
		byID:      map[string]string{},
		goals:     map[string]protocol.TeamGoal{},
		tasks:     map[string]protocol.TeamTask{},
		decisions: map[string]protocol.TeamDecision{},
		memory:    map[string]protocol.TeamMemoryEntry{},

		workspaces: map[string]protocol.WorkspaceInfo{},
	}
}

// agent returns the record of a Shard agent, made on first sight.
func (m *model) agent(shardID string) *agentRec {
	a := m.agents[shardID]
	if a == nil {
		a = &agentRec{info: protocol.AgentInfo{AgentID: shardID}}
		m.agents[shardID] = a
	}
	return a
}

// leads returns the Shard ids of the goals' leads.
func (m *model) leads() map[string]bool {
	out := map[string]bool{}
	for _, g := range m.goals {
		if g.LeadAgentID != "" {
			out[g.LeadAgentID] = true
		}
	}
	return out
}

// onTeam says whether a Shard agent is one of the team's: a goal's lead,
// a task's assignee, or a child of a lead.
func (m *model) onTeam(shardID string, leads map[string]bool) bool {
	if leads[shardID] {
		return true
	}
	for _, t := range m.tasks {
		if t.Assignee == shardID {
			return true
		}
	}
	if a := m.agents[shardID]; a != nil && a.info.ParentAgentID != "" && leads[a.info.ParentAgentID] {
		return true
	}
	return false
}

// dialectID returns the dialect's id of a Shard agent, assigning it on
// first use (docs/agentcraft.md §10.2): the agent's alias, display name,
// name or title, lowercased to [a-z0-9-], deduplicated with a "-2", "-3"
// suffix; "agent" when it has none of them. Once given, an id never
// changes while the server runs.
func (m *model) dialectID(shardID string) string {
	a := m.agent(shardID)
	if a.id != "" {
		return a.id
	}
	base := slug(firstNonEmpty(a.info.Alias, a.info.DisplayName, a.info.Name, a.info.Title))
	if base == "" || base == wire.User || base == wire.All {
		base = "agent"
	}
	id := base
	for n := 2; m.byID[id] != ""; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	a.id = id
	m.byID[id] = shardID
	return id
}

// ref maps a Shard agent id as the team records use it (an assignee, a
// created_by, an author) to the dialect's: "" stays "", the person stays
// wire.User, an agent id becomes its dialect id.
func (m *model) ref(shardID string) string {
	switch shardID {
	case "", wire.User, wire.All, "lead":
		return shardID
	}
	return m.dialectID(shardID)
}

// resolveAgent maps a dialect agent id (or display name, case-insensitive)
// to the Shard agent id.
func (m *model) resolveAgent(name string) (string, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	if id, ok := m.byID[name]; ok {
		return id, true
	}
	if id, ok := m.byID[slug(name)]; ok {
		return id, true
	}
	return "", false
}

// slug lowercases s to the dialect's id alphabet: letters and digits,
// other runs become one "-", trimmed, at most 32 bytes.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
			dash = false
		} else if b.Len() > 0 && !dash {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 32 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// displayName is the dialect's Agent.name: the name the agent was given,
// its first letter upper-cased, or its id.
func displayName(a *agentRec) string {
	n := firstNonEmpty(a.info.Alias, a.info.DisplayName, a.info.Name)
	if n == "" {
		n = a.id
	}
	r, size := utf8.DecodeRuneInString(n)
	return string(unicode.ToUpper(r)) + n[size:]
}

// palette holds the agents' colors, given in the order agents get their
// ids.
var palette = [...]string{"#2E78C6", "#C6492E", "#3E9A4F", "#8E5CC2", "#D19A1E", "#2AA198", "#B8487F", "#6B7A8F"}

// accent is every agent's second color.
const accent = "#F4EFE6"

// colorOf picks a color from the id, so it is the same after a restart.
func colorOf(id string) string {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return palette[h%uint32(len(palette))]
}

// readingTools are the tools whose use puts an agent in the library.
var readingTools = []string{"read", "ls", "grep", "find", "recall", "skill"}

// look is an agent's derived state, station and activity line.
type look struct {
	state    wire.AgentState
	station  wire.Station
	activity string
}

// derive decides what an agent is doing and where it stands, from what
// the daemon says of it (docs/agentcraft.md §10.3, the table). task is
// the agent's current task (nil: none); waiting is true while a decision
// waits on it; lead says it is a goal's lead.
func derive(a *agentRec, task *protocol.TeamTask, waiting, lead bool) look {
	title := ""
	if task != nil {
		title = task.Title
	}
	on := func(verb string) string {
		if title == "" {
			return verb
		}
		return verb + ": " + title
	}
	switch {
	case a.stopped:
		return look{wire.StateIdle, wire.StationLounge, "off shift"}
	case a.paused:
		return look{wire.StateIdle, wire.StationDesk, on("paused")}
	case a.info.RuntimeState == protocol.RuntimeFailed || a.phase == protocol.PhaseError || a.status == protocol.StatusError:
		return look{wire.StateError, wire.StationDesk, on("error")}
	case waiting || a.status == protocol.StatusWaitingForPermission || a.status == protocol.StatusWaitingForUI || a.phase == protocol.PhaseWaiting:
		return look{wire.StateWaitingUser, wire.StationUser, on("waiting for you")}
	case task != nil && task.CI.Status == protocol.CIRunning:
		return look{wire.StateTesting, wire.StationTestbench, on("testing")}
	case a.phase == protocol.PhaseTool:
		switch {
		case slices.Contains(readingTools, a.tool):
			return look{wire.StateReading, wire.StationLibrary, on("reading")}
		case a.tool == "write" || a.tool == "edit":
			return look{wire.StateEditing, wire.StationDesk, on("editing")}
		case a.tool == "bash":
			return look{wire.StateRunning, wire.StationTerminal, on("running a command")}
		case lead:
			return look{wire.StateThinking, wire.StationMeeting, on("coordinating")}
		}
		return look{wire.StateThinking, wire.StationDesk, on("using " + a.tool)}
	case a.phase == protocol.PhaseThinking || a.phase == protocol.PhaseStreaming || a.phase == protocol.PhaseRetrying ||
		a.phase == protocol.PhaseCompacting || a.status == protocol.StatusStreaming || a.status == protocol.StatusCompacting:
		if lead && task == nil {
			return look{wire.StateThinking, wire.StationMeeting, "planning"}
		}
		return look{wire.StateThinking, wire.StationDesk, on("thinking")}
	}
	if task != nil {
		switch task.State {
		case protocol.TaskReview:
			return look{wire.StateDone, wire.StationMergestation, on("in review")}
		case protocol.TaskBlocked:
			return look{wire.StateBlocked, wire.StationDesk, on("blocked")}
		case protocol.TaskDone:
			return look{wire.StateDone, wire.StationLounge, on("done")}
		}
	}
	return look{wire.StateIdle, wire.StationLounge, "idle"}
}

// cut bounds s to wire.ActivityMax characters, marking a cut with "…".
func cut(s string) string {
	if utf8.RuneCountInString(s) <= wire.ActivityMax {
		return s
	}
	r := []rune(s)
	return string(r[:wire.ActivityMax-1]) + "…"
}

// currentTask returns an agent's current task: the most recently updated
// of its doing tasks, else of its review, blocked and done ones, in that
// order of preference.
func (m *model) currentTask(shardID string) *protocol.TeamTask {
	rank := map[string]int{protocol.TaskDoing: 4, protocol.TaskReview: 3, protocol.TaskBlocked: 2, protocol.TaskDone: 1}
	var best *protocol.TeamTask
	for _, t := range m.tasks {
		if t.Assignee != shardID || rank[t.State] == 0 {
			continue
		}
		if best == nil || rank[t.State] > rank[best.State] || (rank[t.State] == rank[best.State] && t.UpdatedAt > best.UpdatedAt) {
			t := t
			best = &t
		}
	}
	return best
}

// waitingOn says whether an open decision waits on a Shard agent.
func (m *model) waitingOn(shardID string) bool {
	for _, d := range m.decisions {
		if d.State == protocol.DecisionOpen && d.AgentID == shardID && d.Kind != protocol.DecisionKindMerge {
			return true
		}
	}
	return false
}

// agentEntity builds the dialect's Agent of a team agent.
func (m *model) agentEntity(shardID string, leads map[string]bool) wire.Agent {
	a := m.agent(shardID)
	id := m.dialectID(shardID)
	lead := leads[shardID]
	task := m.currentTask(shardID)
	if lead {
		task = nil // a lead works on goals, not on a task of the board
	}
	lk := derive(a, task, m.waitingOn(shardID), lead)
	out := wire.Agent{
		ID: id, Name: displayName(a), Role: wire.RoleWorker, Color: colorOf(id), Accent: accent, Skin: id,
		State: lk.state, Station: lk.station, Activity: cut(lk.activity),
		Paused: a.paused, Active: !a.stopped && m.activeAgent(shardID, lead, task),
	}
	if lead {
		out.Role, out.Title = wire.RoleLead, "Team lead"
		if g := m.goalOfLead(shardID); g != nil {
			out.RepoID = m.repoIDOf(g.Cwd)
		}
	} else {
		out.Title = "Worker"
	}
	if task != nil && (task.State == protocol.TaskDoing || task.State == protocol.TaskReview) {
		out.TaskID = task.TaskID
		out.RepoID = m.repoIDOf(m.goals[task.GoalID].Cwd)
		out.Worktree = task.WorkspaceID
	}
	return out
}

// activeAgent: on shift means a lead of an open goal, or a worker with a
// task on the board, or an agent whose runtime runs.
func (m *model) activeAgent(shardID string, lead bool, task *protocol.TeamTask) bool {
	if a := m.agents[shardID]; a != nil && (a.info.RuntimeState == protocol.RuntimeRunning || a.info.RuntimeState == protocol.RuntimeStarting) {
		return true
	}
	if lead {
		for _, g := range m.goals {
			if g.LeadAgentID == shardID && (g.Status == protocol.GoalPlanning || g.Status == protocol.GoalActive) {
				return true
			}
		}
		return false
	}
	return task != nil && task.State != protocol.TaskDone
}

// goalOfLead returns the newest goal a Shard agent leads.
func (m *model) goalOfLead(shardID string) *protocol.TeamGoal {
	var best *protocol.TeamGoal
	for _, g := range m.goals {
		if g.LeadAgentID == shardID && (best == nil || g.CreatedAt > best.CreatedAt) {
			g := g
			best = &g
		}
	}
	return best
}

// teamAgents returns the Shard ids of the team's agents, leads first, then
// by creation time and id, so that snapshots list them stably.
func (m *model) teamAgents(leads map[string]bool) []string {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for id := range leads {
		add(id)
	}
	for _, t := range m.tasks {
		add(t.Assignee)
	}
	for id, a := range m.agents {
		if a.info.ParentAgentID != "" && leads[a.info.ParentAgentID] {
			add(id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		li, lj := leads[ids[i]], leads[ids[j]]
		if li != lj {
			return li
		}
		ai, aj := m.agent(ids[i]).info.CreatedAt, m.agent(ids[j]).info.CreatedAt
		if ai != aj {
			return ai < aj
		}
		return ids[i] < ids[j]
	})
	return ids
}

// repoIDOf returns the id of the repository whose checkout is path, ""
// when none is registered.
func (m *model) repoIDOf(path string) string {
	if path == "" {
		return ""
	}
	for _, r := range m.repos {
		if r.path == path || strings.HasPrefix(path, r.path+string(filepath.Separator)) {
			return r.id
		}
	}
	return ""
}

// repoByID returns a registered repository.
func (m *model) repoByID(id string) *repoRec {
	for _, r := range m.repos {
		if r.id == id {
			return r
		}
	}
	return nil
}

// addRepo registers a checkout path (idempotent) and returns its record.
// Its id is the slug of the directory's name, deduplicated.
func (m *model) addRepo(path string) (*repoRec, bool) {
	for _, r := range m.repos {
		if r.path == path {
			return r, false
		}
	}
	name := filepath.Base(path)
	base := slug(name)
	if base == "" {
		base = "repo"
	}
	id := base
	for n := 2; m.repoByID(id) != nil; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	r := &repoRec{id: id, name: name, path: path}
	m.repos = append(m.repos, r)
	return r, true
}

// taskEntity builds the dialect's Task of a Shard task.
func (m *model) taskEntity(t protocol.TeamTask) wire.Task {
	out := wire.Task{
		ID: t.TaskID, Title: t.Title, Description: t.Description, Status: wire.TaskStatus(t.State),
		Assignee: m.ref(t.Assignee), Deps: slices.Clone(t.Deps), GoalID: t.GoalID, Priority: t.Priority,
		Branch: firstNonEmpty(t.Branch, m.workspaces[t.WorkspaceID].Branch), Worktree: t.WorkspaceID, CI: ciOf(t.CI.Status), BlockedReason: t.BlockedReason,
		Summary: t.Summary, CreatedBy: m.ref(t.CreatedBy), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
	if out.CreatedBy == "" {
		out.CreatedBy = wire.User
	}
	if g, ok := m.goals[t.GoalID]; ok {
		out.RepoID = m.repoIDOf(g.Cwd)
	}
	return out
}

func ciOf(s string) wire.CiStatus {
	if c := wire.CiStatus(s); c.Valid() {
		return c
	}
	return wire.CiUnknown
}

// decisionEntity builds the dialect's Decision of a Shard decision. A
// refused merge, open again, ends its context with wire.MergeRefused and
// the reason, as the dialect says.
func (m *model) decisionEntity(d protocol.TeamDecision) wire.Decision {
	out := wire.Decision{
		ID: d.DecisionID, AgentID: m.ref(d.AgentID), Kind: wire.DecisionKind(d.Kind), Question: d.Question,
		Options: slices.Clone(d.Options), Context: d.Context, Status: wire.DecisionStatus(d.State),
		TaskID: d.TaskID, Tool: d.Tool, CreatedAt: d.CreatedAt,
	}
	if out.AgentID == "" {
		// The dialect requires one: a decision no agent waits on is the
		// lead's of its goal.
		if g, ok := m.goals[d.GoalID]; ok && g.LeadAgentID != "" {
			out.AgentID = m.ref(g.LeadAgentID)
		} else {
			out.AgentID = "lead"
		}
	}
	if d.Kind == protocol.DecisionKindPermission {
		out.Context = m.permissionContext(d)
	}
	if d.State == protocol.DecisionOpen && d.RefusedReason != "" {
		line := wire.MergeRefused + d.RefusedReason
		if !strings.HasSuffix(out.Context, line) {
			if out.Context != "" {
				out.Context += "\n"
			}
			out.Context += line
		}
	}
	if d.Answer != nil {
		out.Answer = &wire.DecisionAnswer{Option: d.Answer.Option, Text: d.Answer.Text, TS: d.Answer.At}
	}
	if t, ok := m.tasks[d.TaskID]; ok {
		if g, ok := m.goals[t.GoalID]; ok {
			out.RepoID = m.repoIDOf(g.Cwd)
		}
		if d.Kind == protocol.DecisionKindMerge {
			out.Worktree = t.WorkspaceID
		}
	}
	return out
}

// permissionContext is a permission decision's context as the dialect
// wants it (docs/agentcraft.md §10.5): what it acts on, the cwd, and the
// scope of "Always allow for this agent" — for bash, the command's form
// (Shard persists a signature rule of the programs, subcommands and flags
// when it can read the command, docs/protocol.md §9.5); for another tool,
// that exact call again.
func (m *model) permissionContext(d protocol.TeamDecision) string {
	if strings.Contains(d.Context, wire.AlwaysAllowCovers) {
		return d.Context
	}
	lines := []string{}
	if d.Context != "" {
		lines = append(lines, d.Context)
	}
	if t, ok := m.tasks[d.TaskID]; ok {
		if cwd := firstNonEmpty(t.Worktree, m.workspaces[t.WorkspaceID].Cwd); cwd != "" {
			lines = append(lines, "cwd: "+cwd)
		}
	}
	scope := "this exact " + d.Tool + " call, with the same arguments"
	if d.Tool == "bash" {
		scope = "commands of the same form as this one (the same programs, subcommands and flags) when Shard can read it, else this exact command"
	}
	return strings.Join(append(lines, wire.AlwaysAllowCovers+scope), "\n")
}

// goalEntity builds the dialect's Goal.
func (m *model) goalEntity(g protocol.TeamGoal) wire.Goal {
	return wire.Goal{ID: g.GoalID, Text: g.Text, Progress: g.Progress, Status: wire.GoalStatus(g.Status),
		RepoID: m.repoIDOf(g.Cwd), CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt}
}

// memoryEntity builds the dialect's MemoryEntry: its id is
// "<scope>/<key>", the scope an agent's dialect id or "shared".
func (m *model) memoryEntity(e protocol.TeamMemoryEntry) wire.MemoryEntry {
	scope := e.Scope
	if scope != protocol.MemoryScopeShared {
		scope = m.ref(scope)
	}
	title := e.Title
	if title == "" {
		title = e.Key
	}
	author := m.ref(e.Author)
	if author == "" {
		author = wire.User
	}
	return wire.MemoryEntry{ID: scope + "/" + e.Key, Scope: scope, Title: title, Body: e.Body, Updated: e.Updated, Author: author}
}

// feedEntity builds the dialect's FeedItem.
func (m *model) feedEntity(f protocol.TeamFeedItem) wire.FeedItem {
	kind := wire.FeedKind(f.Kind)
	if !kind.Valid() {
		kind = wire.FeedSystem
	}
	return wire.FeedItem{TS: f.At, Kind: kind, Text: f.Text, AgentID: m.ref(f.AgentID), To: m.ref(f.To)}
}

// repoEntity builds the dialect's Repo: its worktrees are its tasks'
// workspaces (active while the task is doing, in review or blocked; merged
// once done; abandoned once cancelled), and its CI the latest result of
// its tasks.
func (m *model) repoEntity(r *repoRec) wire.Repo {
	out := wire.Repo{ID: r.id, Name: r.name, Path: r.path, Branch: r.branch, Head: r.head, Dirty: r.dirty, CI: wire.CiUnknown}
	if out.Branch == "" {
		out.Branch = "main"
	}
	tasks := make([]protocol.TeamTask, 0)
	for _, t := range m.tasks {
		if g, ok := m.goals[t.GoalID]; ok && m.repoIDOf(g.Cwd) == r.id {
			tasks = append(tasks, t)
		}
	}
	sort.Slice(tasks, func(i, j int) bool {
		if tasks[i].CreatedAt != tasks[j].CreatedAt {
			return tasks[i].CreatedAt < tasks[j].CreatedAt
		}
		return tasks[i].TaskID < tasks[j].TaskID
	})
	var ciAt int64
	for _, t := range tasks {
		if t.CI.Status != "" && t.CI.Status != protocol.CIUnknown && t.UpdatedAt >= ciAt {
			out.CI, ciAt = ciOf(t.CI.Status), t.UpdatedAt
		}
		if t.WorkspaceID == "" {
			continue
		}
		ws := m.workspaces[t.WorkspaceID]
		wt := wire.Worktree{ID: t.WorkspaceID, AgentID: m.ref(t.Assignee), TaskID: t.TaskID, Branch: firstNonEmpty(t.Branch, ws.Branch),
			Base: firstNonEmpty(ws.IntegrationTarget, out.Branch), Path: firstNonEmpty(t.Worktree, ws.Cwd), Status: wire.WorktreeActive}
		if wt.AgentID == "" {
			wt.AgentID = "lead"
		}
		switch t.State {
		case protocol.TaskDone:
			wt.Status = wire.WorktreeMerged
		case protocol.TaskCancelled:
			wt.Status = wire.WorktreeAbandoned
		}
		if t.Diff != nil {
			wt.Ahead, wt.Files, wt.Additions, wt.Deletions = t.Diff.Ahead, t.Diff.Files, t.Diff.Additions, t.Diff.Deletions
		}
		out.Worktrees = append(out.Worktrees, wt)
	}
	return out
}

// currentGoal is the newest goal, the dialect's current one.
func (m *model) currentGoal() *protocol.TeamGoal {
	var best *protocol.TeamGoal
	for _, g := range m.goals {
		if best == nil || g.CreatedAt > best.CreatedAt || (g.CreatedAt == best.CreatedAt && g.GoalID > best.GoalID) {
			g := g
			best = &g
		}
	}
	return best
}

// snapshot builds the whole state as the dialect's snapshot.
func (m *model) snapshot(foreman wire.ForemanStatus) wire.Snapshot {
	leads := m.leads()
	s := wire.Snapshot{Foreman: foreman, Agents: []wire.Agent{}, Tasks: []wire.Task{}, Decisions: []wire.Decision{},
		Repos: []wire.Repo{}, Memory: []wire.MemoryEntry{}, Goals: []wire.Goal{}, Feed: slices.Clone(m.feed), Logs: []wire.AgentLogs{}}
	for _, id := range m.teamAgents(leads) {
		// last is left alone: it is what every client was last sent, and a
		// snapshot goes to one.
		ag := m.agentEntity(id, leads)
		s.Agents = append(s.Agents, ag)
		s.Logs = append(s.Logs, wire.AgentLogs{AgentID: ag.ID, Entries: slices.Clone(m.agents[id].logs)})
	}
	for _, t := range sortedTasks(m.tasks) {
		s.Tasks = append(s.Tasks, m.taskEntity(t))
	}
	for _, d := range sortedDecisions(m.decisions) {
		s.Decisions = append(s.Decisions, m.decisionEntity(d))
	}
	for _, r := range m.repos {
		s.Repos = append(s.Repos, m.repoEntity(r))
	}
	keys := make([]string, 0, len(m.memory))
	for k := range m.memory {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.Memory = append(s.Memory, m.memoryEntity(m.memory[k]))
	}
	goals := make([]protocol.TeamGoal, 0, len(m.goals))
	for _, g := range m.goals {
		goals = append(goals, g)
	}
	sort.Slice(goals, func(i, j int) bool {
		if goals[i].CreatedAt != goals[j].CreatedAt {
			return goals[i].CreatedAt < goals[j].CreatedAt
		}
		return goals[i].GoalID < goals[j].GoalID
	})
	for _, g := range goals {
		s.Goals = append(s.Goals, m.goalEntity(g))
	}
	if len(s.Goals) > 0 {
		cur := s.Goals[len(s.Goals)-1]
		s.Goal = &cur
	}
	return s
}

// decisionsKept bounds the answered and cancelled decisions a snapshot
// carries besides the open ones ("the most recent answered ones").
const decisionsKept = 50

// sortedDecisions returns the open decisions and the most recent
// decisionsKept others, oldest first.
func sortedDecisions(ds map[string]protocol.TeamDecision) []protocol.TeamDecision {
	all := make([]protocol.TeamDecision, 0, len(ds))
	for _, d := range ds {
		all = append(all, d)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].CreatedAt != all[j].CreatedAt {
			return all[i].CreatedAt < all[j].CreatedAt
		}
		return all[i].DecisionID < all[j].DecisionID
	})
	closed := 0
	for _, d := range all {
		if d.State != protocol.DecisionOpen {
			closed++
		}
	}
	out := all[:0:0]
	for _, d := range all {
		if d.State != protocol.DecisionOpen {
			if closed > decisionsKept {
				closed--
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

func sortedTasks(ts map[string]protocol.TeamTask) []protocol.TeamTask {
	out := make([]protocol.TeamTask, 0, len(ts))
	for _, t := range ts {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].TaskID < out[j].TaskID
	})
	return out
}

// appendFeed appends an item to the feed tail.
func (m *model) appendFeed(it wire.FeedItem) {
	m.feed = append(m.feed, it)
	if n := len(m.feed) - wire.FeedTailMax; n > 0 {
		m.feed = slices.Delete(m.feed, 0, n)
	}
}

// feedLog appends what the feed item f (it, in the dialect) says of a team
// agent to that agent's log, and returns the entry; nil when it is about
// no team agent.
func (m *model) feedLog(f protocol.TeamFeedItem, it wire.FeedItem) *wire.LogEntry {
	if f.AgentID == "" || !m.onTeam(f.AgentID, m.leads()) {
		return nil
	}
	entry := wire.LogEntry{TS: it.TS, Kind: logKindOf(it.Kind), Text: it.Text}
	m.agent(f.AgentID).appendLog(entry)
	return &entry
}

// logKindOf is the log kind of a feed item about an agent.
func logKindOf(k wire.FeedKind) wire.LogKind {
	switch k {
	case wire.FeedError:
		return wire.LogError
	case wire.FeedMerge, wire.FeedCi:
		return wire.LogResult
	}
	return wire.LogText
}

// appendLog appends a log entry to an agent's tail.
func (a *agentRec) appendLog(e wire.LogEntry) {
	a.logs = append(a.logs, e)
	if n := len(a.logs) - wire.LogTailMax; n > 0 {
		a.logs = slices.Delete(a.logs, 0, n)
	}
}
