package daemon_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// llmKeyVar names the API key variable of the daemons that run agents on
// a fakellm service.
const llmKeyVar = "SHARD_TEST_LLM_KEY"

// llmScript is a fake model whose first call of each turn makes the tool
// calls that calls maps the prompt to, and whose next call (with the tool
// output) ends the turn. hold, when set for a prompt, holds that first
// answer until closed.
type llmScript struct {
	mu    sync.Mutex
	calls map[string][]fakellm.ToolCall
	hold  map[string]chan struct{}
}

func (s *llmScript) answer(p fakellm.Prompt) fakellm.Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.ToolOutput {
		return fakellm.Turn{Text: "noted"}
	}
	t := fakellm.Turn{Calls: s.calls[p.LastUser]}
	if h := s.hold[p.LastUser]; h != nil {
		t.Text, t.Hold = "asking ", h
	}
	return t
}

// set scripts the tool calls the prompt text makes.
func (s *llmScript) set(text string, calls ...fakellm.ToolCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[text] = calls
}

// startLLM starts a daemon whose agents run on the OpenAI-compatible fake
// f (the real runtime binary, its real provider client).
func startLLM(t *testing.T, f *fakellm.Server, mutate func(*config.Config)) *harness {
	t.Helper()
	t.Setenv(llmKeyVar, "sk-test-secret")
	cfg := newConfig(t)
	cfg.Provider = config.ProviderConfig{Name: "openai", BaseURL: f.URL + "/v1", Model: "test-model", APIKeyEnv: llmKeyVar}
	if mutate != nil {
		mutate(cfg)
	}
	return startWith(t, cfg)
}

// holdFor holds the first answer to the prompt text until hold is closed.
func (s *llmScript) holdFor(text string, hold chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold[text] = hold
}

func newLLM(t *testing.T) (*llmScript, *fakellm.Server) {
	s := &llmScript{calls: map[string][]fakellm.ToolCall{}, hold: map[string]chan struct{}{}}
	return s, fakellm.Start(t, fakellm.Script(s.answer))
}

// lastToolOutput is the content of the last tool message of the model
// request: what the model was told a tool call returned.
func lastToolOutput(t *testing.T, req fakellm.Request) string {
	t.Helper()
	msgs, _ := req.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "tool" {
			s, _ := m["content"].(string)
			return s
		}
	}
	t.Fatalf("no tool message in %s", req.Raw)
	return ""
}

func askCall(args map[string]any) fakellm.ToolCall {
	return fakellm.ToolCall{Name: "ask", Args: string(protocol.MustMarshal(args))}
}

func uiResponse(id, reqID string, value json.RawMessage) *protocol.UIResponse {
	return &protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: id}, RequestID: reqID, Value: value}
}

