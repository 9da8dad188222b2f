package daemon_test

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// turnMessages prompts agent id over c and returns the messages its turn
// completed, in order.
func turnMessages(t *testing.T, c *client.Conn, id, text string) []protocol.Message {
	t.Helper()
	var msgs []protocol.Message
	for _, e := range runTurn(t, c, id, text) {
		if mc, ok := e.Msg.(*protocol.MessageComplete); ok && mc.AgentID == id {
			msgs = append(msgs, mc.Message)
		}
	}
	return msgs
}

// texts is the text of each message, its text blocks joined.
func texts(msgs []protocol.Message) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		var b strings.Builder
		for _, blk := range m.Content {
			if blk.Type == protocol.BlockText {
				b.WriteString(blk.Text)
			}
		}
		out = append(out, m.Role+":"+b.String())
	}
	return out
}

// sessionList is the data of session_op list.
type sessionList struct {
	Sessions []struct {
		SessionID   string `json:"session_id"`
		Kind        string `json:"kind"`
		Entries     int    `json:"entries"`
		HeadEntryID string `json:"head_entry_id"`
	} `json:"sessions"`
}

func listSessions(t *testing.T, c *client.Conn, id string) sessionList {
	t.Helper()
	var l sessionList
	if err := c.Call(ctx(t), &protocol.SessionOp{Header: protocol.Header{Type: protocol.TypeSessionOp, AgentID: id}, Op: protocol.SessionOpList}, &l); err != nil {
		t.Fatalf("session_op list: %v", err)
	}
	return l
}

// A fork is adopted the way docs/protocol.md §10.1 says legacy clients
// adopt one: agent.create with the fork's session_id. The new agent's
// window is the fork's, it takes prompts, and the source never changes.
func TestForkIsAdoptedByAgentCreate(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	cwd := shortTemp(t)
	src := h.create(c, func(a *protocol.AgentCreate) { a.Cwd = cwd })
	attach(t, c, src, "")
	first := turnMessages(t, c, src, "sim: say one")
	turnMessages(t, c, src, "sim: say two")
	if len(first) == 0 || first[len(first)-1].Role != "assistant" {
		t.Fatalf("first turn completed %+v", first)
	}
	before := listSessions(t, c, src)

	var fork struct {
		ForkID      string `json:"fork_id"`
		SessionID   string `json:"session_id"`
		HeadEntryID string `json:"head_entry_id"`
	}
	if err := c.Call(ctx(t), &protocol.SessionOp{Header: protocol.Header{Type: protocol.TypeSessionOp, AgentID: src},
		Op: protocol.SessionOpFork, Args: &protocol.SessionOpArgs{FromEntryID: first[len(first)-1].ID}}, &fork); err != nil {
		t.Fatalf("session_op fork: %v", err)
	}

	forked := h.create(c, func(a *protocol.AgentCreate) { a.Cwd = cwd; a.SessionID = fork.SessionID })
	sync := attach(t, c, forked, "")
	want := []string{"user:sim: say one", "assistant:one"}
	if got := texts(sync.LiveWindow.Messages); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the adopted fork's window = %q, want %q", got, want)
	}
	if got := texts(turnMessages(t, c, forked, "sim: say three")); len(got) == 0 || got[len(got)-1] != "assistant:three" {
		t.Fatalf("the fork's turn completed %q", got)
	}
	if l := listSessions(t, c, forked); l.Sessions[0].SessionID != fork.SessionID {
		t.Fatalf("the adopted agent's session is %+v, want %s", l.Sessions[0], fork.SessionID)
	}

	// The source is untouched: the same transcript, and a fresh attach
	// shows its own two turns only.
	after := listSessions(t, c, src)
	if after.Sessions[0].Entries != before.Sessions[0].Entries || after.Sessions[0].HeadEntryID != before.Sessions[0].HeadEntryID {
		t.Fatalf("the source changed: %+v, was %+v", after.Sessions[0], before.Sessions[0])
	}
	c2 := h.dial()
	srcSync := attach(t, c2, src, "observer")
	if got := strings.Join(texts(srcSync.LiveWindow.Messages), "|"); got != "user:sim: say one|assistant:one|user:sim: say two|assistant:two" {
		t.Fatalf("the source's window = %q", got)
	}

	// Adopting it again is refused; the fork survives a restart of the
	// daemon with its own transcript.
	_, err := c.Request(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd, SessionID: fork.SessionID})
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("a second adoption answered %v, want INVALID_REQUEST", err)
	}
	_, err = c.Request(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd, SessionID: "sess-nosuchfork"})
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("adopting an unknown session answered %v, want NOT_FOUND", err)
	}
	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c3 := h2.dial()
	sync = attach(t, c3, forked, "")
	if got := strings.Join(texts(sync.LiveWindow.Messages), "|"); got != "user:sim: say one|assistant:one|user:sim: say three|assistant:three" {
		t.Fatalf("the fork's window after a daemon restart = %q", got)
	}

	// Removing the source keeps the fork another agent adopted.
	var rm protocol.AgentRemoveData
	if err := c3.Call(ctx(t), &protocol.AgentRemove{Header: protocol.Header{Type: protocol.TypeAgentRemove}, AgentIDs: []string{src}}, &rm); err != nil || !rm.Results[0].Removed {
		t.Fatalf("agent.remove of the source: %+v, %v", rm, err)
	}
	// Its runtime starts again from the fork's transcript on disk.
	if _, err := c3.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: forked}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := texts(turnMessages(t, c3, forked, "sim: say four")); len(got) == 0 || got[len(got)-1] != "assistant:four" {
		t.Fatalf("the fork's turn after its source was removed completed %q", got)
	}
	c4 := h2.dial()
	sync = attach(t, c4, forked, "observer")
	if got := strings.Join(texts(sync.LiveWindow.Messages), "|"); got != "user:sim: say one|assistant:one|user:sim: say three|assistant:three|user:sim: say four|assistant:four" {
		t.Fatalf("the fork's window after its source was removed = %q", got)
	}
}

