//go:build linux

package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/protocol"
)

// threeNodes starts a three-node cluster and waits until each serves.
func threeNodes(t *testing.T) (nodes []*daemon, homes []string, mesh *clustertest.Mesh, token string) {
	t.Helper()
	mesh = clustertest.NewMesh(t, 3)
	token = randomToken(t, "cluster-token")
	homes = []string{newHome(t), newHome(t), newHome(t)}
	nodes = make([]*daemon, 3)
	for i := range nodes {
		nodes[i] = clusterNode(t, mesh, i, homes[i], token)
	}
	for _, d := range nodes {
		d.waitServing()
	}
	return nodes, homes, mesh, token
}

// evConn is a client of one node whose events the test reads in order.
type evConn struct {
	t   *testing.T
	c   *client.Conn
	evs chan protocol.Typed
}

// dialEvents connects to d; its events are kept for waitFor.
func dialEvents(t *testing.T, d *daemon) *evConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &evConn{t: t, c: c, evs: make(chan protocol.Typed, 1<<14)}
	go func() {
		defer close(e.evs)
		for ev := range c.Events() {
			e.evs <- ev.Msg
		}
	}()
	return e
}

// call is call on e's connection.
func (e *evConn) call(msg protocol.Typed, data any) {
	e.t.Helper()
	call(e.t, e.c, msg, data)
}

// try sends msg and returns its error, if any.
func (e *evConn) try(msg protocol.Typed) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.c.Request(ctx, msg)
	return err
}

// waitFor reads e's events until one satisfies want, and returns it.
func (e *evConn) waitFor(what string, want func(protocol.Typed) bool) protocol.Typed {
	e.t.Helper()
	timeout := time.After(clusterWait)
	for {
		select {
		case m, ok := <-e.evs:
			if !ok {
				e.t.Fatalf("connection ended waiting for %s: %v", what, e.c.Err())
			}
			if want(m) {
				return m
			}
		case <-timeout:
			e.t.Fatalf("timed out after %s: %s", clusterWait, what)
		}
	}
}

// of reports whether m is an event of type typ for agent id.
func of(typ, id string) func(protocol.Typed) bool {
	return func(m protocol.Typed) bool { h := m.Head(); return h.Type == typ && h.AgentID == id }
}

func attachCmd(id string) *protocol.AgentAttach {
	return &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}
}

func promptCmd(id, text string) *protocol.Prompt {
	return &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: text}
}

// streamed collects the text of e's message_delta events for agent id
// until its turn ends.
func (e *evConn) streamed(id string) string {
	e.t.Helper()
	var b strings.Builder
	e.waitFor("turn_end of "+id, func(m protocol.Typed) bool {
		switch m := m.(type) {
		case *protocol.MessageDelta:
			if m.AgentID == id && m.Kind == protocol.DeltaText {
				b.WriteString(m.TextDelta)
			}
		case *protocol.TurnEnd:
			return m.AgentID == id
		}
		return false
	})
	return b.String()
}

