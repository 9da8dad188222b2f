package adapter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// gated is a Backend whose turns end when the test says so.
type gated struct {
	prompts chan string
	release chan TurnResult
	models  []string
	done    chan struct{}
}

func (g *gated) Start(context.Context, Events) (Offer, error) {
	o := Offer{Model: "m-b"}
	for _, m := range []string{"m-a", "m-b", "m-c"} {
		o.Models = append(o.Models, protocol.ModelDescriptor{ID: m, Provider: "acp", Model: m})
	}
	return o, nil
}
func (g *gated) Prompt(_ context.Context, text string) (TurnResult, error) {
	g.prompts <- text
	return <-g.release, nil
}
func (g *gated) Cancel()                               {}
func (g *gated) SetMode(context.Context, string) error { return ErrUnsupported }
func (g *gated) SetModel(_ context.Context, m string) error {
	g.models = append(g.models, m)
	return nil
}
func (g *gated) Done() <-chan struct{} { return g.done }
func (g *gated) Err() error            { return nil }
func (g *gated) Close() error          { return nil }

type session struct {
	t   *testing.T
	in  *io.PipeWriter
	out chan map[string]any
}

func newSession(t *testing.T, g *gated, models []string) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: make(chan map[string]any, 256)}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Stdin: inR, Stdout: outW, Models: models}, g)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			_ = json.Unmarshal(sc.Bytes(), &m)
			s.out <- m
		}
		close(s.out)
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s
}

func (s *session) send(cmd string) {
	go func() { _, _ = s.in.Write([]byte(cmd + "\n")) }()
}

// response waits for the response to id.
func (s *session) response(id string) map[string]any {
	s.t.Helper()
	for {
		select {
		case m, ok := <-s.out:
			if !ok {
				s.t.Fatal("output ended")
			}
			if m["type"] == "response" && m["id"] == id {
				return m
			}
		case <-time.After(10 * time.Second):
			s.t.Fatalf("no response to %s", id)
		}
	}
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestHostModelsFilterAndSteerQueue: the profile's models filter the
// agent's catalog (list_models, set_model); mid-turn, steer and follow_up
// run as the next turns in order, a strict steer is UNSUPPORTED, and a
// prompt without streaming_behavior is INVALID_REQUEST.
func TestHostModelsFilterAndSteerQueue(t *testing.T) {
	g := &gated{prompts: make(chan string, 8), release: make(chan TurnResult), done: make(chan struct{})}
	s := newSession(t, g, []string{"m-b", "m-c"})
	s.send(`{"type":"list_models","id":"l"}`)
	r := s.response("l")
	data, _ := json.Marshal(r["data"])
	var lm struct {
		Models []protocol.ModelDescriptor `json:"models"`
		Active protocol.ModelDescriptor   `json:"active"`
	}
	_ = json.Unmarshal(data, &lm)
	if len(lm.Models) != 2 || lm.Models[0].ID != "m-b" || lm.Active.ID != "m-b" {
		t.Fatalf("list_models = %s", data)
	}
	s.send(`{"type":"set_model","id":"s1","model":"m-a"}`)
	if c := errCode(s.response("s1")); c != "NOT_FOUND" {
		t.Fatalf("set_model of a filtered-out model: %s", c)
	}
	s.send(`{"type":"set_model","id":"s2","model":"m-c"}`)
	if r := s.response("s2"); r["success"] != true || len(g.models) != 1 || g.models[0] != "m-c" {
		t.Fatalf("set_model m-c: %v (agent got %v)", r, g.models)
	}
	s.send(`{"type":"set_reasoning_level","id":"rl","model":"m-c","effort":"high"}`)
	if c := errCode(s.response("rl")); c != "UNSUPPORTED" {
		t.Fatalf("reasoning: %s", c)
	}

	s.send(`{"type":"prompt","id":"p1","message":"first"}`)
	s.response("p1")
	if got := <-g.prompts; got != "first" {
		t.Fatalf("prompt = %q", got)
	}
	s.send(`{"type":"prompt","id":"p2","message":"no behavior"}`)
	if c := errCode(s.response("p2")); c != "INVALID_REQUEST" {
		t.Fatalf("mid-turn prompt without streaming_behavior: %s", c)
	}
	s.send(`{"type":"steer","id":"st","message":"steered"}`)
	s.response("st")
	s.send(`{"type":"prompt","id":"p3","message":"followed","streaming_behavior":"follow_up"}`)
	s.response("p3")
	s.send(`{"type":"steer","id":"strict","message":"x","strict":true}`)
	if c := errCode(s.response("strict")); c != "UNSUPPORTED" {
		t.Fatalf("strict steer: %s", c)
	}
	g.release <- TurnResult{StopReason: StopEndTurn}
	if got := <-g.prompts; got != "steered" {
		t.Fatalf("second turn = %q", got)
	}
	g.release <- TurnResult{StopReason: StopEndTurn}
	if got := <-g.prompts; got != "followed" {
		t.Fatalf("third turn = %q", got)
	}
	g.release <- TurnResult{StopReason: StopEndTurn}
}

// TestHostStopsItsReaderWhenTheAgentExits: when the agent dies, Run
// reports it and returns without waiting for the daemon to close stdin:
// it closes stdin itself, which ends its reader (a write to stdin fails
// from then on), and the reader has ended when Run returns.
func TestHostStopsItsReaderWhenTheAgentExits(t *testing.T) {
	g := &gated{prompts: make(chan string, 1), release: make(chan TurnResult), done: make(chan struct{})}
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), Options{Stdin: inR, Stdout: io.Discard}, g) }()
	close(g.done)
	if err := <-done; err == nil {
		t.Fatal("Run returned nil when the agent exited")
	}
	if _, err := inW.Write([]byte("{}\n")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write to stdin after Run = %v, want io.ErrClosedPipe", err)
	}
}
