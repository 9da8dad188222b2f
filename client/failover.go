package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/shard-dev/shard/protocol"
)

// ClusterStatus asks conn's daemon for cluster.status (docs/protocol.md
// §10.1). A daemon that predates the command (INVALID_REQUEST for the
// unknown type) is a single shardd: the answer is then enabled:false and
// no error.
func ClusterStatus(ctx context.Context, conn *Conn) (protocol.ClusterStatusData, error) {
	resp, err := conn.Request(ctx, &protocol.ClusterStatus{Header: protocol.Header{Type: protocol.TypeClusterStatus}})
	if err != nil {
		if protocol.CodeOf(err) == protocol.CodeInvalidRequest {
			return protocol.ClusterStatusData{}, nil
		}
		return protocol.ClusterStatusData{}, err
	}
	return protocol.DecodeClusterStatusData(resp.Data)
}

// Failover is where a client of a cluster reconnects when its connection
// to a node drops: the node it was connected through may be dead, and
// every node of the cluster serves every agent (commands for another
// node's agent are forwarded there), so any other node will do. It
// remembers the last cluster.status the client read (Observe) and lists
// the nodes to try (Candidates); Reconnect tries them.
//
// A Failover is safe for concurrent use. Its zero value knows no cluster:
// Candidates is empty, and the client reconnects as to a single shardd.
type Failover struct {
	// Web says the client reaches the nodes through their web listener
	// (web_url, a WebSocket) rather than their unix socket: a client that
	// connected through a node's WebSocket (DialWebSocket) fails over the
	// same way, through the nodes that published a web_url, with a
	// Dialer such as WebDialer. Set it before the first Candidates.
	Web bool

	mu    sync.Mutex
	node  string                 // the node the client is connected through
	nodes []protocol.ClusterNode // the last cluster.status's, by name
}

// Observe takes a cluster.status answer read through the node the client
// is connected to: it becomes the current node, and the answer's nodes
// the ones Candidates picks from. An answer that is not enabled (a
// single shardd) forgets the cluster.
func (f *Failover) Observe(st protocol.ClusterStatusData) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !st.Enabled {
		f.node, f.nodes = "", nil
		return
	}
	f.node = st.Node
	f.nodes = slices.Clone(st.Nodes)
	slices.SortFunc(f.nodes, func(a, b protocol.ClusterNode) int { return strings.Compare(a.Node, b.Node) })
}

// Node is the node the client is connected through, as the last
// cluster.status said ("" when it knows no cluster).
func (f *Failover) Node() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node
}

// addr is where the client reaches n: its socket, or its web_url when
// the client is a WebSocket one (Web).
func (f *Failover) addr(n protocol.ClusterNode) string {
	if f.Web {
		return n.WebURL
	}
	return n.Socket
}

// Candidates lists the nodes to reconnect through after the connection
// through Node dropped, in the order to try them: the other nodes not
// known dead that published a socket (a web_url when Web), in name
// order starting after Node
// (so the clients of one node do not all crowd the first name), then
// Node itself last, which may come back (a restart). Empty when no
// cluster is known.
func (f *Failover) Candidates() []protocol.ClusterNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	var after, before []protocol.ClusterNode
	var self *protocol.ClusterNode
	for i, n := range f.nodes {
		switch {
		case n.Node == f.node:
			self = &f.nodes[i]
		case f.addr(n) == "" || n.Health == protocol.NodeDead:
		case n.Node > f.node:
			after = append(after, n)
		default:
			before = append(before, n)
		}
	}
	out := append(after, before...)
	if self != nil && f.addr(*self) != "" {
		out = append(out, *self)
	}
	return out
}

// Dialer connects to one node of the cluster; DialSocket is the one for
// a client on the nodes' machine.
type Dialer func(ctx context.Context, n protocol.ClusterNode) (*Conn, error)

// DialSocket dials n's unix socket.
func DialSocket(ctx context.Context, n protocol.ClusterNode) (*Conn, error) {
	if n.Socket == "" {
		return nil, fmt.Errorf("client: node %s published no socket", n.Node)
	}
	return Dial(ctx, n.Socket)
}

// WebCredential is how a WebSocket client authenticates to one node
// (docs/protocol.md §4.1): a ticket (ws.ticket over that node's socket)
// or an API token (token.create on that node). Credentials are each
// node's own: the nodes keep their security stores apart, while the
// single trust level of docs/protocol.md §4.3 holds cluster-wide, so a
// client that holds one for a node may act there on any agent of the
// cluster. Exactly one of the two is set.
type WebCredential struct {
	Ticket string
	Token  string
}

