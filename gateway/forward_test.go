package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// pipeListener is a net.Listener fed by fakeCluster's dials.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn, 16), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

// fakeCluster is node "na" of a cluster whose node "nb" is another test
// gateway (served on ln through net.Pipe), "nd" is dead and "nx" cannot
// be dialed. Agents "agent-b*" live on nb, "agent-d" on nd, "agent-x" on
// nx.
type fakeCluster struct {
	ln *pipeListener

	mu     sync.Mutex
	dials  int
	remote []net.Conn // nb's ends of the dialed pipes
}

func (f *fakeCluster) Node() string { return "na" }

func (f *fakeCluster) AgentNode(id string) (string, bool) {
	switch {
	case strings.HasPrefix(id, "agent-b"):
		return "nb", true
	case id == "agent-d":
		return "nd", true
	case id == "agent-x":
		return "nx", true
	}
	return "", false
}

func (f *fakeCluster) NodeHealth(node string) (string, bool) {
	switch node {
	case "na", "nb", "nx":
		return "alive", true
	case "nd":
		return HealthDead, true
	}
	return "", false
}

func (f *fakeCluster) Nodes() []string { return []string{"nb", "nd", "nx"} }

func (f *fakeCluster) SpeakFor(string, *outbox.Outbox) {}

func (f *fakeCluster) Forget(*outbox.Outbox) {}

func (f *fakeCluster) Dial(_ context.Context, node string) (net.Conn, error) {
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	if node != "nb" {
		return nil, fmt.Errorf("no responders for %s", node)
	}
	a, b := net.Pipe()
	f.mu.Lock()
	f.remote = append(f.remote, b)
	f.mu.Unlock()
	f.ln.conns <- b
	return a, nil
}

func (f *fakeCluster) dialed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials
}

// cut closes nb's end of every dialed pipe, as a node that died.
func (f *fakeCluster) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.remote {
		c.Close()
	}
}

// twoNodes starts gateway a (node na, forwarding) and gateway b (node nb,
// serving a's forwarded connections); b's forwarded connections report
// their end on bGone.
func twoNodes(t *testing.T) (a, b *testGateway, fc *fakeCluster, bGone chan uint64) {
	t.Helper()
	bGone = make(chan uint64, 16)
	b = startGateway(t, Config{hooks: &testHooks{forgot: func(id uint64) { bGone <- id }}})
	fc = &fakeCluster{ln: newPipeListener()}
	b.g.ServeTunnel(fc.ln)
	a = startGateway(t, Config{Cluster: fc})
	return a, b, fc, bGone
}

// wire is a decoded record with what the forwarding tests look at.
type wire struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	AgentID string          `json:"agent_id"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Error   *protocol.Error `json:"error"`
}

func (c *rawConn) next(t *testing.T) wire {
	t.Helper()
	line, err := c.rd.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var w wire
	if err := json.Unmarshal(line, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestForwardOrderAndIdentity: commands for another node's agent reach
// that node's registry, in order, under the client's transport; its
// answers and the agent's events come back with the client's own ids; the
// forwarding node's registry sees none of them; one upstream carries them
// all.
func TestForwardOrderAndIdentity(t *testing.T) {
	a, b, fc, _ := twoNodes(t)
	c := a.dialRaw(t)
	c.mustRead(t) // hello
	for i := range 5 {
		c.send(t, fmt.Sprintf(`{"type":"prompt","id":"p%d","agent_id":"agent-b1","message":"m%d"}`, i, i))
	}
	for i := range 5 {
		cmd := b.next(t)
		if cmd.Header.ID != fmt.Sprintf("p%d", i) || cmd.Header.AgentID != "agent-b1" || cmd.Client.Source != "unix" {
			t.Fatalf("nb's registry got %+v from %q, want p%d", cmd.Header, cmd.Client.Source, i)
		}
		if i == 0 {
			cmd.Client.Send([]byte(`{"type":"status","agent_id":"agent-b1","status":"busy"}`))
		}
		answer(cmd)
	}
	if w := c.next(t); w.Type != "status" || w.AgentID != "agent-b1" {
		t.Fatalf("the agent's event: %+v", w)
	}
	for i := range 5 {
		if w := c.next(t); w.Type != "response" || w.ID != fmt.Sprintf("p%d", i) || !w.Success {
			t.Fatalf("response %d: %+v", i, w)
		}
	}
	select {
	case cmd := <-a.cmds:
		t.Fatalf("na's registry got %+v", cmd.Header)
	default:
	}
	if n := fc.dialed(); n != 1 {
		t.Fatalf("%d dials for one client, want 1", n)
	}

	// A WebSocket client's forwarded commands carry its transport.
	ws, ctx := a.dialWS(t)
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"abort","id":"w1","agent_id":"agent-b2"}`)); err != nil {
		t.Fatal(err)
	}
	if cmd := b.next(t); cmd.Header.ID != "w1" || cmd.Client.Source != "websocket" {
		t.Fatalf("nb's registry got %+v from %q, want w1 from websocket", cmd.Header, cmd.Client.Source)
	}
	if n := fc.dialed(); n != 2 {
		t.Fatalf("%d dials for two clients, want 2", n)
	}
}