// TestClusterCrossNodeAttach: an agent of n3 is attached and prompted
// through n2 as if it were n2's: over the wire (the attach's sync and the
// turn's streamed deltas arrive with the agent's id), and with shardctl
// attach and prompt on n2's socket. A permission request raised on n3 is
// answered first by a WebSocket client of n2 while a client of n3 is
// attached too: n2's answer wins, with its transport as the source, and
// n3's later answer is acknowledged and dropped, as a late answer on one
// node. Closing n2's clients ends their attachments on n3.
func TestClusterCrossNodeAttach(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n2, n3 := nodes[1], nodes[2]

	c3 := dialEvents(t, n3)
	a3 := createOn(t, c3.c)
	waitListed(t, n2, "n2 lists n3's agent", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, a3)
		return ok && in.Node == "n3"
	})

	c2 := dialEvents(t, n2)
	c2.call(attachCmd(a3), nil)
	c2.waitFor("sync of n3's agent on n2", of(protocol.TypeSync, a3))
	c2.call(promptCmd(a3, "sim: say hello from n3"), nil)
	if got := c2.streamed(a3); got != "hello from n3" {
		t.Fatalf("streamed through n2: %q", got)
	}

	// shardctl on n2's socket: attach (a prompt typed on stdin) and prompt.
	// The first turn titled the agent; n2 prints the title's change (from
	// the directory) when it arrives, so let it arrive first.
	waitListed(t, n2, "n2 lists the title of n3's agent", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, a3)
		return ok && in.Title != ""
	})
	r := n2.mustCtl("typed through n2\n", "attach", a3)
	if !strings.Contains(r.stdout, "You said: typed through n2") {
		t.Fatalf("shardctl attach through n2:\n%s%s", r.stdout, r.stderr)
	}
	r = n2.mustCtl("", "prompt", a3, "sim: say prompted through n2")
	if !strings.Contains(r.stdout, "prompted through n2") {
		t.Fatalf("shardctl prompt through n2:\n%s%s", r.stdout, r.stderr)
	}
	// The attachment through n2 saw those turns too.
	if got := c2.streamed(a3); !strings.Contains(got, "You said: typed through n2") {
		t.Fatalf("n2's attachment saw %q", got)
	}

	// First answer wins across nodes.
	ws2 := dialWSEvents(t, n2)
	ws2.call(attachCmd(a3), nil)
	ws2.waitFor("sync of n3's agent on n2's WebSocket", of(protocol.TypeSync, a3))
	c3.call(attachCmd(a3), nil)
	c3.waitFor("sync on n3", of(protocol.TypeSync, a3))
	if n := attachedOn(t, c3, a3); n != 3 {
		t.Fatalf("n3 counts %d attachments of %s, want 3 (two through n2, one of its own)", n, a3)
	}
	c3.call(promptCmd(a3, `sim: tool write {"path":"out.txt","content":"from n2"}`), nil)
	req := ws2.waitFor("permission_request on n2's WebSocket", of(protocol.TypePermissionRequest, a3)).(*protocol.PermissionRequest)
	if r3 := c3.waitFor("permission_request on n3", of(protocol.TypePermissionRequest, a3)).(*protocol.PermissionRequest); r3.RequestID != req.RequestID {
		t.Fatalf("the request differs: %s on n2, %s on n3", req.RequestID, r3.RequestID)
	}
	ws2.call(permResponse(a3, req.RequestID, protocol.DecisionAllow), nil)
	if err := c3.try(permResponse(a3, req.RequestID, protocol.DecisionDeny)); err != nil {
		t.Fatalf("n3's late answer: %v, want it acknowledged and dropped", err)
	}
	for _, e := range []*evConn{ws2, c3, c2} {
		res := e.waitFor("permission_resolved", of(protocol.TypePermissionResolved, a3)).(*protocol.PermissionResolved)
		if res.RequestID != req.RequestID || res.Decision != protocol.DecisionAllow || res.Source != "websocket" {
			t.Errorf("permission_resolved: %+v, want n2's allow from its websocket", res)
		}
		tr := e.waitFor("tool_result", of(protocol.TypeToolResult, a3)).(*protocol.ToolResult)
		if tr.IsError {
			t.Errorf("the allowed write failed: %+v", tr)
		}
	}

	// Closing n2's clients detaches them on n3.
	ws2.c.Close()
	eventually(t, clusterWait, "n3 sees n2's WebSocket client go", func() bool { return attachedOn(t, c3, a3) == 2 })
	c2.c.Close()
	eventually(t, clusterWait, "n3 sees n2's unix client go", func() bool { return attachedOn(t, c3, a3) == 1 })
}

// dialWSEvents connects to d's WebSocket endpoint with a ticket minted
// over its unix socket; its events are kept for waitFor.
func dialWSEvents(t *testing.T, d *daemon) *evConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ticket protocol.WSTicketData
	call(t, d.dial(), &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &ticket)
	c, err := client.DialWebSocket(ctx, "ws"+strings.TrimPrefix(ticket.URL, "http"), ticket.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &evConn{t: t, c: c, evs: make(chan protocol.Typed, 1<<14)}
	go func() {
		defer close(e.evs)
		for ev := range c.Events() {
			e.evs <- ev.Msg
		}
	}()
	return e
}

// attachedOn is AgentInfo.attached_clients of agent id on e's node.
func attachedOn(t *testing.T, e *evConn, id string) int {
	t.Helper()
	var st protocol.AgentListData
	e.call(&protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &st)
	if len(st.Agents) != 1 {
		t.Fatalf("agent.status of %s: %+v", id, st)
	}
	return st.Agents[0].AttachedClients
}

