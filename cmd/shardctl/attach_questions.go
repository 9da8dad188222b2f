package main

// How an attach session shows the questions of the agent (and of its
// delegated subagents) and sends the answers: the questionView of the
// shared question path (questioner.go).

import (
	"fmt"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// say shows a notification as a line.
func (s *attachSession) say(line string) { s.scr.line(line) }

// remark shows a note on the questions' course, dimmed.
func (s *attachSession) remark(line string) { s.scr.line(s.p.dim(line)) }

// sendAnswer queues the answer like any command: the loop never waits.
func (s *attachSession) sendAnswer(cmd protocol.Typed) error {
	s.command(cmd)
	return nil
}

// ask shows q: its details (and a select's options) as lines, and the
// question itself as the prompt (on a terminal) or as a line. A permission
// answer it did not take is first told the answers it takes.
func (s *attachSession) ask(q question, again bool) {
	if again && q.perm != nil {
		s.remark("(answer " + permissionChoices(q.perm) + "; " + strings.Trim(reasonNote, "()") + ")")
	}
	for _, l := range detailLines(q) {
		s.scr.line(l)
	}
	if p := q.perm; p != nil {
		if n := alwaysNote(p); n != "" {
			s.remark(n)
		}
		if len(p.Choices) > 0 {
			s.remark(reasonNote)
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
	return s.label(q.from) + questionText(q)
}

// questionText is questionPrompt without the subagent's label.
func questionText(q question) string {
	if p := q.perm; p != nil {
		ask := strings.Join(strings.Fields(p.Prompt), " ")
		if ask == "" {
			ask = allowQuestion(p)
		}
		return fmt.Sprintf("%s %s: ", ask, permissionChoices(p))
	}
	u := q.ui
	if u.Kind == protocol.UISelect {
		return fmt.Sprintf("%s %s: ", orDefault(uiHead(u), "Choose"), selectRange(u))
	}
	return uiQuestion(u)
}
