package main

import (
	"io"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestAttachFailsOverToAnotherNode: attach through n2 of a cluster; n2
// drops the connection and stops listening. Attach goes on through n3,
// the next node of n2's cluster.status (n1's socket is never needed),
// shows what the agent did meanwhile (the messages of n3's sync after
// the last one shown through n2, the ones already shown not again), and
// a prompt typed after it runs through n3.
func TestAttachFailsOverToAnotherNode(t *testing.T) {
	msg := func(id, role, text string) protocol.Message {
		return protocol.Message{ID: id, Role: role, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: text}}}
	}
	before := []protocol.Message{msg("m1", "user", "first question"), msg("m2", "assistant", "first answer")}
	meanwhile := []protocol.Message{msg("m3", "user", "asked elsewhere"), msg("m4", "assistant", "answered while away")}
	stdin, typing := io.Pipe()
	defer typing.Close()

	var nodes []protocol.ClusterNode
	status := func(c *daemonConn, hd protocol.Header, name string) {
		c.respond(hd, protocol.ClusterStatusData{Enabled: true, Node: name, Nodes: nodes})
	}
	var n2 *fakeDaemon
	attached := false // n2's handler runs on one connection's goroutine at a time
	n1 := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		if hd.Type == protocol.TypeClusterStatus {
			status(c, hd, "n1")
			return
		}
		t.Errorf("n1 got %s: attach should have failed over to n3", hd.Type)
		c.respond(hd, nil)
	})
	n2 = newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeClusterStatus:
			status(c, hd, "n2")
		case protocol.TypeAgentAttach:
			attached = true
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA, Node: "n1"}})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), Status: protocol.StatusIdle, LiveWindow: protocol.LiveWindow{Messages: before}})
		case protocol.TypeAgentList:
			if !attached { // resolving the agent's name
				c.respond(hd, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: agentA, Node: "n1"}}})
				return
			}
			// The session's last request at its start: n2 dies now.
			c.respond(hd, protocol.AgentListData{})
			n2.ln.Close()
			c.close()
		default:
			c.respond(hd, nil)
		}
	})
	n3 := newFakeDaemon(t, func(c *daemonConn, hd protocol.Header, rec []byte) {
		switch hd.Type {
		case protocol.TypeClusterStatus:
			status(c, hd, "n3")
		case protocol.TypeAgentAttach:
			c.respond(hd, protocol.AgentAttachData{Status: protocol.StatusIdle, Info: protocol.AgentInfo{AgentID: agentA, Node: "n1"}})
			c.send(protocol.Sync{Header: ev(protocol.TypeSync, agentA), Status: protocol.StatusIdle,
				LiveWindow: protocol.LiveWindow{Messages: append(append([]protocol.Message(nil), before...), meanwhile...)}})
			go func() {
				_, _ = io.WriteString(typing, "after failover\n")
				typing.Close()
			}()
		case protocol.TypePrompt:
			var p protocol.Prompt
			mustUnmarshal(t, rec, &p)
			c.respond(hd, nil)
			c.send(turnStart("t9"))
			c.send(textDelta(agentA, "You said: "+p.Message))
			c.send(protocol.MessageComplete{Header: ev(protocol.TypeMessageComplete, agentA), MessageID: "m6"})
			c.send(turnEnd("t9"))
		default:
			c.respond(hd, nil)
		}
	})
	nodes = []protocol.ClusterNode{
		{Node: "n1", Health: protocol.NodeAlive, Socket: n1.path},
		{Node: "n2", Health: protocol.NodeAlive, Socket: n2.path},
		{Node: "n3", Health: protocol.NodeAlive, Socket: n3.path},
	}
	r := runCtlIn(t, nil, n2.path, stdin, "attach", "--reconnect", "5s", agentA)
	if r.code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	out := r.stdout
	for _, want := range []string{"first answer", "reconnecting for up to 5s", "(reconnected through node n3; node n2 is gone)",
		"— while reconnecting: 2 messages —", "you: asked elsewhere", "answered while away", "You said: after failover"} {
		if !strings.Contains(out, want) {
			t.Errorf("attach output lacks %q:\n%s", want, out)
		}
	}
	for _, once := range []string{"first answer", "answered while away"} {
		if n := strings.Count(out, once); n != 1 {
			t.Errorf("%q shown %d times, want once:\n%s", once, n, out)
		}
	}
	if i, j := strings.Index(out, "(reconnected through node n3"), strings.Index(out, "answered while away"); i < 0 || j < i {
		t.Errorf("the resync is not after the reconnect:\n%s", out)
	}
	if got := len(n3.records(protocol.TypePrompt)); got != 1 {
		t.Errorf("n3 got %d prompts, want 1", got)
	}
}
