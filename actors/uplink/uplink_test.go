package uplink

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
)

// link is two uplink roots, a child's node (A) and an ancestor's node (B),
// joined by a pipe that A dials; the probes stand for B's registry (and
// the ancestor behind it) and A's child.
type link struct {
	sys        *actor.ActorSystem
	a, b       *actor.PID
	reg, child *actortest.Probe
	pipe       chan net.Conn // A's end of each dial
	// located is what B was told of where children live (Deps.Located).
	located chan [2]string
}

func newLink(t *testing.T) *link {
	t.Helper()
	return newLinkTo(t, nil)
}

// newLinkTo is newLink with B's registry played by regB (nil: the probe),
// an actor of sys.
func newLinkTo(t *testing.T, regB func(sys *actor.ActorSystem) *actor.PID) *link {
	t.Helper()
	l := &link{sys: actortest.NewSystem(), pipe: make(chan net.Conn, 4), located: make(chan [2]string, 16)}
	g := &xsync.Group{}
	t.Cleanup(g.Close) // last: once the links stopped, their goroutines end
	l.reg = actortest.NewProbe(t, l.sys, "registry")
	l.child = actortest.NewProbe(t, l.sys, "child")
	breg := l.reg.PID
	if regB != nil {
		breg = regB(l.sys)
	}
	l.b = l.reg.Spawn(t, Props(Deps{Registry: breg, Node: "B", Group: g, Located: func(id, node string) { l.located <- [2]string{id, node} }, Dial: func(context.Context, string) (net.Conn, error) {
		return nil, errors.New("B dials nobody")
	}}), "uplink-b")
	l.a = l.child.Spawn(t, Props(Deps{Registry: l.child.PID, Node: "A", Group: g, Dial: func(_ context.Context, node string) (net.Conn, error) {
		if node != "B" {
			return nil, errors.New("no node " + node)
		}
		ca, cb := net.Pipe()
		l.sys.Root.Send(l.b, &accepted{conn: cb})
		l.pipe <- ca
		return ca, nil
	}}), "uplink-a")
	return l
}

const permRec = `{"type":"permission_request","request_id":"r1","tool_name":"write","agent_id":"child-1"}`

// delegate sends r1 up from A's child and plays B's ancestor accepting it;
// it returns B's in link (the request's origin there) and A's out link
// (the child's delegate).
func (l *link) delegate(t *testing.T) (in, out *actor.PID) {
	t.Helper()
	l.child.Send(l.a, &registry.RemoteDelegate{Node: "B", AgentID: "parent-1",
		Msg: &agent.Delegate{RequestID: "r1", Rec: []byte(permRec), Origin: l.child.PID}})
	rt := actortest.Expect(t, l.reg, func(m *agent.Route) bool { return m.AgentID == "parent-1" })
	d, ok := rt.Msg.(*agent.Delegate)
	if !ok || d.RequestID != "r1" || string(d.Rec) != permRec || d.Node != "A" {
		t.Fatalf("delegated at B: %+v (want r1 of A's child)", rt.Msg)
	}
	if got := <-l.located; got != [2]string{"child-1", "A"} {
		t.Fatalf("B learned %v, want child-1 on A", got)
	}
	l.reg.Send(d.Origin, &agent.DelegateResult{RequestID: "r1", Accepted: true, PID: l.reg.PID})
	res := actortest.Expect(t, l.child, func(m *agent.DelegateResult) bool { return m.RequestID == "r1" })
	if !res.Accepted || res.PID == nil {
		t.Fatalf("result at A: %+v", res)
	}
	return d.Origin, res.PID
}

// TestLinkDelegatesChecksAndResolves: a request goes over and is
// accepted; an answering client is checked at the ancestor by its origin;
// the resolution goes over with its event.
func TestLinkDelegatesChecksAndResolves(t *testing.T) {
	l := newLink(t)
	in, out := l.delegate(t)
	req := &agent.Request{Client: &agent.Client{Origin: "n3/run/7"}, Cmd: &protocol.PermissionResponse{RequestID: "r1"}}
	l.child.Send(out, &agent.CheckResponder{Req: req})
	co := actortest.Expect(t, l.reg, func(m *agent.CheckOrigin) bool { return m.RequestID == "r1" })
	if co.Origin != "n3/run/7" {
		t.Fatalf("checked origin %q", co.Origin)
	}
	l.reg.Send(in, &agent.OriginChecked{Seq: co.Seq, OK: true})
	if got := actortest.Expect(t, l.child, func(m *agent.ResponderChecked) bool { return m.Req == req }); !got.OK {
		t.Fatalf("check at A: %+v", got)
	}
	// A client of no origin is refused without asking.
	anon := &agent.Request{Client: &agent.Client{}, Cmd: &protocol.PermissionResponse{RequestID: "r1"}}
	l.child.Send(out, &agent.CheckResponder{Req: anon})
	if got := actortest.Expect(t, l.child, func(m *agent.ResponderChecked) bool { return m.Req == anon }); got.OK {
		t.Fatal("a client without an origin was vouched for")
	}
	ev := `{"type":"permission_resolved","request_id":"r1","decision":"allow","source":"unix","agent_id":"child-1"}`
	l.child.Send(out, &agent.DelegatedResolved{RequestID: "r1", Rec: []byte(ev)})
	got := actortest.Expect(t, l.reg, func(m *agent.DelegatedResolved) bool { return m.RequestID == "r1" })
	if string(got.Rec) != ev {
		t.Fatalf("resolution at B: %s", got.Rec)
	}
}

