package agent

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// stdinProbe stands in for the runtime actor: it records every Write.
type stdinProbe struct{ writes chan []byte }

func (p *stdinProbe) Receive(c actor.Context) {
	if w, ok := c.Message().(*proc.Write); ok {
		p.writes <- w.Line
	}
}

// rewriteActor is an agent whose runtime is a stdinProbe.
func rewriteActor(t *testing.T) (*Actor, chan []byte) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	p := &stdinProbe{writes: make(chan []byte, 16)}
	rt := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(rt).Wait()
		sys.Shutdown()
	})
	a := &Actor{m: store.Agent{AgentID: "01J9ZAGENT"}, sys: sys, log: slog.New(slog.DiscardHandler),
		generation: generation{rt: rt, ready: true}, dispatch: dispatch{inflight: map[string]*inflight{}}}
	return a, p.writes
}

func written(t *testing.T, writes chan []byte) map[string]json.RawMessage {
	t.Helper()
	select {
	case line := <-writes:
		for _, c := range line {
			if c == '\n' {
				t.Fatalf("record for the runtime holds a newline: %q", line)
			}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("record %s: %v", line, err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("nothing written to the runtime")
		return nil
	}
}

// TestSendRewritesRaw: a client command reaches the runtime under the
// next daemon id, without its agent_id, its other members as the client
// wrote them (also across a newline a WebSocket frame may hold), and the
// daemon remembers whose command it was.
func TestSendRewritesRaw(t *testing.T) {
	a, writes := rewriteActor(t)
	cl := &Client{ID: 7, Out: outbox.New(outbox.Limits{})}
	for i, raw := range []string{
		`{"id":"c-1","type":"prompt","agent_id":"01J9ZAGENT","message":"hi \"there\"","images":[{"type":"image","data":"iVBORw0KGgo=","mime_type":"image/png"}]}`,
		"{\"id\":\"c-1\",\n\"type\":\"prompt\",\"agent_id\":\"01J9ZAGENT\",\n\"message\":\"hi \\\"there\\\"\",\"images\":[{\"type\":\"image\",\n\"data\":\"iVBORw0KGgo=\",\"mime_type\":\"image/png\"}]}",
	} {
		_, h, err := protocol.DecodeCommand([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		a.send(cl, h, []byte(raw), nil)
		got := written(t, writes)
		did := "d-" + string(rune('1'+i))
		if string(got["id"]) != `"`+did+`"` || got["agent_id"] != nil || string(got["message"]) != `"hi \"there\""` || len(got) != 4 {
			t.Errorf("runtime got %v", got)
		}
		f := a.inflight[did]
		if f == nil || f.client != cl || f.clientID != "c-1" || f.command != protocol.TypePrompt {
			t.Errorf("inflight[%s] = %+v", did, f)
		}
	}
}

// TestStrictAndSourceSpliced: a steer into a leased run gets strict, an
// answer the source of the client that gave it.
func TestStrictAndSourceSpliced(t *testing.T) {
	a, writes := rewriteActor(t)
	a.lease = &lease{runID: "run-1", started: true}
	cl := &Client{ID: 7, Out: outbox.New(outbox.Limits{}), Source: "websocket"}
	raw := []byte(`{"id":"s1","type":"steer","agent_id":"01J9ZAGENT","message":"go","strict":false}`)
	cmd, h, err := protocol.DecodeCommand(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Client: cl, Header: h, Cmd: cmd, Raw: raw}
	if !a.leaseGuard(r) {
		t.Fatal("steer of a leased run not taken by the strict path")
	}
	if got := written(t, writes); string(got["strict"]) != "true" || string(got["message"]) != `"go"` || got["agent_id"] != nil {
		t.Errorf("steer for the runtime: %v", got)
	}

	a.lease = nil
	a.open = map[string]*openRequest{"req-1": {kind: protocol.TypeUIRequest}}
	raw = []byte(`{"id":"u1","type":"ui_response","agent_id":"01J9ZAGENT","request_id":"req-1","value":["a","b"],"source":"spoofed"}`)
	cmd, h, err = protocol.DecodeCommand(raw)
	if err != nil {
		t.Fatal(err)
	}
	a.answer(nil, &Request{Client: cl, Header: h, Cmd: cmd, Raw: raw}, &attachment{client: cl, role: protocol.RoleInteractive, live: true})
	if got := written(t, writes); string(got["source"]) != `"websocket"` || string(got["value"]) != `["a","b"]` || got["agent_id"] != nil {
		t.Errorf("answer for the runtime: %v", got)
	}
}
