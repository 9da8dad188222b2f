package server

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/protocol"
)

// handle carries one client message out (docs/agentcraft.md §10.4) and
// answers it: an ack when it had an id, error (and a failed ack) when it
// failed.
func (s *Server) handle(c *conn, msg wire.ClientMessage) {
	id := msg.CorrelationID()
	var result map[string]any
	var err error
	switch m := msg.(type) {
	case wire.Hello:
		s.hello(c, m.ID)
		return
	case wire.GoalSubmit:
		result, err = s.goalSubmit(m)
	case wire.UserMessage:
		err = s.userMessage(m)
	case wire.DecisionAnswerMsg:
		err = s.decisionAnswer(m)
	case wire.TaskActionMsg:
		err = s.taskAction(m)
	case wire.AgentActionMsg:
		err = s.agentAction(m)
	case wire.DiffRequest:
		d := s.diff(m)
		c.send(d)
		if id != "" {
			ack := wire.Ack{Re: id, OK: d.Error == ""}
			ack.Error = d.Error
			c.send(ack)
		}
		return
	case wire.RepoAdd:
		result, err = s.repoAdd(m)
	default:
		err = fmt.Errorf("%s is not handled", msg.MessageType())
	}
	if err != nil {
		c.fail(id, err)
		return
	}
	if id != "" {
		c.send(wire.Ack{Re: id, OK: true, Result: result})
	}
}

// goalSubmit: team.goal.submit in the repository repoId names (omitted:
// the most recently registered one; none registered: the daemon's
// team.repo).
func (s *Server) goalSubmit(m wire.GoalSubmit) (map[string]any, error) {
	cmd := &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: m.Text}
	s.mu.Lock()
	if m.RepoID != "" {
		r := s.m.repoByID(m.RepoID)
		if r == nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w %s", errUnknownRepo, echo(m.RepoID))
		}
		cmd.Cwd = r.path
	} else if n := len(s.m.repos); n > 0 {
		cmd.Cwd = s.m.repos[n-1].path
	}
	s.mu.Unlock()
	var data protocol.TeamGoalData
	if err := s.request(cmd, &data); err != nil {
		return nil, err
	}
	return map[string]any{"goalId": data.Goal.GoalID}, nil
}

// noAgent is the error for a name that names no agent, worded as the
// dialect's example words it.
func noAgent(name string) error { return fmt.Errorf("%w %s", errUnknownAgent, echo(name)) }

// userMessage: team.message to the agent To names, or with To "all" to the
// agent a leading "@name" names (the "@name" is taken off the text), else
// to everyone (the daemon hands that to the lead).
func (s *Server) userMessage(m wire.UserMessage) error {
	to, text := m.To, m.Text
	s.mu.Lock()
	if to == wire.All {
		if t := strings.TrimSpace(text); strings.HasPrefix(t, "@") {
			name, rest, _ := strings.Cut(t[1:], " ")
			name = strings.TrimRightFunc(name, func(r rune) bool { return unicode.IsPunct(r) })
			id, ok := s.m.resolveAgent(name)
			if !ok {
				s.mu.Unlock()
				return noAgent(name)
			}
			to, text = id, strings.TrimSpace(rest)
			if text == "" {
				text = m.Text
			}
		}
	} else {
		id, ok := s.m.resolveAgent(to)
		if !ok {
			s.mu.Unlock()
			return noAgent(to)
		}
		to = id
	}
	goalID := ""
	if g := s.m.currentGoal(); g != nil {
		goalID = g.GoalID
	}
	s.mu.Unlock()
	return s.request(&protocol.TeamMessage{Header: protocol.Header{Type: protocol.TypeTeamMessage}, GoalID: goalID, To: to, Text: text}, nil)
}

// decisionAnswer: team.decision.answer with the label the option names
// (a label, or an index into the decision's options).
func (s *Server) decisionAnswer(m wire.DecisionAnswerMsg) error {
	s.mu.Lock()
	d, ok := s.m.decisions[m.DecisionID]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %s", errUnknownDecision, echo(m.DecisionID))
	}
	cmd := &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, DecisionID: m.DecisionID, Text: m.Text}
	if m.Option != nil {
		label, ok := m.Option.Resolve(d.Options)
		if !ok {
			if m.Option.IsIndex {
				return fmt.Errorf("%w: index %d of %d options", errBadOption, m.Option.Index, len(d.Options))
			}
			return fmt.Errorf("%w %s", errBadOption, echo(m.Option.Label))
		}
		cmd.Option = label
	}
	return s.request(cmd, nil)
}

// taskAction: team.task.action, reassign's agent mapped to Shard's id and
// prioritize without a priority bumped above every task's.
func (s *Server) taskAction(m wire.TaskActionMsg) error {
	arg := m.Arg
	s.mu.Lock()
	switch m.Action {
	case wire.TaskReassign:
		id, ok := s.m.resolveAgent(arg)
		if !ok {
			s.mu.Unlock()
			return noAgent(arg)
		}
		arg = id
	case wire.TaskPrioritize:
		if arg == "" {
			top := 0
			for _, t := range s.m.tasks {
				top = max(top, t.Priority)
			}
			arg = strconv.Itoa(top + 1)
		}
	}
	s.mu.Unlock()
	return s.request(&protocol.TeamTaskAction{Header: protocol.Header{Type: protocol.TypeTeamTaskAction}, TaskID: m.TaskID, Action: string(m.Action), Arg: arg}, nil)
}

// resumePrompt is what resume tells a lead that was paused.
const resumePrompt = "Continue where you left off."

