package agent

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
)

// Titles (docs/protocol.md §10.1, agent.update): the name a person reads
// for an Agent nobody named. The first prompt the runtime accepts gives an
// untitled, unnamed Agent an automatic title (autoTitle: its first line,
// cleaned and cut; no model call, so it costs nothing and is the same on
// every daemon); agent.update sets or clears one by hand. A title is given
// once: the manifest's Titled says so, and an automatic title never
// replaces a given one.
//
// Each title is committed before it is acknowledged and announced
// (agent_updated to every connection). The saves of one agent run one at a
// time, in the order asked (titleSaves), so the store and the actor never
// disagree on which came last. A title derives from a prompt: it is never
// logged.

// titleMaxRunes bounds an automatic title.
const titleMaxRunes = 60

// titleSave is one title to commit: a client's agent.update (client set)
// or the automatic title (auto).
type titleSave struct {
	title  string
	auto   bool
	client *Client
	header protocol.Header
}

// titleSaves are the title saves of the agent, the first in flight.
type titleSaves struct {
	titles []titleSave
}

// autoTitle is the automatic title of a prompt: its first line with text,
// list and heading markers dropped from its start, control characters
// dropped, spaces collapsed, and cut at a word to at most titleMaxRunes
// runes (an ellipsis says it was cut). "" when the prompt has no text.
func autoTitle(prompt string) string {
	var line string
	for l := range strings.SplitSeq(prompt, "\n") {
		if l = strings.TrimLeft(strings.TrimSpace(l), "#>*-+ \t"); l != "" {
			line = l
			break
		}
	}
	var b strings.Builder
	space := false
	for _, r := range line {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	title := b.String()
	if utf8.RuneCountInString(title) <= titleMaxRunes {
		return title
	}
	runes := []rune(title)[:titleMaxRunes-1]
	if cut := strings.LastIndexByte(string(runes), ' '); cut >= titleMaxRunes/2 {
		return strings.TrimRight(string(runes)[:cut], " ,.;:") + "…"
	}
	return string(runes) + "…"
}

// wantsAutoTitle reports whether the agent still takes an automatic
// title: nobody titled or named it (a subagent child has its alias and
// display name), and none is on its way.
func (a *Actor) wantsAutoTitle() bool {
	if a.m.Titled || a.m.Name != "" || a.m.DisplayName != "" || a.m.Alias != "" {
		return false
	}
	for _, s := range a.titles {
		if s.auto {
			return false
		}
	}
	return true
}

// autoTitleFrom titles the agent from the prompt its runtime accepted,
// when it still takes an automatic title.
func (a *Actor) autoTitleFrom(prompt string) {
	if !a.wantsAutoTitle() {
		return
	}
	if t := autoTitle(prompt); t != "" {
		a.queueTitle(titleSave{title: t, auto: true})
	}
}

// update handles agent.update.
func (a *Actor) update(r *Request) {
	a.queueTitle(titleSave{title: *r.Cmd.(*protocol.AgentUpdate).Title, client: r.Client, header: r.Header})
}

func (a *Actor) queueTitle(s titleSave) {
	a.titles = append(a.titles, s)
	if len(a.titles) == 1 {
		a.saveNextTitle()
	}
}

// saveNextTitle starts the commit of the first queued title. An automatic
// title that a given one overtook is dropped.
func (a *Actor) saveNextTitle() {
	for len(a.titles) > 0 {
		s := a.titles[0]
		if s.auto && a.m.Titled {
			a.titles = a.titles[1:]
			continue
		}
		if a.deps.SaveTitle == nil {
			a.sys.Root.Send(a.self, &titleSaved{})
			return
		}
		id, title, save, sys, self := a.m.AgentID, s.title, a.deps.SaveTitle, a.sys, a.self
		if a.deps.Goroutines.Go(func() { sys.Root.Send(self, &titleSaved{err: save(id, title)}) }) {
			return
		}
		a.titles = a.titles[1:]
		s.fail(protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
	}
}

// onTitleSaved applies, announces and acknowledges the title whose commit
// ended, then starts the next.
func (a *Actor) onTitleSaved(c actor.Context, m *titleSaved) {
	if len(a.titles) == 0 {
		return
	}
	s := a.titles[0]
	a.titles = a.titles[1:]
	if m.err != nil {
		a.log.Error("title not saved", "auto", s.auto, "err", m.err)
		s.fail(protocol.Errorf(protocol.CodeInternal, "save the title: %v", m.err))
	} else {
		a.m.Title, a.m.Titled = s.title, true
		a.notifyInfo(c)
		info := a.Info()
		a.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentUpdated{
			Header: protocol.Header{Type: protocol.TypeAgentUpdated, AgentID: a.m.AgentID}, Info: info}))
		if s.client != nil {
			s.client.Send(protocol.NewResponse(s.header.ID, s.header.Type, protocol.AgentUpdateData{Info: info}))
		}
	}
	a.saveNextTitle()
}

// failTitles answers the queued agent.update commands with err (the actor
// stops).
func (a *Actor) failTitles(err *protocol.Error) {
	for _, s := range a.titles {
		s.fail(err)
	}
	a.titles = nil
}

// fail answers the client that asked for s, if one did.
func (s titleSave) fail(err *protocol.Error) {
	if s.client != nil {
		s.client.Send(protocol.NewErrorResponse(s.header.ID, s.header.Type, err))
	}
}
