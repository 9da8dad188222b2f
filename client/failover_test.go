package client

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// fakeNode serves a fake cluster node on a real unix socket: it answers
// cluster.status as node name (with the nodes of status), agent.attach
// with attach's error (nil: success), and records each attach.
func fakeNode(t *testing.T, name string, status func() protocol.ClusterStatusData, attach error) (socket string, attaches chan string) {
	t.Helper()
	s := newFakeServer(t)
	attaches = make(chan string, 16)
	go func() {
		for fc := range s.conns {
			fc.serve(func(h protocol.Header, rec []byte) {
				switch h.Type {
				case protocol.TypeClusterStatus:
					st := status()
					st.Node = name
					fc.respond(h, st)
				case protocol.TypeAgentAttach:
					if attach != nil {
						fc.sendRaw(protocol.NewErrorResponse(h.ID, h.Type, attach))
						return
					}
					attaches <- h.AgentID
					fc.respond(h, protocol.AgentAttachData{Status: protocol.StatusIdle})
				default:
					fc.respond(h, nil)
				}
			})
		}
	}()
	return s.path, attaches
}

// TestFailoverCandidates: after a drop through n2, the other nodes not
// known dead that published a socket are tried in name order after n2,
// then n2; with no cluster (a single shardd) there is nothing to try.
func TestFailoverCandidates(t *testing.T) {
	var f Failover
	if c := f.Candidates(); len(c) != 0 {
		t.Fatalf("zero Failover: candidates %+v", c)
	}
	node := func(name string, h protocol.NodeHealth, sock string) protocol.ClusterNode {
		return protocol.ClusterNode{Node: name, Health: h, Socket: sock}
	}
	f.Observe(protocol.ClusterStatusData{Enabled: true, Node: "n2", Nodes: []protocol.ClusterNode{
		node("n5", protocol.NodeAlive, ""), // no socket published
		node("n3", protocol.NodeSuspect, "/s/n3"),
		node("n1", protocol.NodeAlive, "/s/n1"),
		node("n4", protocol.NodeDead, "/s/n4"),
		node("n2", protocol.NodeAlive, "/s/n2"),
	}})
	var got []string
	for _, n := range f.Candidates() {
		got = append(got, n.Node)
	}
	if strings.Join(got, ",") != "n3,n1,n2" || f.Node() != "n2" {
		t.Fatalf("candidates %v through %q, want n3,n1,n2 through n2", got, f.Node())
	}
	f.Observe(protocol.ClusterStatusData{})
	if c := f.Candidates(); len(c) != 0 || f.Node() != "" {
		t.Fatalf("after a single shardd's answer: %+v through %q", c, f.Node())
	}
}

// TestFailoverReconnect: the connection through n2 dropped and n2 is
// gone. n3's socket is another daemon (n9), n4 refuses the attach, n1
// takes it: the client is n1's from then on, its attach resumed there.
// When every node fails, the error names each.
func TestFailoverReconnect(t *testing.T) {
	var status func() protocol.ClusterStatusData
	st := func() protocol.ClusterStatusData { return status() }
	s1, att1 := fakeNode(t, "n1", st, nil)
	s3, att3 := fakeNode(t, "n9", st, nil)
	s4, _ := fakeNode(t, "n4", st, protocol.Errorf(protocol.CodeNotFound, "no agent a-1"))
	s2 := filepath.Join(socketDir(t), "gone.sock") // nothing listens
	nodes := []protocol.ClusterNode{
		{Node: "n1", Health: protocol.NodeAlive, Socket: s1},
		{Node: "n2", Health: protocol.NodeAlive, Socket: s2},
		{Node: "n3", Health: protocol.NodeAlive, Socket: s3},
		{Node: "n4", Health: protocol.NodeAlive, Socket: s4},
	}
	status = func() protocol.ClusterStatusData { return protocol.ClusterStatusData{Enabled: true, Nodes: nodes} }

	var f Failover
	f.Observe(protocol.ClusterStatusData{Enabled: true, Node: "n2", Nodes: nodes})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resume := func(ctx context.Context, c *Conn) error {
		_, err := c.Request(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: "a-1"}})
		return err
	}
	conn, n, err := f.Reconnect(ctx, DialSocket, resume)
	if err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	defer conn.Close()
	if n.Node != "n1" || f.Node() != "n1" {
		t.Fatalf("reconnected through %s (Node %q), want n1", n.Node, f.Node())
	}
	if got := <-att1; got != "a-1" {
		t.Fatalf("n1 attached %q", got)
	}
	select {
	case id := <-att3:
		t.Fatalf("the daemon at n3's socket (n9) was asked to attach %s", id)
	default:
	}
	// Now through n1, the candidates start after it.
	if c := f.Candidates(); len(c) != 4 || c[0].Node != "n2" || c[3].Node != "n1" {
		t.Fatalf("candidates through n1: %+v", c)
	}

	f.Observe(protocol.ClusterStatusData{Enabled: true, Node: "n1", Nodes: nodes[1:2]})
	_, _, err = f.Reconnect(ctx, DialSocket, resume)
	if err == nil || !strings.Contains(err.Error(), "node n2") {
		t.Fatalf("all nodes gone: err = %v", err)
	}
	f.Observe(protocol.ClusterStatusData{Enabled: true, Node: "n3", Nodes: nodes[2:3]})
	if _, _, err = f.Reconnect(ctx, DialSocket, resume); err == nil || !strings.Contains(err.Error(), `"n9", not node n3`) {
		t.Fatalf("a socket of another daemon: err = %v", err)
	}
	f.Observe(protocol.ClusterStatusData{Enabled: true, Node: "n4", Nodes: nodes[3:4]})
	if _, _, err = f.Reconnect(ctx, DialSocket, resume); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("a refused attach: err = %v, want its NOT_FOUND", err)
	}
}