// agentAction maps pause, resume, stop and spawn to what Shard has
// (docs/agentcraft.md §10.4): pause aborts the turn (abort); resume
// retries the agent's blocked task, or prompts a lead to continue; stop
// terminates the agent's runtime (agent.terminate) and keeps it off
// shift; spawn brings it back on shift, and with a task id reassigns that
// task to it.
func (s *Server) agentAction(m wire.AgentActionMsg) error {
	s.mu.Lock()
	shardID, ok := s.m.resolveAgent(m.AgentID)
	if !ok {
		s.mu.Unlock()
		return noAgent(m.AgentID)
	}
	a := s.m.agent(shardID)
	lead := s.m.leads()[shardID]
	task := s.m.currentTask(shardID)
	wasPaused, wasStopped := a.paused, a.stopped
	switch m.Action {
	case wire.AgentPause:
		a.paused = true
	case wire.AgentResume:
		a.paused, a.stopped = false, false
	case wire.AgentStop:
		a.stopped = true
	case wire.AgentSpawn:
		a.paused, a.stopped = false, false
	}
	s.broadcastLocked(s.changedLocked()...)
	s.mu.Unlock()

	// A pause or stop the daemon refused takes its mark back.
	undo := func(err error) error {
		if err != nil {
			s.mu.Lock()
			a.paused, a.stopped = wasPaused, wasStopped
			s.broadcastLocked(s.changedLocked()...)
			s.mu.Unlock()
		}
		return err
	}
	switch m.Action {
	case wire.AgentPause:
		return undo(s.drive(shardID, &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: shardID}}))
	case wire.AgentResume:
		if !lead && task != nil && task.State == protocol.TaskBlocked {
			return s.request(&protocol.TeamTaskAction{Header: protocol.Header{Type: protocol.TypeTeamTaskAction}, TaskID: task.TaskID, Action: protocol.TaskActionRetry}, nil)
		}
		if lead {
			return s.drive(shardID, &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: shardID},
				Message: resumePrompt, StreamingBehavior: "follow_up"})
		}
		return nil
	case wire.AgentStop:
		return undo(s.request(&protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: shardID}}, nil))
	case wire.AgentSpawn:
		if m.Arg != "" {
			return s.request(&protocol.TeamTaskAction{Header: protocol.Header{Type: protocol.TypeTeamTaskAction}, TaskID: m.Arg, Action: protocol.TaskActionReassign, Arg: shardID}, nil)
		}
	}
	return nil
}

// drive sends a per-agent command, which needs an interactive
// attachment (docs/protocol.md §9.2): attach, send, detach.
func (s *Server) drive(shardID string, cmd protocol.Typed) error {
	if err := s.request(&protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: shardID}, Role: protocol.RoleInteractive}, nil); err != nil {
		return err
	}
	err := s.request(cmd, nil)
	if derr := s.request(&protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: shardID}}, nil); derr != nil {
		s.log.Warn("agentcraft: detach", "agent_id", shardID, "err", derr)
	}
	return err
}

// diff answers diff.request with workspace.diff of the worktree it names
// (a worktree id, or an agent id: that agent's current worktree). A diff
// that cannot be had is a diff with its error (docs/agentcraft.md §9 C10).
func (s *Server) diff(m wire.DiffRequest) wire.Diff {
	out := wire.Diff{RequestID: m.RequestID, RepoID: m.RepoID, Worktree: m.Worktree, Files: []wire.DiffFile{}}
	s.mu.Lock()
	ws := ""
	if s.m.repoByID(m.RepoID) == nil {
		s.mu.Unlock()
		out.Error = fmt.Sprintf("%v %s", errUnknownRepo, echo(m.RepoID))
		return out
	}
	for _, t := range s.m.tasks {
		if t.WorkspaceID == m.Worktree {
			ws = t.WorkspaceID
			break
		}
	}
	if ws == "" {
		if id, ok := s.m.resolveAgent(m.Worktree); ok {
			if t := s.m.currentTask(id); t != nil {
				ws = t.WorkspaceID
			}
		}
	}
	s.mu.Unlock()
	if ws == "" {
		out.Error = fmt.Sprintf("%v %s", errUnknownWorktree, echo(m.Worktree))
		return out
	}
	var data protocol.WorkspaceDiffData
	if err := s.request(&protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: ws}, &data); err != nil {
		out.Error = err.Error()
		return out
	}
	out.Base, out.Branch, out.Truncated = data.IntegrationTarget, data.Branch, data.Truncated
	out.Stats = wire.DiffStats{Files: data.Stats.Files, Additions: data.Stats.Additions, Deletions: data.Stats.Deletions}
	for _, f := range data.Files {
		out.Files = append(out.Files, diffFile(f))
	}
	return out
}

// diffFile converts Shard's diff file (the same shape in snake_case) to
// the dialect's.
func diffFile(f protocol.DiffFile) wire.DiffFile {
	out := wire.DiffFile{Path: f.Path, OldPath: f.OldPath, Status: wire.DiffFileStatus(f.Status), Binary: f.Binary,
		Additions: f.Additions, Deletions: f.Deletions, Hunks: []wire.DiffHunk{}}
	for _, h := range f.Hunks {
		wh := wire.DiffHunk{Header: h.Header, OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines, Lines: []wire.DiffLine{}}
		for _, l := range h.Lines {
			wl := wire.DiffLine{Kind: wire.DiffLineKind(l.Kind), Text: l.Text}
			// The line numbers a kind has are sent, whatever their value:
			// del and ctx lines have one in base, add and ctx in the branch.
			if wl.Kind != wire.LineAdd {
				n := l.OldNo
				wl.OldNo = &n
			}
			if wl.Kind != wire.LineDel {
				n := l.NewNo
				wl.NewNo = &n
			}
			wh.Lines = append(wh.Lines, wl)
		}
		out.Hunks = append(out.Hunks, wh)
	}
	return out
}