// TestAskToolEveryKind: a real model (the OpenAI-compatible fake) asks
// through the ask tool; the ui_request reaches both attached clients, the
// first answer wins (the second is dropped silently), both see
// ui_resolved, and the answer is what the model's next request carries as
// the tool's output. notify asks nothing and does not wait.
func TestAskToolEveryKind(t *testing.T) {
	script, f := newLLM(t)
	h := startLLM(t, f, nil)
	c1, c2 := h.dial(), h.dial()
	id := h.create(c1, nil)
	attach(t, c1, id, "")
	attach(t, c2, id, "")

	cases := []struct {
		name  string
		args  map[string]any
		value string // the winning ui_response value
		want  string // the tool output the model gets
		check func(*protocol.UIRequest) bool
	}{
		{"select", map[string]any{"kind": "select", "title": "Colour?", "options": []string{"red", "blue"}}, `"blue"`, `{"answer":"blue"}`,
			func(r *protocol.UIRequest) bool { return len(r.Options) == 2 && !r.Multiple }},
		{"multi", map[string]any{"kind": "select", "title": "Which?", "options": []string{"a", "b", "c"}, "multiple": true}, `["a","c"]`, `{"answer":["a","c"]}`,
			func(r *protocol.UIRequest) bool { return r.Multiple && len(r.Options) == 3 }},
		{"confirm page", map[string]any{"kind": "confirm", "title": "Go on?"}, `"yes"`, `{"answer":true}`, nil},
		{"confirm shardctl", map[string]any{"kind": "confirm", "title": "Go on?"}, `"false"`, `{"answer":false}`, nil},
		{"input", map[string]any{"kind": "input", "title": "Name?", "placeholder": "a name", "prefill": "x"}, `"Ada"`, `{"answer":"Ada"}`,
			func(r *protocol.UIRequest) bool { return r.Placeholder == "a name" && r.Prefill == "x" }},
		{"editor", map[string]any{"kind": "editor", "title": "Notes", "message": "write them"}, `"line 1\nline 2"`, `{"answer":"line 1\nline 2"}`,
			func(r *protocol.UIRequest) bool { return r.Message == "write them" }},
		{"dismissed", map[string]any{"kind": "input", "title": "Anything?"}, `null`, `{"answer":null,"note":"the person dismissed the question"}`, nil},
	}
	for _, tc := range cases {
		script.set(tc.name, askCall(tc.args))
		prompt(t, c1, id, tc.name)
		r1 := waitFor(t, c1, isType(protocol.TypeUIRequest, id)).Msg.(*protocol.UIRequest)
		r2 := waitFor(t, c2, isType(protocol.TypeUIRequest, id)).Msg.(*protocol.UIRequest)
		if r1.RequestID != r2.RequestID || r1.Kind != tc.args["kind"] || r1.Title != tc.args["title"] || (tc.check != nil && !tc.check(r1)) {
			t.Fatalf("%s: ui_request %+v / %+v", tc.name, r1, r2)
		}
		if _, err := c2.Request(ctx(t), uiResponse(id, r1.RequestID, json.RawMessage(tc.value))); err != nil {
			t.Fatalf("%s: winning answer: %v", tc.name, err)
		}
		if _, err := c1.Request(ctx(t), uiResponse(id, r1.RequestID, json.RawMessage(`"late"`))); err != nil {
			t.Fatalf("%s: a late answer is dropped silently, got %v", tc.name, err)
		}
		for _, c := range []*client.Conn{c1, c2} {
			res := waitFor(t, c, isType(protocol.TypeUIResolved, id)).Msg.(*protocol.UIResolved)
			if res.RequestID != r1.RequestID || string(res.Value) != tc.value {
				t.Errorf("%s: ui_resolved %+v %s", tc.name, res, res.Value)
			}
			waitFor(t, c, isType(protocol.TypeTurnEnd, id))
		}
		if got := lastToolOutput(t, f.Request(t, f.Count())); got != tc.want {
			t.Errorf("%s: the model was told %s, want %s", tc.name, got, tc.want)
		}
	}

	// notify: announced and closed at once; the turn does not wait.
	script.set("notify", askCall(map[string]any{"kind": "notify", "title": "Build done", "notify_type": "warning"}))
	prompt(t, c1, id, "notify")
	evs := collectUntil(t, c1, isType(protocol.TypeTurnEnd, id))
	var req *protocol.UIRequest
	var res *protocol.UIResolved
	for _, e := range evs {
		switch m := e.Msg.(type) {
		case *protocol.UIRequest:
			req = m
		case *protocol.UIResolved:
			res = m
		}
	}
	if req == nil || req.Kind != protocol.UINotify || req.NotifyType != "warning" || res == nil || res.RequestID != req.RequestID || res.Source != "notify" {
		t.Fatalf("notify: ui_request %+v, ui_resolved %+v", req, res)
	}
	if got := lastToolOutput(t, f.Request(t, f.Count())); got != `{"notified":true}` {
		t.Errorf("notify: the model was told %s", got)
	}

	// Arguments that do not make a question are the model's tool error,
	// and nothing is asked.
	script.set("bad", askCall(map[string]any{"kind": "select", "title": "Pick"}))
	prompt(t, c1, id, "bad")
	for _, e := range collectUntil(t, c1, isType(protocol.TypeTurnEnd, id)) {
		if _, ok := e.Msg.(*protocol.UIRequest); ok {
			t.Fatalf("a select without options was asked")
		}
	}
	if got := lastToolOutput(t, f.Request(t, f.Count())); !strings.Contains(got, "select needs options") {
		t.Errorf("bad ask: the model was told %s", got)
	}
}

