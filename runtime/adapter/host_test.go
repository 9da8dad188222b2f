package adapter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
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
	// takesImages is Offer.Images; images receives each prompt's images
	// when set.
	takesImages bool
	images      chan []protocol.Image
	// resumed is Offer.Resumed.
	resumed bool
}

func (g *gated) Start(context.Context, Events) (Offer, error) {
	o := Offer{Model: "m-b", Images: g.takesImages, Resumed: g.resumed}
	for _, m := range []string{"m-a", "m-b", "m-c"} {
		o.Models = append(o.Models, protocol.ModelDescriptor{ID: m, Provider: "acp", Model: m})
	}
	return o, nil
}
func (g *gated) Prompt(_ context.Context, text string, images []protocol.Image) (TurnResult, error) {
	g.prompts <- text
	if g.images != nil {
		g.images <- images
	}
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
	return newSessionOpts(t, g, Options{Models: models})
}

// newSessionOpts runs the Host with opts (its Stdin and Stdout set here).
func newSessionOpts(t *testing.T, g *gated, opts Options) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: make(chan map[string]any, 256)}
	done := make(chan error, 1)
	go func() {
		opts.Stdin, opts.Stdout = inR, outW
		done <- Run(context.Background(), opts, g)
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

// TestHostImages: an agent that takes no images refuses a prompt with
// images UNSUPPORTED (no turn) and offers no image-input; one that does
// gets the images with the text, its window names them with an image
// block, and get_image gives them back.
func TestHostImages(t *testing.T) {
	png := "iVBORw0KGgo=" // the PNG signature
	prompt := `{"type":"prompt","id":"%s","message":"look","images":[{"type":"image","data":"` + png + `","mime_type":"image/png"}]}`

	g := &gated{prompts: make(chan string, 1), release: make(chan TurnResult), done: make(chan struct{})}
	s := newSession(t, g, nil)
	s.send(fmt.Sprintf(prompt, "p1"))
	if c := errCode(s.response("p1")); c != "UNSUPPORTED" {
		t.Fatalf("images to an agent without image prompts: %s", c)
	}
	s.send(`{"type":"get_sync","id":"gs"}`)
	if caps := fmt.Sprint(s.response("gs")["data"].(map[string]any)["capabilities"]); strings.Contains(caps, protocol.CapImageInput) {
		t.Fatalf("capabilities %s offer images", caps)
	}
	select {
	case p := <-g.prompts:
		t.Fatalf("the agent got a prompt: %q", p)
	default:
	}

	g = &gated{prompts: make(chan string, 1), release: make(chan TurnResult), done: make(chan struct{}),
		takesImages: true, images: make(chan []protocol.Image, 1)}
	s = newSession(t, g, nil)
	s.send(fmt.Sprintf(prompt, "p2"))
	if r := s.response("p2"); r["success"] != true {
		t.Fatalf("prompt with images: %v", r)
	}
	if text, ims := <-g.prompts, <-g.images; text != "look" || len(ims) != 1 || ims[0].Data != png || ims[0].MimeType != "image/png" {
		t.Fatalf("agent got %q, %+v", text, ims)
	}
	g.release <- TurnResult{StopReason: StopEndTurn}
	s.send(`{"type":"get_sync","id":"gs"}`)
	data, _ := json.Marshal(s.response("gs")["data"])
	var sync protocol.GetSyncData
	_ = json.Unmarshal(data, &sync)
	if !strings.Contains(strings.Join(sync.Capabilities, ","), protocol.CapImageInput) {
		t.Fatalf("capabilities %v lack image input", sync.Capabilities)
	}
	user := sync.LiveWindow.Messages[0]
	if len(user.Content) != 2 || user.Content[0].Type != protocol.BlockImage || user.Content[0].Data != "" || user.Content[1].Text != "look" {
		t.Fatalf("user message = %+v", user)
	}
	s.send(`{"type":"get_image","id":"gi","sha256":"` + user.Content[0].SHA256 + `"}`)
	if im := s.response("gi")["data"].(map[string]any); im["data"] != png || im["mime_type"] != "image/png" || im["type"] != "image" {
		t.Fatalf("get_image = %v", im)
	}
}

// replaying is gated with a load's replay: a user message of an image and
// text, and the agent's answer.
type replaying struct{ *gated }

func (r replaying) Start(ctx context.Context, ev Events) (Offer, error) {
	ev.UserImage(protocol.Image{Type: "image", MimeType: "image/png", Data: "iVBORw0KGgo="})
	ev.UserText("what is ")
	ev.UserText("this?")
	ev.Text("a picture")
	ev.UserImage(protocol.Image{Type: "image", MimeType: "image/png", Data: "not base64"}) // cannot be kept: left out
	return r.gated.Start(ctx, ev)
}

// TestHostReplaysImages: images in a load's replay join their user
// message as image blocks, get_image serves them, and one that is not a
// valid image is left out.
func TestHostReplaysImages(t *testing.T) {
	g := &gated{prompts: make(chan string, 1), release: make(chan TurnResult), done: make(chan struct{})}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: make(chan map[string]any, 256)}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Stdin: inR, Stdout: outW}, replaying{g})
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
	s.send(`{"type":"get_sync","id":"gs"}`)
	data, _ := json.Marshal(s.response("gs")["data"])
	var sync protocol.GetSyncData
	_ = json.Unmarshal(data, &sync)
	w := sync.LiveWindow.Messages
	if len(w) != 2 || len(w[0].Content) != 2 || w[0].Content[0].Type != protocol.BlockImage || w[0].Content[1].Text != "what is this?" ||
		w[1].Role != roleAssistant {
		t.Fatalf("window %+v", w)
	}
	s.send(`{"type":"get_image","id":"gi","sha256":"` + w[0].Content[0].SHA256 + `"}`)
	if im := s.response("gi")["data"].(map[string]any); im["data"] != "iVBORw0KGgo=" {
		t.Fatalf("get_image = %v", im)
	}
}