// WebDialer is the Dialer of a client that reaches the nodes over
// WebSocket (a Failover with Web): it dials the /ws endpoint under n's
// web_url (http becomes ws, https wss) with the credential cred gives
// for n. A node cred has none for (an error) is passed over like one
// that is down.
func WebDialer(cred func(ctx context.Context, n protocol.ClusterNode) (WebCredential, error)) Dialer {
	return func(ctx context.Context, n protocol.ClusterNode) (*Conn, error) {
		u, err := WebSocketURL(n.WebURL)
		if err != nil {
			return nil, fmt.Errorf("client: node %s: %w", n.Node, err)
		}
		c, err := cred(ctx, n)
		if err != nil {
			return nil, err
		}
		if c.Token != "" {
			return DialWebSocketToken(ctx, u, c.Token)
		}
		return DialWebSocket(ctx, u, c.Ticket)
	}
}

// WebSocketURL is the WebSocket endpoint under a node's web_url
// (docs/protocol.md §10.1 cluster.status): ws://host/ws for
// http://host, wss for https, the web_url's path kept as a prefix (a
// node behind a proxy at a sub-path).
func WebSocketURL(webURL string) (string, error) {
	if webURL == "" {
		return "", errors.New("no web_url published")
	}
	u, err := url.Parse(webURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("web_url %q: not an http(s) URL", webURL)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("web_url %q: not an http(s) URL", webURL)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/ws"
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// FailoverNote is what a client tells its user once it has reconnected
// through node to after losing node from (shardctl attach and the page
// say the same): "reconnected through node n3; node n2 is gone", or,
// back through the same node (it restarted), "reconnected through node
// n2".
func FailoverNote(from, to string) string {
	if from == "" || from == to {
		return "reconnected through node " + to
	}
	return "reconnected through node " + to + "; node " + from + " is gone"
}

// Reconnect makes one round over Candidates: it dials each with dial,
// checks that the daemon there is that node (a socket path may name
// another daemon on this machine: every node's home may be ~/.shard on
// its own machine), and runs resume on the connection (re-attaching
// what the client had attached, docs/protocol.md §6.4). The first node
// where all of it succeeds is the client's node from then on: its
// cluster.status is observed and the connection returned, events
// unread. Otherwise it returns an error joining each node's failure, or
// ctx's. Pacing the rounds is the caller's.
func (f *Failover) Reconnect(ctx context.Context, dial Dialer, resume func(context.Context, *Conn) error) (*Conn, protocol.ClusterNode, error) {
	var errs []error
	for _, n := range f.Candidates() {
		if ctx.Err() != nil {
			return nil, protocol.ClusterNode{}, ctx.Err()
		}
		conn, st, err := f.try(ctx, dial, n, resume)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Node, err))
			continue
		}
		f.Observe(st)
		return conn, n, nil
	}
	if len(errs) == 0 {
		return nil, protocol.ClusterNode{}, errors.New("client: no node to reconnect through")
	}
	return nil, protocol.ClusterNode{}, errors.Join(errs...)
}

func (f *Failover) try(ctx context.Context, dial Dialer, n protocol.ClusterNode, resume func(context.Context, *Conn) error) (*Conn, protocol.ClusterStatusData, error) {
	conn, err := dial(ctx, n)
	if err != nil {
		return nil, protocol.ClusterStatusData{}, err
	}
	st, err := ClusterStatus(ctx, conn)
	if err == nil && (!st.Enabled || st.Node != n.Node) {
		err = fmt.Errorf("the daemon there is %q, not node %s", cmp.Or(st.Node, "a single shardd"), n.Node)
	}
	if err == nil && resume != nil {
		err = resume(ctx, conn)
	}
	if err != nil {
		conn.Close()
		return nil, protocol.ClusterStatusData{}, err
	}
	return conn, st, nil
}

// MessagesAfter is the resync of a reconnect (docs/protocol.md §6.4):
// the messages of a sync's live window after the one with id last, the
// last message the client had seen, which are what happened while it
// was away. found is false when last is not in the window (it was
// compacted away, or the client had seen none): the caller then shows
// the window's end as on a first attach.
func MessagesAfter(window []protocol.Message, last string) (after []protocol.Message, found bool) {
	if last == "" {
		return nil, false
	}
	for i := len(window) - 1; i >= 0; i-- {
		if window[i].ID == last {
			return window[i+1:], true
		}
	}
	return nil, false
}
