package server

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/protocol"
)

// feedLoad is how many feed items the server reads at start: the most a
// snapshot carries.
const feedLoad = wire.FeedTailMax

// load reads the daemon's records into the projection: the agents, every
// goal with its tasks and decisions, the memory and the feed's tail.
// Events that arrive meanwhile wait on the connection and are applied
// after, each only if it is not older than what was read.
func (s *Server) load(ctx context.Context) error {
	var agents protocol.AgentListData
	if err := s.up.Call(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &agents); err != nil {
		return fmt.Errorf("agentcraft server: load agents: %w", err)
	}
	var goals protocol.TeamGoalListData
	if err := s.up.Call(ctx, &protocol.TeamGoalList{Header: protocol.Header{Type: protocol.TypeTeamGoalList}}, &goals); err != nil {
		return fmt.Errorf("agentcraft server: load goals: %w", err)
	}
	var wss protocol.WorkspaceListData
	if err := s.up.Call(ctx, &protocol.WorkspaceList{Header: protocol.Header{Type: protocol.TypeWorkspaceList}}, &wss); err != nil {
		return fmt.Errorf("agentcraft server: load workspaces: %w", err)
	}
	var shows []protocol.TeamGoalShowData
	for _, g := range goals.Goals {
		var show protocol.TeamGoalShowData
		if err := s.up.Call(ctx, &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}, GoalID: g.GoalID}, &show); err != nil {
			return fmt.Errorf("agentcraft server: load goal %s: %w", g.GoalID, err)
		}
		shows = append(shows, show)
	}
	var mem protocol.TeamMemoryListData
	if err := s.up.Call(ctx, &protocol.TeamMemoryList{Header: protocol.Header{Type: protocol.TypeTeamMemoryList}}, &mem); err != nil {
		return fmt.Errorf("agentcraft server: load memory: %w", err)
	}
	var feed protocol.TeamFeedData
	if err := s.up.Call(ctx, &protocol.TeamFeed{Header: protocol.Header{Type: protocol.TypeTeamFeed}, Limit: feedLoad}, &feed); err != nil {
		return fmt.Errorf("agentcraft server: load feed: %w", err)
	}

	s.mu.Lock()
	m := s.m
	for _, info := range agents.Agents {
		m.agent(info.AgentID).info = info
	}
	for _, w := range wss.Workspaces {
		m.workspaces[w.WorkspaceID] = w
	}
	for _, show := range shows {
		m.goals[show.Goal.GoalID] = show.Goal
		for _, t := range show.Tasks {
			m.tasks[t.TaskID] = t
		}
		for _, d := range show.Decisions {
			m.decisions[d.DecisionID] = d
		}
	}
	for _, e := range mem.Entries {
		m.memory[e.MemoryID] = e
	}
	for i := len(feed.Items) - 1; i >= 0; i-- { // newest first → oldest first
		if it, ok := s.addFeedLocked(feed.Items[i]); ok {
			m.feedLog(feed.Items[i], it)
		}
	}
	// Agents get their dialect ids in a stable order: leads, then by
	// creation.
	for _, id := range m.teamAgents(m.leads()) {
		m.dialectID(id)
	}
	var refresh []*repoRec
	for _, g := range sortedGoals(m.goals) {
		if r, added := m.addRepo(g.Cwd); added && g.Cwd != "" {
			refresh = append(refresh, r)
		}
	}
	s.mu.Unlock()
	for _, r := range m.repos {
		if !slices.Contains(refresh, r) {
			refresh = append(refresh, r)
		}
	}
	for _, r := range refresh {
		s.refreshRepo(ctx, r)
	}
	return nil
}

// sortedGoals returns goals oldest first.
func sortedGoals(gs map[string]protocol.TeamGoal) []protocol.TeamGoal {
	out := make([]protocol.TeamGoal, 0, len(gs))
	for _, g := range gs {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b protocol.TeamGoal) int {
		if a.CreatedAt != b.CreatedAt {
			return int(a.CreatedAt - b.CreatedAt)
		}
		if a.GoalID < b.GoalID {
			return -1
		}
		return 1
	})
	return out
}

