package main

// The questions of an attach session: asking the agent's (and its
// delegated subagents') permission and UI requests and answering them.

import (
	"fmt"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// handleDelegated takes a question of another agent: a subagent of the
// attached one with no interactive client of its own, whose permission and UI
// requests the daemon delegates to this attachment with the child's agent_id
// (docs/protocol.md §6.3). It is asked like the agent's own, naming the
// child, and answered with the child's agent_id. Other events of other agents
// are not this session's.
func (s *attachSession) handleDelegated(from string, msg protocol.Typed) {
	switch msg.(type) {
	case *protocol.PermissionRequest, *protocol.UIRequest, *protocol.PermissionResolved, *protocol.UIResolved:
	default:
		return
	}
	safeEvent(msg)
	switch m := msg.(type) {
	case *protocol.PermissionRequest:
		s.enqueue(question{perm: m, from: from})
	case *protocol.UIRequest:
		if m.Kind == protocol.UINotify {
			s.scr.line(s.childLabel(from) + notifyLine(m))
			break
		}
		s.enqueue(question{ui: m, from: from})
	case *protocol.PermissionResolved:
		s.resolved(m.RequestID, firstNonEmpty(m.Decision, m.ChoiceID), m.Source)
	case *protocol.UIResolved:
		s.resolved(m.RequestID, "answered", m.Source)
	}
	s.refreshPrompt()
}

// childLabel names the subagent a delegated question comes from, e.g.
// "[scout agent-02] ", and is empty for the attached agent.
func (s *attachSession) childLabel(from string) string {
	if from == "" || from == s.agentID {
		return ""
	}
	if n := s.names[from]; n != "" {
		return "[" + safe(n) + " " + safe(from) + "] "
	}
	return "[" + safe(from) + "] "
}

// asker is the agent_id an answer to q goes to.
func (s *attachSession) asker(q question) string {
	if q.from != "" {
		return q.from
	}
	return s.agentID
}

func (s *attachSession) enqueue(q question) {
	if s.push(q) {
		s.ask()
	}
}

// resolved drops a question that was answered (here or elsewhere).
func (s *attachSession) resolved(id, how, source string) {
	if note, askNext, ok := s.drop(id, how, source); ok {
		s.scr.line(s.p.dim(note))
		if askNext {
			s.ask()
		}
	}
}

// ask shows the question at the head of the queue: its details (and a
// select's options) as lines,
// and the question itself as the prompt (on a terminal) or as a line.
func (s *attachSession) ask() {
	q := s.questions[0]
	if p := q.perm; p != nil {
		for _, d := range p.Details {
			if d.Label != "" {
				s.scr.line(fmt.Sprintf("  %s: %s", d.Label, d.Value))
			} else {
				s.scr.line("  " + d.Value)
			}
		}
		if n := alwaysNote(p); n != "" {
			s.scr.line(s.p.dim(n))
		}
	} else if u := q.ui; u.Kind == protocol.UISelect {
		for i, opt := range u.Options {
			s.scr.line(fmt.Sprintf("  %d) %s", i+1, opt))
		}
	}
	if _, plain := s.scr.(*plainScreen); plain {
		s.scr.line(s.p.paint(sgrYellow, strings.TrimSpace(s.questionPrompt(q))))
	} else {
		s.scr.endText()
	}
	s.refreshPrompt()
}

// questionPrompt is the one-line form of a question.
func (s *attachSession) questionPrompt(q question) string {
	return s.childLabel(q.from) + s.questionText(q)
}

// questionText is questionPrompt without the subagent's label.
func (s *attachSession) questionText(q question) string {
	if p := q.perm; p != nil {
		ask := strings.Join(strings.Fields(p.Prompt), " ")
		if ask == "" {
			ask = fmt.Sprintf("Allow %s?", strings.TrimSpace(p.ToolName+" "+toolTarget(p.Input)))
		}
		return fmt.Sprintf("%s %s: ", ask, permissionChoices(p))
	}
	u := q.ui
	head := strings.Trim(strings.TrimSpace(strings.Join([]string{u.Title, u.Message}, " — ")), " —")
	switch u.Kind {
	case protocol.UISelect:
		return fmt.Sprintf("%s [1-%d]: ", orDefault(head, "Choose"), len(u.Options))
	case protocol.UIConfirm:
		return fmt.Sprintf("%s [y/n]: ", orDefault(head, "Confirm?"))
	}
	if u.Prefill != "" {
		return fmt.Sprintf("%s [%s]: ", orDefault(head, "Input"), u.Prefill)
	}
	return orDefault(head, "Input") + ": "
}

// answer applies a line to the head question.
func (s *attachSession) answer(ans lineResult) {
	q := s.questions[0]
	if strings.HasPrefix(ans.line, "//") {
		ans.line = ans.line[1:]
	}
	var cmd protocol.Typed
	if p := q.perm; p != nil {
		decision, ok := parseDecision(ans, p)
		if !ok {
			s.scr.line(s.p.dim("(answer " + permissionChoices(p) + ")"))
			s.ask()
			return
		}
		if ans.eof {
			s.scr.line(s.p.dim("(no input: deny)"))
		}
		cmd = &protocol.PermissionResponse{
			Header:    protocol.Header{Type: protocol.TypePermissionResponse, AgentID: s.asker(q)},
			RequestID: p.RequestID,
			Decision:  decision,
		}
	} else {
		value, ok := parseUIValue(ans, q.ui)
		if !ok {
			s.ask()
			return
		}
		cmd = &protocol.UIResponse{
			Header:    protocol.Header{Type: protocol.TypeUIResponse, AgentID: s.asker(q)},
			RequestID: q.ui.RequestID,
			Value:     value,
		}
	}
	s.questions = s.questions[1:]
	s.command(cmd)
	if len(s.questions) > 0 {
		s.ask()
	}
	s.refreshPrompt()
}