// reasoningLevels is the data of list_reasoning_levels.
type reasoningLevels struct {
	Model  protocol.ModelDescriptor `json:"model"`
	Active string                   `json:"active"`
}

func activeLevel(t *testing.T, c *client.Conn, id string) string {
	t.Helper()
	var l reasoningLevels
	if err := c.Call(ctx(t), &protocol.ListReasoningLevels{Header: protocol.Header{Type: protocol.TypeListReasoningLevels, AgentID: id}}, &l); err != nil {
		t.Fatalf("list_reasoning_levels: %v", err)
	}
	return l.Active
}

// A reasoning level is session-scoped (docs/protocol.md §9.2): the runtime
// restored after a kill, and after a daemon restart, runs with the level
// set before. AgentInfo.usage (§11) outlives the daemon.
func TestReasoningLevelAndUsageOutliveRuntimes(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, func(a *protocol.AgentCreate) { a.Model = "sim-think" })
	attach(t, c, id, "")
	if got := activeLevel(t, c, id); got != "off" {
		t.Fatalf("initial level = %q, want the default off", got)
	}
	if _, err := c.Request(ctx(t), &protocol.SetReasoningLevel{Header: protocol.Header{Type: protocol.TypeSetReasoningLevel, AgentID: id},
		Model: "sim/sim-think", Effort: "high"}); err != nil {
		t.Fatalf("set_reasoning_level: %v", err)
	}
	waitFor(t, c, isType(protocol.TypeReasoningLevelChanged, id))

	// Killed (an idle reap stops it the same way) and restored by a prompt.
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: id}, Force: true}); err != nil {
		t.Fatal(err)
	}
	msgs := turnMessages(t, c, id, "sim: say after the restart")
	if got := activeLevel(t, c, id); got != "high" {
		t.Fatalf("level after a runtime restart = %q, want high", got)
	}
	if !thinks(msgs) {
		t.Fatalf("the restored runtime's turn did not think at level high: %+v", msgs)
	}
	usage := agentInfo(t, c, id).Usage
	if usage == nil || usage.Input == 0 || usage.Output == 0 {
		t.Fatalf("usage after a turn = %+v", usage)
	}

	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	if got := agentInfo(t, c2, id).Usage; got == nil || *got != *usage {
		t.Fatalf("usage after a daemon restart = %+v, want %+v", got, *usage)
	}
	attach(t, c2, id, "")
	turnMessages(t, c2, id, "sim: say once more")
	if got := activeLevel(t, c2, id); got != "high" {
		t.Fatalf("level after a daemon restart = %q, want high", got)
	}
	if got := agentInfo(t, c2, id).Usage; got == nil || got.Input <= usage.Input || got.Output <= usage.Output {
		t.Fatalf("usage after another turn = %+v, want more than %+v", got, *usage)
	}
}