// TestForwardCreateOnNode: agent.create with another node goes there, and
// the agent it made is reached through the same upstream at once; a node
// that is no member is INVALID_REQUEST; this node's own name stays here.
func TestForwardCreateOnNode(t *testing.T) {
	a, b, _, _ := twoNodes(t)
	c := a.dialRaw(t)
	c.mustRead(t)
	c.send(t, `{"type":"agent.create","id":"c1","cwd":"/w","node":"nb"}`)
	cmd := b.next(t)
	if m, ok := cmd.Cmd.(*protocol.AgentCreate); !ok || m.Node != "nb" {
		t.Fatalf("nb's registry got %+v", cmd.Cmd)
	}
	cmd.Client.Send(protocol.NewResponse("c1", protocol.TypeAgentCreate, protocol.AgentCreateData{AgentID: "agent-new"}))
	if w := c.next(t); w.ID != "c1" || !w.Success {
		t.Fatalf("create: %+v", w)
	}
	// agent-new is in no directory yet: the create taught the route.
	c.send(t, `{"type":"prompt","id":"p1","agent_id":"agent-new","message":"hi"}`)
	if cmd := b.next(t); cmd.Header.ID != "p1" || cmd.Header.AgentID != "agent-new" {
		t.Fatalf("nb's registry got %+v", cmd.Header)
	}

	c.send(t, `{"type":"agent.create","id":"c2","cwd":"/w","node":"nz"}`)
	if w := c.next(t); w.ID != "c2" || w.Success || w.Error == nil || w.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("create on nz: %+v", w)
	}
	c.send(t, `{"type":"agent.create","id":"c3","cwd":"/w","node":"na"}`)
	if cmd := a.next(t); cmd.Header.ID != "c3" {
		t.Fatalf("na's registry got %+v", cmd.Header)
	}
}

