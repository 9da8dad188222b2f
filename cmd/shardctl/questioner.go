package main

// The question path attach and prompt share: how an agent's permission and
// UI requests are queued, asked one at a time and answered from a line the
// user typed. Where the question shows and how the answer travels is each
// command's own (a questionView).

import (
	"fmt"
	"slices"

	"github.com/shard-dev/shard/protocol"
)

// question is a permission or UI request waiting for the user.
type question struct {
	perm *protocol.PermissionRequest
	ui   *protocol.UIRequest
	// from is the agent that asks when it is not the attached one: a
	// subagent with no interactive client of its own, whose questions the
	// daemon delegates to its parent's attachment (docs/protocol.md §6.3);
	// the answer carries its agent_id. from is empty for the attached agent.
	from string
}

func (q question) id() string {
	if q.perm != nil {
		return q.perm.RequestID
	}
	return q.ui.RequestID
}

// response turns the user's line into the answer to q, sent to agentID; ok
// is false for a line q does not take (it is asked again). End of input
// takes the default: deny, or cancel. A permission is answered with a
// choice_id when the request offers choices (docs/protocol.md §9.5), and
// carries the reason typed after the answer.
func (q question) response(agentID string, ans lineResult) (cmd protocol.Typed, ok bool) {
	if p := q.perm; p != nil {
		a, ok := parsePermission(ans, p)
		if !ok {
			return nil, false
		}
		return a.response(agentID, p.RequestID), true
	}
	value, ok := parseUIValue(ans, q.ui)
	if !ok {
		return nil, false
	}
	return &protocol.UIResponse{
		Header:    protocol.Header{Type: protocol.TypeUIResponse, AgentID: agentID},
		RequestID: q.ui.RequestID,
		Value:     value,
	}, true
}

// questionQueue holds the questions waiting for the user, oldest first.
// Each request id is queued once, so one that is both in a sync and
// broadcast is asked once.
type questionQueue struct {
	questions []question
	seen      map[string]bool
}

// push queues q and reports whether it is now the head (to be asked).
func (qq *questionQueue) push(q question) (head bool) {
	if qq.seen == nil {
		qq.seen = map[string]bool{}
	}
	if qq.seen[q.id()] {
		return false
	}
	qq.seen[q.id()] = true
	qq.questions = append(qq.questions, q)
	return len(qq.questions) == 1
}

// drop removes the question with id, answered here or elsewhere: ok says
// it was queued, note is the line to show, askNext that a new head must be
// asked.
func (qq *questionQueue) drop(id, how, source string) (note string, askNext, ok bool) {
	i := slices.IndexFunc(qq.questions, func(q question) bool { return q.id() == id })
	if i < 0 {
		return "", false, false
	}
	qq.questions = slices.Delete(qq.questions, i, i+1)
	if source != "" {
		how += " by " + source
	}
	return fmt.Sprintf("(%s: %s)", id, how), i == 0 && len(qq.questions) > 0, true
}

// questionView is where a command puts questions before the user and how
// it sends their answers: attach's screen and its command queue, prompt's
// stderr and a request that keeps draining events.
type questionView interface {
	// say shows a line as it is: a notification, which needs no answer.
	say(line string)
	// remark shows a line about the questions' course: one answered
	// elsewhere, a default taken at the end of input.
	remark(line string)
	// ask puts q, the head of the queue, before the user; again says the
	// line just typed was not an answer q takes.
	ask(q question, again bool)
	// sendAnswer sends the response to a question; an error ends the
	// command.
	sendAnswer(cmd protocol.Typed) error
}

// questioner answers an agent's questions for attach and prompt: it queues
// the permission and UI requests as they arrive, asks them one at a time,
// oldest first, sends the answer the user's line makes, and drops a
// question answered elsewhere.
type questioner struct {
	questionQueue
	view    questionView
	agentID string // the attached agent
	// names maps agent ids to names, to say which subagent asks a delegated
	// question; attach fills it in the background, prompt leaves it empty.
	names map[string]string
}

// questionEvent reports whether msg is one a questioner takes.
func questionEvent(msg protocol.Typed) bool {
	switch msg.(type) {
	case *protocol.PermissionRequest, *protocol.UIRequest, *protocol.PermissionResolved, *protocol.UIResolved:
		return true
	}
	return false
}

// take handles msg if it is a question's event (see questionEvent) and
// reports whether it was. from is the agent that sent it when that is not
// the attached one, else empty.
func (qs *questioner) take(from string, msg protocol.Typed) bool {
	switch m := msg.(type) {
	case *protocol.PermissionRequest:
		qs.enqueue(question{perm: m, from: from})
	case *protocol.UIRequest:
		if m.Kind == protocol.UINotify {
			qs.view.say(qs.label(from) + notifyLine(m))
			break
		}
		qs.enqueue(question{ui: m, from: from})
	case *protocol.PermissionResolved:
		qs.resolved(m.RequestID, firstNonEmpty(m.Decision, m.ChoiceID), m.Source)
	case *protocol.UIResolved:
		qs.resolved(m.RequestID, "answered", m.Source)
	default:
		return false
	}
	return true
}

func (qs *questioner) enqueue(q question) {
	if qs.push(q) {
		qs.view.ask(q, false)
	}
}

// resolved drops a question that was answered (here or elsewhere).
func (qs *questioner) resolved(id, how, source string) {
	if note, askNext, ok := qs.drop(id, how, source); ok {
		qs.view.remark(note)
		if askNext {
			qs.view.ask(qs.questions[0], false)
		}
	}
}

// answer applies a line to the head question: a line it takes answers it
// and the next question is asked, another asks it again.
func (qs *questioner) answer(ans lineResult) error {
	q := qs.questions[0]
	cmd, ok := q.response(qs.asker(q), ans)
	if !ok {
		qs.view.ask(q, true)
		return nil
	}
	if ans.eof && q.perm != nil {
		qs.view.remark("(no input: deny)")
	}
	qs.questions = qs.questions[1:]
	if err := qs.view.sendAnswer(cmd); err != nil {
		return err
	}
	if len(qs.questions) > 0 {
		qs.view.ask(qs.questions[0], false)
	}
	return nil
}

// asker is the agent_id an answer to q goes to.
func (qs *questioner) asker(q question) string {
	if q.from != "" {
		return q.from
	}
	return qs.agentID
}

// label names the subagent a delegated question comes from, e.g.
// "[scout agent-02] ", and is empty for the attached agent.
func (qs *questioner) label(from string) string {
	if from == "" || from == qs.agentID {
		return ""
	}
	if n := qs.names[from]; n != "" {
		return "[" + safe(n) + " " + safe(from) + "] "
	}
	return "[" + safe(from) + "] "
}
