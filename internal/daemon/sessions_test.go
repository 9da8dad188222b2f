package daemon_test

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// turn prompts agent id over c and returns the messages its turn
// completed, in order.
func turn(t *testing.T, c *client.Conn, id, text string) []protocol.Message {
	t.Helper()
	prompt(t, c, id, text)
	var msgs []protocol.Message
	for _, e := range collectUntil(t, c, isType(protocol.TypeTurnEnd, id)) {
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
	first := turn(t, c, src, "sim: say one")
	turn(t, c, src, "sim: say two")
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
	if got := texts(turn(t, c, forked, "sim: say three")); len(got) == 0 || got[len(got)-1] != "assistant:three" {
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
}