// TestForwardNodeLost: when the other node goes, the commands it had not
// answered are answered NODE_UNAVAILABLE naming it, an agent attached
// through it gets an error event, and the next command dials again; a
// dead node is refused without a dial, and one that cannot be dialed is
// NODE_UNAVAILABLE too.
func TestForwardNodeLost(t *testing.T) {
	a, b, fc, _ := twoNodes(t)
	c := a.dialRaw(t)
	c.mustRead(t)
	c.send(t, `{"type":"agent.attach","id":"a1","agent_id":"agent-b1"}`)
	b.next(t) // never answered
	fc.cut()
	got := map[string]wire{}
	for range 2 {
		w := c.next(t)
		got[w.Type] = w
	}
	r, ev := got["response"], got["error"]
	if r.ID != "a1" || r.Success || r.Error == nil || r.Error.Code != protocol.CodeNodeUnavailable || !strings.Contains(r.Error.Message, "node nb is unavailable") {
		t.Fatalf("the unanswered attach: %+v", r)
	}
	if d, _ := r.Error.Data.(map[string]any); d["node"] != "nb" {
		t.Fatalf("error data: %#v", r.Error.Data)
	}
	if ev.AgentID != "agent-b1" || ev.Code != string(protocol.CodeNodeUnavailable) {
		t.Fatalf("the attachment's end: %+v", ev)
	}
	// The next command dials again (the upstream may still be going: its
	// end is told to the connection actor, and a command in between is
	// answered NODE_UNAVAILABLE).
	stop := make(chan struct{})
	answered := make(chan struct{})
	go func() { // nb is back: it answers whatever reaches it
		defer close(answered)
		for {
			select {
			case cmd := <-b.cmds:
				answer(cmd)
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-answered }()
	for i := 0; ; i++ {
		c.send(t, fmt.Sprintf(`{"type":"prompt","id":"q%d","agent_id":"agent-b1","message":"again"}`, i))
		w := c.next(t)
		if w.Type == "response" && w.Error != nil && w.Error.Code == protocol.CodeNodeUnavailable {
			continue
		}
		if w.Type == "response" && !w.Success {
			t.Fatalf("after the loss: %+v", w)
		}
		break
	}
	if n := fc.dialed(); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}

	c.send(t, `{"type":"prompt","id":"d1","agent_id":"agent-d","message":"x"}`)
	if w := c.next(t); w.ID != "d1" || w.Error == nil || w.Error.Code != protocol.CodeNodeUnavailable || !strings.Contains(w.Error.Message, "dead") {
		t.Fatalf("a dead node's agent: %+v", w)
	}
	if n := fc.dialed(); n != 2 {
		t.Fatalf("a dead node was dialed: %d dials", n)
	}
	c.send(t, `{"type":"prompt","id":"x1","agent_id":"agent-x","message":"x"}`)
	if w := c.next(t); w.ID != "x1" || w.Error == nil || w.Error.Code != protocol.CodeNodeUnavailable || !strings.Contains(w.Error.Message, "no responders") {
		t.Fatalf("an unreachable node's agent: %+v", w)
	}
}

// TestForwardClosesWithClient: the other node's connection ends when the
// client's does.
func TestForwardClosesWithClient(t *testing.T) {
	a, b, _, bGone := twoNodes(t)
	c := a.dialRaw(t)
	c.mustRead(t)
	c.send(t, `{"type":"prompt","id":"p1","agent_id":"agent-b1","message":"hi"}`)
	answer(b.next(t))
	c.next(t)
	c.Close()
	select {
	case <-bGone:
	case <-b.g.ctx.Done():
		t.Fatal("gateway closed first")
	}
}

// TestForwardedNeverForwards: a connection another node opened never
// forwards again, whatever its node's directory says (no loops): its
// commands go to its own registry.
func TestForwardedNeverForwards(t *testing.T) {
	fc := &fakeCluster{ln: newPipeListener()}
	b := startGateway(t, Config{Cluster: fc})
	b.g.ServeTunnel(fc.ln)
	nc, err := fc.Dial(context.Background(), "nb")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ident := forwardIdent{V: forwardVersion, Node: "nq", Source: "websocket"}
	go func() {
		_, _ = nc.Write(append(ident.encode(), []byte(`{"type":"prompt","id":"p1","agent_id":"agent-b1","message":"hi"}`+"\n")...))
	}()
	cmd := b.next(t)
	if cmd.Header.ID != "p1" || cmd.Client.Source != "websocket" {
		t.Fatalf("registry got %+v from %q", cmd.Header, cmd.Client.Source)
	}
	if n := fc.dialed(); n != 1 {
		t.Fatalf("the forwarded connection dialed: %d dials", n)
	}
}

// TestForwardIdentDecode: the preamble is one object of the known version
// naming a node and a known transport; anything else is refused.
func TestForwardIdentDecode(t *testing.T) {
	good := forwardIdent{V: 1, Node: "n2", Source: "unix", Principal: "prn-1"}
	got, err := decodeForwardIdent(good.encode()[:len(good.encode())-1])
	if err != nil || got != good {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `{"v":2,"node":"n2","source":"unix"}`, `{"v":1,"source":"unix"}`,
		`{"v":1,"node":"n2","source":"tunnel"}`, `{"v":1,"node":"n2","source":"unix","extra":1}`,
		`{"v":1,"node":"n2","source":"unix"} {}`, `{"v":1,"node":"n2","source":"unix","principal":"` + strings.Repeat("p", 200) + `"}`,
		`{"type":"prompt","id":"p1"}`,
	} {
		if _, err := decodeForwardIdent([]byte(bad)); !errors.Is(err, errForwardIdent) {
			t.Errorf("%s: %v, want refused", bad, err)
		}
	}
}

// FuzzForwardIdent: the preamble decoder never panics, and what it takes
// encodes back to what it decodes.
func FuzzForwardIdent(f *testing.F) {
	f.Add([]byte(`{"v":1,"node":"n2","source":"unix"}`))
	f.Add([]byte(`{"v":1,"node":"n3","source":"websocket","principal":"prn-x"}`))
	f.Add([]byte(`{"v":1,"node":"","source":"unix"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeForwardIdent(b)
		if err != nil {
			return
		}
		again, err := decodeForwardIdent(id.encode())
		if err != nil || again != id {
			t.Fatalf("%q: decoded %+v, again %+v, %v", b, id, again, err)
		}
	})
}