// thinks reports whether an assistant message has a thinking block.
func thinks(msgs []protocol.Message) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == protocol.BlockThinking {
				return true
			}
		}
	}
	return false
}

func updateTitle(t *testing.T, c *client.Conn, id, title string) protocol.AgentInfo {
	t.Helper()
	var data protocol.AgentUpdateData
	if err := c.Call(ctx(t), &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: id}, Title: &title}, &data); err != nil {
		t.Fatalf("agent.update: %v", err)
	}
	return data.Info
}

func isUpdated(id, title string) func(client.Event) bool {
	return func(e client.Event) bool {
		u, ok := e.Msg.(*protocol.AgentUpdated)
		return ok && u.AgentID == id && u.Info.Title == title
	}
}

// An agent nobody named gets a title from its first accepted prompt,
// announced to every connection (agent_updated); agent.update sets and
// clears it, a title given by hand is never replaced, and titles outlive
// the daemon. The title's text is never logged.
func TestAgentTitles(t *testing.T) {
	h := start(t, nil)
	c, watcher := h.dial(), h.dial()
	auto := h.create(c, nil)
	attach(t, c, auto, "")
	turnMessages(t, c, auto, "  ## Fix the flaky\tlogin test, please   \nand more detail here")
	waitFor(t, watcher, isUpdated(auto, "Fix the flaky login test, please"))
	if got := agentInfo(t, c, auto).Title; got != "Fix the flaky login test, please" {
		t.Fatalf("automatic title = %q", got)
	}
	turnMessages(t, c, auto, "a second prompt")
	if got := agentInfo(t, c, auto).Title; got != "Fix the flaky login test, please" {
		t.Fatalf("the title changed with the second prompt: %q", got)
	}

	// Given by hand before the first prompt: kept.
	named := h.create(c, nil)
	if info := updateTitle(t, c, named, "Release notes"); info.Title != "Release notes" {
		t.Fatalf("agent.update answered %+v", info)
	}
	waitFor(t, watcher, isUpdated(named, "Release notes"))
	attach(t, c, named, "")
	turnMessages(t, c, named, "write the release notes")

	// Cleared: no automatic title comes back.
	updateTitle(t, c, auto, "")
	waitFor(t, watcher, isUpdated(auto, ""))
	turnMessages(t, c, auto, "sim: say third")

	// A named agent takes no automatic title.
	byName := h.create(c, func(a *protocol.AgentCreate) { a.Name = "builder" })
	attach(t, c, byName, "")
	turnMessages(t, c, byName, "build it")

	// Validation: a missing title and an unknown agent.
	_, err := c.Request(ctx(t), &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: auto}})
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("agent.update without a title answered %v", err)
	}
	long := strings.Repeat("x", protocol.MaxLabelLen+1)
	_, err = c.Request(ctx(t), &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: auto}, Title: &long})
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("agent.update with a title over the limit answered %v", err)
	}
	title := "x"
	_, err = c.Request(ctx(t), &protocol.AgentUpdate{Header: protocol.Header{Type: protocol.TypeAgentUpdate, AgentID: "agent-nosuch"}, Title: &title})
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("agent.update of an unknown agent answered %v", err)
	}

	if strings.Contains(h.log.String(), "flaky") {
		t.Fatalf("the daemon logged a title:\n%s", h.log.String())
	}
	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	for id, want := range map[string]string{auto: "", named: "Release notes", byName: ""} {
		if got := agentInfo(t, c2, id).Title; got != want {
			t.Errorf("title of %s after a daemon restart = %q, want %q", id, got, want)
		}
	}
}
