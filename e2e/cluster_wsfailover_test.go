//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// TestClusterWebSocketFailover: a Go client connected through n2's
// WebSocket (an API token of n2's) attaches n1's agent. n2 is SIGKILLed
// and a turn runs on n1 meanwhile. The client's client.Failover (Web)
// goes on through n3's web_url (the next node of n2's cluster.status,
// with n3's own token: n2's is refused there, each node keeps its own
// credentials), re-attaches, and the resync (the messages after the last
// one it had seen) is exactly the missed turn; a prompt then runs
// through n3.
func TestClusterWebSocketFailover(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n2 := nodes[1]
	webs, tokens := webDoors(t, nodes, n2)

	c1, a1 := agentWithATurn(t, nodes)

	// The client of n2's WebSocket, as any Go client would be.
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	u2, err := client.WebSocketURL(webs["n2"])
	if err != nil {
		t.Fatal(err)
	}
	ws, err := client.DialWebSocketToken(ctx, u2, tokens["n2"])
	if err != nil {
		t.Fatal(err)
	}
	fo := &client.Failover{Web: true}
	st, err := client.ClusterStatus(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	fo.Observe(st)
	var got []string
	for _, n := range fo.Candidates() {
		got = append(got, n.Node)
	}
	if strings.Join(got, ",") != "n3,n1,n2" || fo.Node() != "n2" {
		t.Fatalf("candidates %v through %q, want n3,n1,n2 through n2", got, fo.Node())
	}
	e2 := wrapEvents(t, ws)
	e2.call(attachCmd(a1), nil)
	sync := e2.waitFor("sync through n2's WebSocket", of(protocol.TypeSync, a1)).(*protocol.Sync)
	msgs := sync.LiveWindow.Messages
	if len(msgs) == 0 || !strings.Contains(text(msgs[len(msgs)-1]), "before the failover") {
		t.Fatalf("sync through n2: %+v", msgs)
	}
	last := msgs[len(msgs)-1].ID

	n2.kill()
	n2.waitExit(t, clusterWait)
	eventually(t, clusterWait, "the connection through n2 drops", func() bool { return ws.Err() != nil })
	c1.call(promptCmd(a1, "sim: say while the client was away"), nil)
	if got := c1.streamed(a1); got != "while the client was away" {
		t.Fatalf("turn while away: %q", got)
	}

	// A credential is its node's: n2's token does not open n3's door.
	u3, err := client.WebSocketURL(webs["n3"])
	if err != nil {
		t.Fatal(err)
	}
	if c, err := client.DialWebSocketToken(ctx, u3, tokens["n2"]); err == nil || !strings.Contains(err.Error(), "401") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("n2's token at n3: %v, want HTTP 401", err)
	}

	dial := client.WebDialer(func(_ context.Context, n protocol.ClusterNode) (client.WebCredential, error) {
		return client.WebCredential{Token: tokens[n.Node]}, nil
	})
	var e3 *evConn
	resume := func(ctx context.Context, c *client.Conn) error {
		e3 = wrapEvents(t, c)
		return c.Call(ctx, attachCmd(a1), nil)
	}
	from := fo.Node()
	var conn *client.Conn
	var through protocol.ClusterNode
	eventually(t, clusterWait, "a reconnect through another node", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
		defer rcancel()
		conn, through, err = fo.Reconnect(rctx, dial, resume)
		return err == nil
	})
	if note := client.FailoverNote(from, through.Node); through.Node != "n3" || fo.Node() != "n3" || note != "reconnected through node n3; node n2 is gone" {
		t.Fatalf("reconnected through %q (now %q): %q", through.Node, fo.Node(), note)
	}
	sync = e3.waitFor("sync through n3's WebSocket", of(protocol.TypeSync, a1)).(*protocol.Sync)
	missed, found := client.MessagesAfter(sync.LiveWindow.Messages, last)
	var texts []string
	for _, m := range missed {
		texts = append(texts, m.Role+": "+text(m))
	}
	if !found || strings.Join(texts, "|") != "user: sim: say while the client was away|assistant: while the client was away" {
		t.Fatalf("resync after %s (found %v): %q", last, found, texts)
	}
	e3.call(promptCmd(a1, "sim: say after the failover"), nil)
	if got := e3.streamed(a1); got != "after the failover" {
		t.Fatalf("a prompt through n3: %q", got)
	}
	conn.Close()
}

// wrapEvents keeps c's events for waitFor.
func wrapEvents(t *testing.T, c *client.Conn) *evConn {
	t.Helper()
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

// text is m's text blocks joined.
func text(m protocol.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == protocol.BlockText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// TestClusterAttachFailoverWebSocket: shardctl attach --url (a subprocess
// on n2's web address, n2's token in $SHARD_TOKEN with n1's and n3's as
// node=token entries) attaches n1's agent through n2's WebSocket. n2 is
// SIGKILLed while attach is frozen (SIGSTOP) and a turn runs on n1
// meanwhile. Thawed, attach goes on through n3's web_url with n3's token,
// says so as through sockets, shows the missed turn once, and a prompt
// typed then runs through n3.
func TestClusterAttachFailoverWebSocket(t *testing.T) {
	nodes, _, _, _ := threeNodes(t)
	n2 := nodes[1]
	webs, tokens := webDoors(t, nodes, n2)
	c1, a1 := agentWithATurn(t, nodes)

	// No home: attach reaches the daemon only through --url.
	cmd := n2.ctlCmd("--home", t.TempDir(), "--url", webs["n2"], "attach", "--reconnect", "90s", a1)
	cmd.Env = append(cmd.Env, "SHARD_TOKEN="+tokens["n2"]+",n1="+tokens["n1"]+",n3="+tokens["n3"])
	attachFailsOver(t, cmd, n2, c1, a1)
}

// webDoors waits until n2 knows every node's web_url and makes an API
// token on each node: a WebSocket client's doors to the cluster, by node
// name.
func webDoors(t *testing.T, nodes []*daemon, n2 *daemon) (webs, tokens map[string]string) {
	t.Helper()
	webs, tokens = map[string]string{}, map[string]string{}
	for i, name := range []string{"n1", "n2", "n3"} {
		web, err := nodes[i].sd().WebURL()
		if err != nil {
			t.Fatal(err)
		}
		webs[name] = web
		waitNode(t, n2, "n2 knows "+name+"'s web_url", name, func(n protocol.ClusterNode) bool {
			return n.Health == protocol.NodeAlive && n.WebURL == web
		})
		var tok protocol.TokenCreateData
		call(t, nodes[i].dial(), &protocol.TokenCreate{Header: protocol.Header{Type: protocol.TypeTokenCreate}, Note: "failover " + name}, &tok)
		tokens[name] = tok.Token
	}
	return webs, tokens
}