// TestAskHeadless: with nobody interactive attached, the headless policy
// answers an ask: deny (the default) answers null from "headless"; queue
// leaves it open until the runtime's headless timeout, which the model is
// told as TIMEOUT.
func TestAskHeadless(t *testing.T) {
	for _, policy := range []string{protocol.HeadlessDeny, protocol.HeadlessQueue} {
		t.Run(policy, func(t *testing.T) {
			script, f := newLLM(t)
			h := startLLM(t, f, func(cfg *config.Config) {
				cfg.Headless.Policy = policy
				cfg.Headless.Timeout = 300 * time.Millisecond // the queue case waits for it
			})
			c, obs := h.dial(), h.dial()
			id := h.create(c, nil)
			attach(t, obs, id, protocol.RoleObserver)
			attach(t, c, id, "")
			hold := make(chan struct{})
			script.set("ask", askCall(map[string]any{"kind": "confirm", "title": "Deploy?"}))
			script.holdFor("ask", hold)
			prompt(t, c, id, "ask")
			waitFor(t, obs, isType(protocol.TypeTurnStart, id))
			if _, err := c.Request(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}); err != nil {
				t.Fatal(err)
			}
			close(hold) // the model asks once only an observer is left
			res := waitFor(t, obs, isType(protocol.TypeUIResolved, id)).Msg.(*protocol.UIResolved)
			waitFor(t, obs, isType(protocol.TypeTurnEnd, id))
			got := lastToolOutput(t, f.Request(t, f.Count()))
			switch policy {
			case protocol.HeadlessDeny:
				if string(res.Value) != "null" || res.Source != "headless" || !strings.Contains(got, `"answer":null`) || !strings.Contains(got, "nobody could answer") {
					t.Fatalf("deny: ui_resolved %+v %s; the model was told %s", res, res.Value, got)
				}
			case protocol.HeadlessQueue:
				if res.Source != "timeout" || !strings.HasPrefix(got, "Error: TIMEOUT") {
					t.Fatalf("queue: ui_resolved %+v; the model was told %s", res, got)
				}
			}
		})
	}
}

// TestAskFromChildDelegatesToAncestor: a child agent's ask (its model a
// real provider client) with no interactive client of its own reaches the
// parent's client with the child's agent_id, like a permission request;
// that client's answer is what the child's model is told.
func TestAskFromChildDelegatesToAncestor(t *testing.T) {
	script, f := newLLM(t)
	h := startLLM(t, f, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	const task = "pick the colours with the person"
	script.set(task, askCall(map[string]any{"kind": "select", "title": "Colours?", "options": []string{"red", "green", "blue"}, "multiple": true}))

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "asker", Task: task})
	child := job.Runs[0].AgentID
	req := waitFor(t, c, isType(protocol.TypeUIRequest, child)).Msg.(*protocol.UIRequest)
	if !req.Multiple || req.Title != "Colours?" {
		t.Fatalf("delegated ui_request %+v", req)
	}
	if _, err := c.Request(ctx(t), uiResponse(child, req.RequestID, json.RawMessage(`["blue","red"]`))); err != nil {
		t.Fatalf("the ancestor's client answers: %v", err)
	}
	res := waitFor(t, c, isType(protocol.TypeUIResolved, child)).Msg.(*protocol.UIResolved)
	if res.RequestID != req.RequestID {
		t.Fatalf("ui_resolved %+v", res)
	}
	if wr := waitRuns(t, c, parent, []string{job.JobID}, "", nil); wr.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run = %+v", wr.Runs[0])
	}
	var told string
	for _, r := range f.Requests() {
		if strings.Contains(string(r.Raw), `"role":"tool"`) && strings.Contains(string(r.Raw), task) {
			told = lastToolOutput(t, r)
		}
	}
	if told != `{"answer":["blue","red"]}` {
		t.Fatalf("the child's model was told %q", told)
	}
}