func permResponse(id, reqID, decision string) *protocol.PermissionResponse {
	return &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: id},
		RequestID: reqID, Decision: decision}
}

// TestClusterCrossNodeCreate: agent.create with node n3 through n1 makes
// the agent on n3, and n1's client attaches and prompts it at once (before
// n1's directory lists it); shardctl agents create --node does the same; a
// node that is no member is INVALID_REQUEST. With n3 SIGKILLed, n1's
// attachment is told it ended and every command for n3's agent, and a
// create on n3, is NODE_UNAVAILABLE naming n3.
func TestClusterCrossNodeCreate(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n1, n3 := nodes[0], nodes[2]

	c1 := dialEvents(t, n1)
	var created protocol.AgentCreateData
	c1.call(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t), Node: "n3"}, &created)
	a := created.AgentID
	c1.call(attachCmd(a), nil)
	c1.waitFor("sync of the agent made on n3", of(protocol.TypeSync, a))
	c1.call(promptCmd(a, "sim: say made through n1"), nil)
	if got := c1.streamed(a); got != "made through n1" {
		t.Fatalf("streamed through n1: %q", got)
	}
	on3, err := listOn(t, n3, protocol.AgentList{})
	if in, ok := agentOf(on3.Agents, a); err != nil || !ok || in.Node != "n3" {
		t.Fatalf("n3's agent.list: %+v, %v; want %s on n3", on3.Agents, err, a)
	}

	// shardctl through n1.
	b := strings.TrimSpace(n1.mustCtl("", "agents", "create", "--cwd", shortTemp(t), "--node", "n3").stdout)
	waitListed(t, n3, "n3 hosts the agent shardctl made through n1", func(l []protocol.AgentInfo) bool {
		in, ok := agentOf(l, b)
		return ok && in.Node == "n3"
	})
	if r := n1.ctl("", "agents", "create", "--cwd", shortTemp(t), "--node", "n9"); r.code == 0 || !strings.Contains(r.stderr, `node "n9" is not a node of this cluster`) {
		t.Fatalf("agents create --node n9: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	err = c1.try(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t), Node: "n9"})
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("agent.create on n9: %v, want INVALID_REQUEST", err)
	}

	// n3 dies: the attachment through n1 ends with an error naming n3,
	// and commands for its agents are NODE_UNAVAILABLE. (n1's directory
	// lists them first: once the connection that learnt a's node is gone,
	// the directory is what places it.)
	waitListed(t, n1, "n1 lists both agents made on n3", func(l []protocol.AgentInfo) bool {
		x, okA := agentOf(l, a)
		y, okB := agentOf(l, b)
		return okA && okB && x.Node == "n3" && y.Node == "n3"
	})
	n3.kill()
	n3.waitExit(t, exitTimeout)
	ev := c1.waitFor("the error ending the attachment", of(protocol.TypeError, a)).(*protocol.ErrorEvent)
	if ev.Code != protocol.CodeNodeUnavailable || !strings.Contains(ev.Message, "node n3 is unavailable") || ev.Fatal {
		t.Fatalf("error event: %+v", ev)
	}
	unavailable := func(what string, err error) {
		t.Helper()
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeNodeUnavailable || !strings.Contains(pe.Message, "node n3 is unavailable") {
			t.Fatalf("%s with n3 down: %v", what, err)
		}
		if d, _ := pe.Data.(map[string]any); d["node"] != "n3" {
			t.Fatalf("%s with n3 down: error data %#v, want node n3", what, pe.Data)
		}
	}
	unavailable("prompt", c1.try(promptCmd(a, "anyone there?")))
	waitNode(t, n1, "n1 sees n3 dead", "n3", func(n protocol.ClusterNode) bool { return n.Health == protocol.NodeDead })
	unavailable("prompt of a dead node's agent", c1.try(promptCmd(a, "anyone there?")))
	unavailable("attach of a dead node's agent", dialEvents(t, n1).try(attachCmd(b)))
	unavailable("agent.create on a dead node", c1.try(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t), Node: "n3"}))
	if r := n1.ctl("", "prompt", a, "hello"); r.code == 0 || !strings.Contains(r.stderr, "NODE_UNAVAILABLE") {
		t.Fatalf("shardctl prompt with n3 dead: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