// TestClusterStatusOfOldDaemon: a daemon that does not know
// cluster.status (INVALID_REQUEST) is a single shardd, not an error.
func TestClusterStatusOfOldDaemon(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	go func() {
		h, _ := fc.next()
		fc.sendRaw(protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(protocol.CodeInvalidRequest, "unknown type")))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	st, err := ClusterStatus(ctx, c)
	if err != nil || st.Enabled {
		t.Fatalf("old daemon: %+v, %v", st, err)
	}
}

// TestMessagesAfter: the resync shows the messages after the last one
// seen; a last message the window no longer holds is not found.
func TestMessagesAfter(t *testing.T) {
	w := []protocol.Message{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}
	if after, ok := MessagesAfter(w, "m1"); !ok || len(after) != 2 || after[0].ID != "m2" {
		t.Fatalf("after m1: %+v %t", after, ok)
	}
	if after, ok := MessagesAfter(w, "m3"); !ok || len(after) != 0 {
		t.Fatalf("after m3: %+v %t", after, ok)
	}
	for _, last := range []string{"", "m0"} {
		if _, ok := MessagesAfter(w, last); ok {
			t.Fatalf("after %q: found", last)
		}
	}
}

// TestFailoverCandidatesWeb: a WebSocket client (Web) fails over through
// the nodes that published a web_url, in the same order as a socket
// client through sockets.
func TestFailoverCandidatesWeb(t *testing.T) {
	f := Failover{Web: true}
	node := func(name string, h protocol.NodeHealth, sock, web string) protocol.ClusterNode {
		return protocol.ClusterNode{Node: name, Health: h, Socket: sock, WebURL: web}
	}
	f.Observe(protocol.ClusterStatusData{Enabled: true, Node: "n2", Nodes: []protocol.ClusterNode{
		node("n5", protocol.NodeAlive, "/s/n5", ""), // a socket but no web_url
		node("n3", protocol.NodeSuspect, "", "http://h3:1"),
		node("n1", protocol.NodeAlive, "", "http://h1:1"),
		node("n4", protocol.NodeDead, "", "http://h4:1"),
		node("n2", protocol.NodeAlive, "", "http://h2:1"),
		node("n6", protocol.NodeAlive, "/s/n6", "https://h6/shard/"),
	}})
	var got []string
	for _, n := range f.Candidates() {
		got = append(got, n.Node)
	}
	if strings.Join(got, ",") != "n3,n6,n1,n2" {
		t.Fatalf("candidates %v, want n3,n6,n1,n2", got)
	}
}

// TestWebSocketURL: a node's WebSocket endpoint is /ws under its web_url.
func TestWebSocketURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7420":       "ws://127.0.0.1:7420/ws",
		"http://127.0.0.1:7420/":      "ws://127.0.0.1:7420/ws",
		"https://shard.example/n3/":   "wss://shard.example/n3/ws",
		"https://shard.example?x=1#y": "wss://shard.example/ws",
		"ftp://h/":                    "",
		"":                            "",
		"/just/a/path":                "",
	} {
		got, err := WebSocketURL(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("WebSocketURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestFailoverNote: what a client says after a failover.
func TestFailoverNote(t *testing.T) {
	if got := FailoverNote("n2", "n3"); got != "reconnected through node n3; node n2 is gone" {
		t.Errorf("another node: %q", got)
	}
	if got := FailoverNote("n2", "n2"); got != "reconnected through node n2" {
		t.Errorf("the same node: %q", got)
	}
}
