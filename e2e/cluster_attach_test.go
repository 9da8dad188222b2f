//go:build linux

package e2e

import (
	"context"
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
// attach and prompt on n2's socket.
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
}