// TestHostKeepsWindowForResume: the live window is kept in the session
// directory at each turn's end; a generation whose agent resumed the
// session (Offer.Resumed, no replay) shows it in its first sync, and one
// that did not (a new session) starts empty.
func TestHostKeepsWindowForResume(t *testing.T) {
	dir := t.TempDir()
	windowOf := func(resumed bool, prompt string) []any {
		g := &gated{prompts: make(chan string, 1), release: make(chan TurnResult, 1), done: make(chan struct{}), resumed: resumed}
		s := newSessionOpts(t, g, Options{SessionDir: dir})
		var sync map[string]any
		for m := range s.out {
			if m["type"] == "sync" {
				sync = m
				break
			}
		}
		if prompt != "" {
			g.release <- TurnResult{StopReason: StopEndTurn}
			s.send(`{"type":"prompt","id":"p1","message":"` + prompt + `"}`)
			s.response("p1")
			for m := range s.out {
				if m["type"] == "turn_end" {
					break
				}
			}
		}
		s.in.Close()
		for range s.out {
		}
		lw, _ := sync["live_window"].(map[string]any)
		msgs, _ := lw["messages"].([]any)
		return msgs
	}
	if w := windowOf(false, "remember this"); len(w) != 0 {
		t.Fatalf("first generation's window = %v", w)
	}
	w := windowOf(true, "")
	if len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]), "remember this") {
		t.Fatalf("resumed generation's window = %v, want the kept user message", w)
	}
	if w := windowOf(false, ""); len(w) != 0 {
		t.Fatalf("a new session's window = %v, want empty", w)
	}
	if w := windowOf(true, ""); len(w) != 0 {
		t.Fatalf("resuming the new session shows %v, the window of the session before it", w)
	}
}