// TestLinkRefused: an ancestor with nobody to answer refuses; the child
// hears it.
func TestLinkRefused(t *testing.T) {
	l := newLink(t)
	l.child.Send(l.a, &registry.RemoteDelegate{Node: "B", AgentID: "parent-1",
		Msg: &agent.Delegate{RequestID: "r1", Rec: []byte(permRec), Origin: l.child.PID}})
	rt := actortest.Expect(t, l.reg, func(m *agent.Route) bool { return true })
	l.reg.Send(rt.Msg.(*agent.Delegate).Origin, &agent.DelegateResult{RequestID: "r1"})
	if res := actortest.Expect(t, l.child, func(m *agent.DelegateResult) bool { return m.RequestID == "r1" }); res.Accepted {
		t.Fatalf("result at A: %+v", res)
	}
}

// TestLinkLost: the link breaks with a request accepted: the ancestor's
// node resolves it for its clients (node_lost, denied, the child's id),
// the child's node is told its delegate is gone; an unreachable node
// refuses at once.
func TestLinkLost(t *testing.T) {
	l := newLink(t)
	l.delegate(t)
	(<-l.pipe).Close()
	got := actortest.Expect(t, l.reg, func(m *agent.DelegatedResolved) bool { return m.RequestID == "r1" })
	var ev protocol.PermissionResolved
	if err := json.Unmarshal(got.Rec, &ev); err != nil || ev.Source != SourceNodeLost || ev.Decision != protocol.DecisionDeny ||
		ev.AgentID != "child-1" || ev.Type != protocol.TypePermissionResolved {
		t.Fatalf("resolution at B after the loss: %s (%v)", got.Rec, err)
	}
	actortest.Expect(t, l.child, func(m *agent.DelegateLost) bool { return m.RequestID == "r1" })

	l.child.Send(l.a, &registry.RemoteDelegate{Node: "C", AgentID: "parent-2",
		Msg: &agent.Delegate{RequestID: "r2", Rec: []byte(permRec), Origin: l.child.PID}})
	if res := actortest.Expect(t, l.child, func(m *agent.DelegateResult) bool { return m.RequestID == "r2" }); res.Accepted {
		t.Fatalf("a node that cannot be dialed accepted: %+v", res)
	}
}