// eventQueue holds the daemon's events between the goroutine that drains
// the connection and the one that applies them, without a bound, so that
// the connection's reader never waits on follow: follow itself sends the
// daemon commands (agent.status, workspace.status), whose responses that
// reader must be free to deliver.
type eventQueue struct {
	ready chan struct{} // a token while items or closed changed

	// mu protects the following.
	mu     sync.Mutex
	items  []protocol.Typed
	closed bool
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

// push appends one event, or marks the end (msg nil).
func (q *eventQueue) push(msg protocol.Typed) {
	q.mu.Lock()
	if msg == nil {
		q.closed = true
	} else {
		q.items = append(q.items, msg)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop returns the next event, waiting for one; ok is false once the queue
// ended and is empty.
func (q *eventQueue) pop() (protocol.Typed, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			msg := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return msg, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

// follow applies the daemon's events until its connection ends; then
// every client is disconnected, since nothing it sees would change again.
func (s *Server) follow() {
	q := newEventQueue()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for ev := range s.up.Events() {
			q.push(ev.Msg)
		}
		q.push(nil)
	}()
	for {
		msg, ok := q.pop()
		if !ok {
			break
		}
		s.learnAgents(msg)
		for _, r := range s.apply(msg) {
			s.refreshRepo(s.ctx, r)
		}
	}
	if s.ctx.Err() == nil {
		s.log.Error("agentcraft: the daemon connection ended", "err", s.up.Err())
	}
	s.mu.Lock()
	for c := range s.clients {
		c.kill(websocket.StatusGoingAway, "daemon connection ended")
	}
	s.mu.Unlock()
}

// learnAgents reads the AgentInfo of each agent a team event names that
// the projection does not know yet (agent.status), so that the agent's
// dialect id is made from its names, not from nothing. It runs on the
// follow goroutine, outside mu.
func (s *Server) learnAgents(msg protocol.Typed) {
	var ids []string
	switch e := msg.(type) {
	case *protocol.TeamGoalChanged:
		ids = append(ids, e.Goal.LeadAgentID)
	case *protocol.TeamTaskChanged:
		ids = append(ids, e.Task.Assignee, e.Task.CreatedBy)
	case *protocol.TeamDecisionChanged:
		ids = append(ids, e.Decision.AgentID)
	case *protocol.TeamFeedAdded:
		ids = append(ids, e.Item.AgentID, e.Item.To)
	case *protocol.TeamMemoryChanged:
		ids = append(ids, e.Entry.Author)
	}
	if e, ok := msg.(*protocol.TeamTaskChanged); ok && e.Task.WorkspaceID != "" {
		s.learnWorkspace(e.Task.WorkspaceID)
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "agent-") {
			continue // "", the person, "all", "lead"
		}
		s.mu.Lock()
		a, known := s.m.agents[id]
		known = known && (a.id != "" || a.info.CreatedAt != 0)
		s.mu.Unlock()
		if known {
			continue
		}
		var data protocol.AgentListData
		ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
		err := s.up.Call(ctx, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &data)
		cancel()
		if err != nil || len(data.Agents) == 0 {
			continue // removed meanwhile: its id comes from what is known
		}
		s.mu.Lock()
		if a := s.m.agent(id); a.info.CreatedAt == 0 {
			a.info = data.Agents[0]
		}
		s.mu.Unlock()
	}
}

// learnWorkspace reads a task's workspace (workspace.status) the first
// time a task names it, for its branch and worktree path before the task
// records them. It runs on the follow goroutine, outside mu.
func (s *Server) learnWorkspace(id string) {
	s.mu.Lock()
	_, known := s.m.workspaces[id]
	s.mu.Unlock()
	if known {
		return
	}
	var data protocol.WorkspaceStatusData
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	err := s.up.Call(ctx, &protocol.WorkspaceStatus{Header: protocol.Header{Type: protocol.TypeWorkspaceStatus}, WorkspaceID: id}, &data)
	cancel()
	if err != nil || data.Workspace.WorkspaceID != id {
		return
	}
	s.mu.Lock()
	if _, known := s.m.workspaces[id]; !known {
		s.m.workspaces[id] = data.Workspace
	}
	s.mu.Unlock()
}

// apply applies one daemon event to the projection and broadcasts what
// it changed. It returns the repositories whose git state (head, dirty)
// may have changed, for the caller to read outside mu.
func (s *Server) apply(msg protocol.Typed) []*repoRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	var out []wire.ServerMessage
	var refresh []*repoRec
	switch e := msg.(type) {
	case *protocol.TeamGoalChanged:
		if old, ok := m.goals[e.Goal.GoalID]; ok && old.UpdatedAt > e.Goal.UpdatedAt {
			return nil
		}
		m.goals[e.Goal.GoalID] = e.Goal
		if r, added := m.addRepo(e.Goal.Cwd); added && e.Goal.Cwd != "" {
			refresh = append(refresh, r)
		}
		if e.Goal.LeadAgentID != "" {
			m.dialectID(e.Goal.LeadAgentID)
		}
		out = append(out, wire.GoalUpsert{Goal: m.goalEntity(e.Goal)})
	case *protocol.TeamTaskChanged:
		old, ok := m.tasks[e.Task.TaskID]
		if ok && old.Revision > e.Task.Revision {
			return nil
		}
		m.tasks[e.Task.TaskID] = e.Task
		if e.Task.State == protocol.TaskDone && old.State != protocol.TaskDone {
			if r := m.repoByID(m.repoIDOf(m.goals[e.Task.GoalID].Cwd)); r != nil {
				refresh = append(refresh, r) // a merge moved the base branch
			}
		}
		out = append(out, wire.TaskUpsert{Task: m.taskEntity(e.Task)})
	case *protocol.TeamDecisionChanged:
		old, ok := m.decisions[e.Decision.DecisionID]
		if ok && old.UpdatedAt > e.Decision.UpdatedAt {
			return nil
		}
		m.decisions[e.Decision.DecisionID] = e.Decision
		d := m.decisionEntity(e.Decision)
		out = append(out, wire.DecisionUpsert{Decision: d})
		if e.Decision.State == protocol.DecisionOpen && (!ok || old.State != protocol.DecisionOpen || old.RefusedReason != e.Decision.RefusedReason) {
			who := "Shard"
			if id, ok := m.byID[d.AgentID]; ok {
				who = displayName(m.agent(id))
			}
			out = append(out, wire.Notify{Level: wire.NotifyNeedUser, Text: who + ": " + e.Decision.Question,
				DecisionID: d.ID, TS: max(e.Decision.UpdatedAt, e.Decision.CreatedAt)})
		}
	case *protocol.TeamMemoryChanged:
		if e.Deleted {
			// The dialect has no removal: the entry leaves the next
			// snapshot (docs/agentcraft.md §10.5).
			delete(m.memory, e.Entry.MemoryID)
			break
		}
		if old, ok := m.memory[e.Entry.MemoryID]; ok && old.Updated > e.Entry.Updated {
			return nil
		}
		m.memory[e.Entry.MemoryID] = e.Entry
		out = append(out, wire.MemoryUpsert{Entry: m.memoryEntity(e.Entry)})
	case *protocol.TeamFeedAdded:
		if it, ok := s.addFeedLocked(e.Item); ok {
			out = append(out, wire.FeedAdd{Item: it})
			if it.Kind == wire.FeedMessage && it.AgentID != "" {
				out = append(out, wire.AgentSay{AgentID: it.AgentID, Text: it.Text, To: it.To, TS: it.TS})
			}
			if it.Kind == wire.FeedError {
				out = append(out, wire.Notify{Level: wire.NotifyWarn, Text: it.Text, TS: it.TS})
			}
			if entry := s.m.feedLog(e.Item, it); entry != nil {
				out = append(out, wire.AgentLog{AgentID: it.AgentID, Entries: []wire.LogEntry{*entry}})
			}
		}
	case *protocol.WorkspaceCreated:
		m.workspaces[e.Workspace.WorkspaceID] = e.Workspace
	case *protocol.WorkspaceAttached:
		m.workspaces[e.Workspace.WorkspaceID] = e.Workspace
	case *protocol.WorkspaceConflict:
		m.workspaces[e.Workspace.WorkspaceID] = e.Workspace
	case *protocol.WorkspaceRetired:
		m.workspaces[e.Workspace.WorkspaceID] = e.Workspace
	case *protocol.AgentSpawned:
		m.agent(e.Info.AgentID).info = e.Info
	case *protocol.AgentUpdated:
		m.agent(e.Info.AgentID).info = e.Info
	case *protocol.AgentStatusChanged:
		a := m.agent(e.AgentID)
		a.status, a.info.Status, a.info.RuntimeState = e.Status, e.Status, e.RuntimeState
		if !m.onTeam(e.AgentID, m.leads()) {
			return nil // frequent, and nothing a client sees changed
		}
	case *protocol.AgentExited:
		a := m.agent(e.AgentID)
		a.info.RuntimeState = e.RuntimeState
	case *protocol.AgentActivity:
		a := m.agent(e.AgentID)
		a.phase, a.status, a.tool = e.Phase, e.Status, e.ToolName
		var entry *wire.LogEntry
		switch {
		case e.Phase == protocol.PhaseTool && e.ToolName != "":
			entry = &wire.LogEntry{TS: e.Timestamp, Kind: wire.LogTool, Text: e.ToolName}
		case e.Phase == protocol.PhaseError:
			entry = &wire.LogEntry{TS: e.Timestamp, Kind: wire.LogError, Text: "the turn failed"}
		}
		if !m.onTeam(e.AgentID, m.leads()) {
			return nil // frequent, and nothing a client sees changed
		}
		if entry != nil {
			a.appendLog(*entry)
			out = append(out, wire.AgentLog{AgentID: m.dialectID(e.AgentID), Entries: []wire.LogEntry{*entry}})
		}
	case *protocol.AgentRemoved:
		a := m.agent(e.AgentID)
		a.info.RuntimeState, a.stopped = protocol.RuntimeStopped, true
	default:
		return nil
	}
	out = append(out, s.changedLocked()...)
	s.broadcastLocked(out...)
	return refresh
}

// changedLocked returns an upsert for every team agent and repository
// whose entity differs from the one last sent, and a foreman.status when
// the spend changed. mu must be held.
func (s *Server) changedLocked() []wire.ServerMessage {
	m := s.m
	var out []wire.ServerMessage
	leads := m.leads()
	for _, id := range m.teamAgents(leads) {
		ag := m.agentEntity(id, leads)
		if a := m.agents[id]; a.last == nil || !reflect.DeepEqual(*a.last, ag) {
			a.last = &ag
			out = append(out, wire.AgentUpsert{Agent: ag})
		}
	}
	for _, r := range m.repos {
		re := m.repoEntity(r)
		if r.last == nil || !reflect.DeepEqual(*r.last, re) {
			r.last = &re
			out = append(out, wire.RepoUpsert{Repo: re})
		}
	}
	f := s.foremanLocked()
	if s.foreman.CostUSD == nil || *s.foreman.CostUSD != *f.CostUSD {
		s.foreman.CostUSD = f.CostUSD
		out = append(out, wire.ForemanStatusMsg{Status: f})
	}
	return out
}

// addFeedLocked appends a feed item unless it is there already (read at
// start and announced too). mu must be held.
func (s *Server) addFeedLocked(f protocol.TeamFeedItem) (wire.FeedItem, bool) {
	if s.feedIDs == nil {
		s.feedIDs = map[string]bool{}
	}
	if f.FeedID != "" {
		if s.feedIDs[f.FeedID] {
			return wire.FeedItem{}, false
		}
		s.feedIDs[f.FeedID] = true
		s.feedOrder = append(s.feedOrder, f.FeedID)
		if n := len(s.feedOrder) - 4*wire.FeedTailMax; n > 0 {
			for _, id := range s.feedOrder[:n] {
				delete(s.feedIDs, id)
			}
			s.feedOrder = slices.Delete(s.feedOrder, 0, n)
		}
	}
	it := s.m.feedEntity(f)
	s.m.appendFeed(it)
	return it, true
}