func TestDecodeFrame(t *testing.T) {
	for _, ok := range []string{
		`{"t":"hello","v":1,"node":"n3"}`,
		`{"t":"delegate","rid":"r","agent":"a","rec":{"type":"x"}}`,
		`{"t":"resolved","rid":"r"}`,
		`{"t":"check","n":3,"rid":"r","origin":"o"}`,
		`{"t":"result","rid":"r","ok":true}`,
		`{"t":"checked","n":3}`,
		`{"t":"steer","rid":"c","agent":"a","run":"r","msg":"go left"}`,
		`{"t":"steered","rid":"c","status":"injected","turn":"t1"}`,
		`{"t":"steered","rid":"c","status":"conflict"}`,
		`{"t":"delegate","rid":"r","agent":"a","rec":{"type":"x"},"node":"n2"}`,
		`{"t":"record","rid":"c","agent":"a","run":"r","status":"injected","turn":"t1"}`,
		`{"t":"record","rid":"c","agent":"a","run":"r","status":"conflict"}`,
		`{"t":"recorded","rid":"c"}`,
	} {
		f, err := decodeFrame([]byte(ok))
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if back, err := decodeFrame(f.encode()[:len(f.encode())-1]); err != nil || back.T != f.T {
			t.Errorf("%s: re-encoded %v", ok, err)
		}
	}
	for _, bad := range []string{
		``, `[]`, `{"t":"hello","v":2,"node":"n"}`, `{"t":"hello","v":1}`, `{"t":"nope"}`,
		`{"t":"delegate","rid":"r","agent":"a","rec":"x"}`, `{"t":"delegate","rid":"r","rec":{}}`,
		`{"t":"result"}`, `{"t":"check","n":1}`, `{"t":"checked","extra":1}`, `{"t":"checked"} {}`,
		`{"t":"steer","rid":"c","agent":"a","msg":"m"}`, `{"t":"steered","rid":"c"}`, `{"t":"steered","rid":"c","status":"maybe"}`,
		`{"t":"record","rid":"c","agent":"a","status":"injected"}`, `{"t":"record","rid":"c","agent":"a","run":"r"}`, `{"t":"recorded"}`,
	} {
		if _, err := decodeFrame([]byte(bad)); !errors.Is(err, errFrame) {
			t.Errorf("%q: %v, want errFrame", bad, err)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte(`{"t":"delegate","rid":"r","agent":"a","rec":{"type":"x"}}`))
	f.Add([]byte(`{"t":"hello","v":1,"node":"n3"}`))
	f.Add([]byte(`{"t":"checked","n":3,"ok":true}`))
	f.Add([]byte(`{"t":"steer","rid":"c","agent":"a","run":"r","msg":"m"}`))
	f.Add([]byte(`{"t":"steered","rid":"c","status":"injected","turn":"t"}`))
	f.Add([]byte(`{"t":"record","rid":"c","agent":"a","run":"r","status":"conflict"}`))
	f.Add([]byte(`{"t":"recorded","rid":"c"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := decodeFrame(line)
		if err != nil {
			return
		}
		enc := fr.encode()
		again, err := decodeFrame(enc[:len(enc)-1])
		if err != nil || again.T != fr.T || again.RID != fr.RID || again.N != fr.N {
			t.Fatalf("%q decoded, re-encoded %q: %v", line, enc, err)
		}
	})
}

// TestLinkSteer: a parent's steer of a run on the other node goes over to
// the child there (agent.LeaseSteer, ReplyTo the link); the outcome comes
// back, is recorded at the run's job actor, and only then answers the
// parent's client. A link lost before the outcome, or a node that cannot
// be dialed, answers NODE_UNAVAILABLE with nothing recorded.
func TestLinkSteer(t *testing.T) {
	l := newLink(t)
	recorded, release := make(chan *agent.LeaseSteered, 4), make(chan struct{})
	holder := l.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*agent.LeaseSteered); ok {
			recorded <- m
			<-release // the test looks for an early answer meanwhile
			c.Respond(&agent.SteerRecorded{})
		}
	}))
	t.Cleanup(func() { l.sys.Root.Stop(holder) })
	answers := make(chan []byte, 4)
	client := &agent.Client{Out: outbox.New(outbox.Limits{})}
	client.Out.SetObserver(func(rec []byte) { answers <- rec })
	steer := func(node, id string) {
		l.child.Send(l.a, &registry.RemoteSteer{Node: node, AgentID: "child-1", Holder: holder, Msg: &agent.LeaseSteer{
			RunID: "run-1", Message: "go left", CorrelationID: id, Client: client,
			Header: protocol.Header{Type: protocol.TypeSubagentSteer, ID: "req-" + id}}})
	}
	answer := func() *protocol.Response {
		t.Helper()
		select {
		case rec := <-answers:
			var r protocol.Response
			if err := json.Unmarshal(rec, &r); err != nil {
				t.Fatalf("answer %s: %v", rec, err)
			}
			return &r
		case <-time.After(30 * time.Second):
			t.Fatal("no answer to the steer")
			return nil
		}
	}

	steer("B", "steer-1")
	rt := actortest.Expect(t, l.reg, func(m *agent.Route) bool { return m.AgentID == "child-1" })
	ls, ok := rt.Msg.(*agent.LeaseSteer)
	if !ok || ls.RunID != "run-1" || ls.Message != "go left" || ls.CorrelationID != "steer-1" || ls.ReplyTo == nil || ls.Client != nil {
		t.Fatalf("steer at B: %+v", rt.Msg)
	}
	l.reg.Send(ls.ReplyTo, &agent.SteerAnswer{CorrelationID: "steer-1", Status: protocol.SteerInjected, TurnID: "turn-1"})
	var rec *agent.LeaseSteered
	select {
	case rec = <-recorded:
	case <-time.After(30 * time.Second):
		t.Fatal("the outcome was not recorded")
	}
	if rec.RunID != "run-1" || rec.AgentID != "child-1" || rec.Steer.CorrelationID != "steer-1" || rec.Steer.Status != protocol.SteerInjected ||
		rec.Steer.TurnID != "turn-1" || rec.Steer.Source != protocol.SteerSourceParent {
		t.Fatalf("recorded %+v", rec)
	}
	select {
	case a := <-answers:
		t.Fatalf("answered before the record was committed: %s", a)
	default:
	}
	close(release)
	var data protocol.SubagentSteerData
	if r := answer(); !r.Success || r.ID != "req-steer-1" || json.Unmarshal(r.Data, &data) != nil ||
		data.Status != protocol.SteerInjected || data.TurnID != "turn-1" || data.RunID != "run-1" || data.CorrelationID != "steer-1" {
		t.Fatalf("answer %+v (%+v)", r, data)
	}

	// The link breaks with a steer over there: NODE_UNAVAILABLE.
	steer("B", "steer-2")
	actortest.Expect(t, l.reg, func(m *agent.Route) bool {
		s, ok := m.Msg.(*agent.LeaseSteer)
		return ok && s.CorrelationID == "steer-2"
	})
	(<-l.pipe).Close()
	if r := answer(); r.Success || r.Error == nil || r.Error.Code != protocol.CodeNodeUnavailable || r.ID != "req-steer-2" {
		t.Fatalf("answer after the loss: %+v", r)
	}
	// A node that cannot be dialed: the same, at once.
	steer("C", "steer-3")
	if r := answer(); r.Success || r.Error == nil || r.Error.Code != protocol.CodeNodeUnavailable || r.ID != "req-steer-3" {
		t.Fatalf("answer for an unreachable node: %+v", r)
	}
	if len(recorded) != 0 {
		t.Fatalf("a steer of unknown outcome was recorded: %+v", <-recorded)
	}
}

// TestLinkRelaysTheChildsNode: a request A relays for a third node's child
// (its Delegate names that node) reaches B naming that node, so B forwards
// its clients' answers there, not to A.
func TestLinkRelaysTheChildsNode(t *testing.T) {
	l := newLink(t)
	l.child.Send(l.a, &registry.RemoteDelegate{Node: "B", AgentID: "grandparent-1",
		Msg: &agent.Delegate{RequestID: "r1", Rec: []byte(permRec), Origin: l.child.PID, Node: "C"}})
	rt := actortest.Expect(t, l.reg, func(m *agent.Route) bool { return m.AgentID == "grandparent-1" })
	if d, ok := rt.Msg.(*agent.Delegate); !ok || d.Node != "C" {
		t.Fatalf("delegated at B: %+v (want the child's node C)", rt.Msg)
	}
	if got := <-l.located; got != [2]string{"child-1", "C"} {
		t.Fatalf("B learned %v, want child-1 on C", got)
	}
}

// TestLinkRecordsAPersonsSteer: a person's steer of a child on A, leased a
// run whose job is on B, goes over to be recorded there (RecordSteer at
// B's registry, as the steer's outcome: source client), and the child's
// wait for the record ends only once B committed it. A link lost meanwhile
// ends the wait too (the answer goes out; the record is unknown).
func TestLinkRecordsAPersonsSteer(t *testing.T) {
	asked, release := make(chan *registry.RecordSteer, 4), make(chan struct{}, 4)
	l := newLinkTo(t, func(sys *actor.ActorSystem) *actor.PID {
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*registry.RecordSteer); ok {
				asked <- m
				<-release
				c.Respond(&agent.SteerRecorded{})
			}
		}))
		t.Cleanup(func() { close(release); sys.Root.Stop(pid) })
		return pid
	})
	steered := func(id string) {
		l.child.Send(l.a, &registry.RemoteSteered{Node: "B", ReplyTo: l.child.PID, Steered: &agent.LeaseSteered{RunID: "run-1", AgentID: "child-1",
			Steer: protocol.RunSteer{CorrelationID: id, Source: protocol.SteerSourceClient, Status: protocol.SteerInjected, TurnID: "turn-1"}}})
	}
	steered("steer-1")
	var got *registry.RecordSteer
	select {
	case got = <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("B was not asked to record the steer")
	}
	if s := got.Steered; s.RunID != "run-1" || s.AgentID != "child-1" || s.Steer != (protocol.RunSteer{CorrelationID: "steer-1",
		Source: protocol.SteerSourceClient, Status: protocol.SteerInjected, TurnID: "turn-1"}) {
		t.Fatalf("recorded at B: %+v", s)
	}
	if !actortest.None[*agent.SteerRecorded](l.child) {
		t.Fatal("the child heard the steer recorded before B committed it")
	}
	release <- struct{}{}
	actortest.Expect(t, l.child, func(*agent.SteerRecorded) bool { return true })

	// Lost before B answers: the wait ends.
	steered("steer-2")
	<-asked
	(<-l.pipe).Close()
	actortest.Expect(t, l.child, func(*agent.SteerRecorded) bool { return true })
	release <- struct{}{}
}
