package refagent

import (
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// errHold makes the fake daemon leave a request unanswered.
var errHold = errors.New("hold: never answer")

// fakeRequest is one command the fake daemon received.
type fakeRequest struct {
	raw    []byte
	header protocol.Header
	fields map[string]any // the whole record, decoded
}

// fakeDaemon is a daemon stand-in on a real unix socket in t.TempDir(): it
// greets every connection with hello, then answers each JSONL command with
// answer's data (or error), and records what it received. Tests sync on its
// channels, never on sleeps.
type fakeDaemon struct {
	t      *testing.T
	path   string
	ln     net.Listener
	answer func(req fakeRequest) (data any, err error)
	// before, when set, is written to the connection before each answer
	// (events the real daemon interleaves).
	before func(req fakeRequest) [][]byte

	requests chan fakeRequest // every command, in arrival order
	closed   chan struct{}    // one value per connection the runtime closed

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool // guarded by mu
}

func newFakeDaemon(t *testing.T, answer func(fakeRequest) (any, error)) *fakeDaemon {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	d := &fakeDaemon{t: t, path: path, ln: ln, answer: answer,
		requests: make(chan fakeRequest, 256), closed: make(chan struct{}, 256), conns: map[net.Conn]bool{}}
	d.wg.Go(d.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		d.mu.Lock()
		for c := range d.conns {
			_ = c.Close()
		}
		d.mu.Unlock()
		d.wg.Wait()
	})
	return d
}

func (d *fakeDaemon) serve() {
	for {
		nc, err := d.ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		d.conns[nc] = true
		d.mu.Unlock()
		d.wg.Go(func() { d.serveConn(nc) })
	}
}

func (d *fakeDaemon) serveConn(nc net.Conn) {
	defer func() {
		d.mu.Lock()
		delete(d.conns, nc)
		d.mu.Unlock()
		_ = nc.Close()
	}()
	write := func(rec []byte) bool {
		_, err := nc.Write(append(rec, '\n'))
		return err == nil
	}
	if !write(protocol.MustMarshal(protocol.Hello{Header: protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version, ServerVersion: "fake"})) {
		return
	}
	rd := protocol.NewReader(nc, 0)
	for {
		rec, err := rd.Next()
		if err != nil {
			d.closed <- struct{}{} // the runtime hung up (or cleanup closed it)
			return
		}
		req := fakeRequest{raw: append([]byte(nil), rec...)}
		if err := json.Unmarshal(rec, &req.header); err != nil {
			d.t.Errorf("fake daemon: undecodable record %s", rec)
			return
		}
		_ = json.Unmarshal(rec, &req.fields)
		d.requests <- req
		if d.before != nil {
			for _, ev := range d.before(req) {
				if !write(ev) {
					return
				}
			}
		}
		data, err := d.answer(req)
		switch {
		case errors.Is(err, errHold):
			continue
		case err != nil:
			write(protocol.NewErrorResponse(req.header.ID, req.header.Type, err))
		default:
			write(protocol.NewResponse(req.header.ID, req.header.Type, data))
		}
	}
}

// request returns the next command the fake received.
func (d *fakeDaemon) request() fakeRequest {
	d.t.Helper()
	select {
	case r := <-d.requests:
		return r
	case <-time.After(waitTimeout):
		d.t.Fatalf("the fake daemon received no request")
		return fakeRequest{}
	}
}

// noRequest asserts that the fake received nothing (so far).
func (d *fakeDaemon) noRequest() {
	d.t.Helper()
	select {
	case r := <-d.requests:
		d.t.Fatalf("unexpected request to the daemon: %s", r.raw)
	default:
	}
}

// waitClosed waits until the runtime has closed one connection.
func (d *fakeDaemon) waitClosed() {
	d.t.Helper()
	select {
	case <-d.closed:
	case <-time.After(waitTimeout):
		d.t.Fatalf("the runtime did not close its daemon connection")
	}
}

// echoAnswer answers every command with {"echo": <type>, "n": 1}.
func echoAnswer(req fakeRequest) (any, error) {
	return map[string]any{"echo": req.header.Type, "n": 1}, nil
}

// startWithDaemon starts a runtime whose subagent tool talks to d.
func startWithDaemon(t *testing.T, d *fakeDaemon, mod func(*Options)) *harness {
	t.Helper()
	h := start(t, func(o *Options) {
		o.Socket = d.path
		if mod != nil {
			mod(o)
		}
	})
	h.handshake()
	return h
}

// jsonEq reports whether a and b encode to the same JSON.
func jsonEq(t *testing.T, a, b any) bool {
	t.Helper()
	var na, nb any
	if err := json.Unmarshal(protocol.MustMarshal(a), &na); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(protocol.MustMarshal(b), &nb); err != nil {
		t.Fatal(err)
	}
	return string(protocol.MustMarshal(na)) == string(protocol.MustMarshal(nb))
}

// resultOf returns the single tool_result among evs, asserting that the
// subagent call asked no permission and was reported as not read-only.
func resultOf(t *testing.T, evs []event) *protocol.ToolResult {
	t.Helper()
	call := one[*protocol.ToolCall](t, evs)
	if call.Name != toolSubagent || call.ReadOnly == nil || *call.ReadOnly {
		t.Fatalf("tool_call %+v: want subagent with read_only false", call)
	}
	if n := len(of[*protocol.PermissionRequest](evs)); n != 0 {
		t.Fatalf("the subagent tool asked for permission %d times", n)
	}
	res := one[*protocol.ToolResult](t, evs)
	if res.ToolCallID != call.ToolCallID {
		t.Fatalf("tool_result %+v does not answer %s", res, call.ToolCallID)
	}
	return res
}

// payload is the command as the daemon received it, without its id (which
// the client chooses).
func payload(t *testing.T, req fakeRequest) map[string]any {
	t.Helper()
	if req.header.ID == "" {
		t.Fatalf("command without id: %s", req.raw)
	}
	p := make(map[string]any, len(req.fields))
	for k, v := range req.fields {
		if k != "id" {
			p[k] = v
		}
	}
	return p
}

func TestSubagentDirectiveCreatesAJobThroughTheDaemon(t *testing.T) {
	created := protocol.SubagentCreateData{JobID: "job-1", Strategy: protocol.StrategySingle, Runs: []protocol.CreatedRun{
		{RunID: "run-1", Index: 0, Name: "scout", State: protocol.RunQueued, AgentID: "agent-child", Alias: "Ada"}}}
	d := newFakeDaemon(t, func(fakeRequest) (any, error) { return created, nil })
	h := startWithDaemon(t, d, nil)

	h.prompt("sim: subagent scout map the repo\nsim: say launched")
	evs := h.untilIdle()
	req := d.request()
	d.waitClosed() // one connection per call, closed after the response
	want := map[string]any{"type": "subagent.create", "parent_agent_id": "agent-test",
		"name": "scout", "task": "map the repo", "mode": "build"}
	if got := payload(t, req); !jsonEq(t, got, want) {
		t.Fatalf("daemon received %s, want %v (no routing agent_id)", req.raw, want)
	}

	res := resultOf(t, evs)
	if res.IsError || res.Content.Kind != "json" || !jsonEq(t, res.Content.Value, created) {
		t.Fatalf("tool_result %+v, want the create response data", res)
	}
	if txt := assistantText(evs); !strings.HasSuffix(txt, "launched") {
		t.Fatalf("the turn did not go on after the call: %q", txt)
	}
	// The live window holds the same JSON result for the next provider call.
	w := h.quietSync().LiveWindow.Messages
	blk := w[2].Content[0]
	if blk.Type != protocol.BlockToolResult || blk.Content == nil || blk.Content.Kind != "json" || !jsonEq(t, blk.Content.Value, created) {
		t.Fatalf("window tool_result block %+v", blk)
	}
	d.noRequest()
}

func TestSubagentCreateInPlanModeIsNotRefusedAndMakesPlanningChildren(t *testing.T) {
	d := newFakeDaemon(t, echoAnswer)
	h := startWithDaemon(t, d, func(o *Options) { o.Mode = modePlan })
	h.prompt("sim: subagent planner outline the change")
	res := resultOf(t, h.untilIdle())
	if res.IsError {
		t.Fatalf("plan mode refused the subagent tool: %+v", res.Content)
	}
	if p := payload(t, d.request()); p["mode"] != modePlan {
		t.Fatalf("create payload %v: want mode plan", p)
	}
}

func TestSubagentToolActionsSendTheirCommands(t *testing.T) {
	d := newFakeDaemon(t, echoAnswer)
	h := startWithDaemon(t, d, nil)
	base := func(typ string, kv ...any) map[string]any {
		m := map[string]any{"type": typ, "parent_agent_id": "agent-test"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name, args string
		want       map[string]any
	}{
		{"wait any with timeout", `{"action":"wait","handles":["run-1","Ada"],"mode":"any","timeout":1.5}`,
			base("subagent.wait", "handles", []string{"run-1", "Ada"}, "mode", "any", "timeout", 1.5)},
		{"wait forever on one handle", `{"action":"wait","handles":"job-1"}`,
			base("subagent.wait", "handles", []string{"job-1"})},
		{"poll", `{"action":"wait","handles":["job-1"],"timeout":0}`,
			base("subagent.wait", "handles", []string{"job-1"}, "timeout", 0)},
		{"status of all jobs", `{"action":"status"}`, base("subagent.status")},
		{"status of targets", `{"action":"status","targets":["job-1","Ada"]}`,
			base("subagent.status", "targets", []string{"job-1", "Ada"})},
		{"stop", `{"action":"stop","handle":"Ada"}`, base("subagent.stop", "handle", "Ada")},
		{"batch defaults to parallel", `{"tasks":[{"name":"a","task":"do a"},{"name":"b","task":"do b"}]}`,
			base("subagent.create", "tasks", []protocol.TaskSpec{{Name: "a", Task: "do a"}, {Name: "b", Task: "do b"}}, "strategy", "parallel", "mode", "build")},
		{"children on another provider's model", `{"name":"w","task":"do w","model":"claude/claude-x"}`,
			base("subagent.create", "name", "w", "task", "do w", "model", "claude/claude-x", "mode", "build")},
		{"chain", `{"action":"create","tasks":[{"name":"a","task":"do a"}],"strategy":"chain"}`,
			base("subagent.create", "tasks", []protocol.TaskSpec{{Name: "a", Task: "do a"}}, "strategy", "chain", "mode", "build")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.prompt("sim: tool subagent " + tt.args)
			res := resultOf(t, h.untilIdle())
			req := d.request()
			if got := payload(t, req); !jsonEq(t, got, tt.want) {
				t.Errorf("daemon received %s\nwant %s", req.raw, protocol.MustMarshal(tt.want))
			}
			wantValue := map[string]any{"echo": tt.want["type"], "n": 1}
			if res.IsError || res.Content.Kind != "json" || !jsonEq(t, res.Content.Value, wantValue) {
				t.Errorf("tool_result %+v, want json %v", res.Content, wantValue)
			}
		})
	}
}

func TestSubagentToolErrors(t *testing.T) {
	d := newFakeDaemon(t, func(req fakeRequest) (any, error) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no job %v", req.fields["handle"])
	})
	h := startWithDaemon(t, d, nil)

	t.Run("daemon error keeps its code and message", func(t *testing.T) {
		h.prompt(`sim: tool subagent {"action":"stop","handle":"job-x"}`)
		evs := h.untilIdle()
		res := resultOf(t, evs)
		if !res.IsError || res.Content.Kind != "error" || res.Content.Message != "subagent.stop failed: NOT_FOUND: no job job-x" {
			t.Fatalf("tool_result %+v", res.Content)
		}
		if txt := assistantText(evs); !strings.HasSuffix(txt, afterToolsReply) {
			t.Fatalf("a tool error must not end the turn: %q", txt)
		}
		d.request()
	})

	invalid := []struct{ args, want string }{
		{`{"action":"dance"}`, `unknown action "dance"`},
		{`{"action":7}`, `argument "action" must be a string`},
		{`{"action":"wait"}`, `field "handles"`},
		{`{"action":"wait","handles":["a"],"mode":"some"}`, `field "mode"`},
		{`{"action":"wait","handles":["a"],"timeout":-1}`, `field "timeout"`},
		{`{"action":"wait","handles":["a"],"timeout":"soon"}`, `"timeout" must be a number of seconds`},
		{`{"action":"wait","handles":[""]}`, `field "handles[0]"`},
		{`{"name":"x"}`, `field "task"`},
		{`{"task":"t"}`, `field "name"`},
		{`{"name":"x","task":"t","tasks":[{"name":"a","task":"b"}]}`, `not both`},
		{`{"name":"x","task":"t","strategy":"chain"}`, `field "strategy"`},
		{`{"tasks":[{"name":"a"}]}`, `field "tasks[0].task"`},
		{`{"tasks":["a"]}`, `element 0 must be an object`},
		{`{"action":"stop"}`, `field "handle"`},
		{`{"action":"status","targets":[1]}`, `element 0 must be a string`},
	}
	for _, tt := range invalid {
		t.Run(tt.args, func(t *testing.T) {
			h.prompt("sim: tool subagent " + tt.args)
			res := resultOf(t, h.untilIdle())
			if !res.IsError || !strings.HasPrefix(res.Content.Message, "invalid arguments: ") || !strings.Contains(res.Content.Message, tt.want) {
				t.Fatalf("tool_result %q, want invalid arguments with %q", res.Content.Message, tt.want)
			}
		})
	}
	d.noRequest() // invalid calls never reach the daemon

	t.Run("no daemon", func(t *testing.T) {
		for _, mod := range []func(*Options){
			func(o *Options) { o.Socket = "" },
			func(o *Options) { o.AgentID = "" },
		} {
			h := startWithDaemon(t, d, mod)
			h.prompt("sim: subagent scout look")
			res := resultOf(t, h.untilIdle())
			if !res.IsError || !strings.Contains(res.Content.Message, "subagents need the daemon") {
				t.Fatalf("tool_result %+v", res.Content)
			}
		}
		d.noRequest()
	})

	t.Run("unreachable daemon", func(t *testing.T) {
		h := start(t, func(o *Options) { o.Socket = filepath.Join(t.TempDir(), "gone.sock") })
		h.handshake()
		h.prompt("sim: subagent scout look")
		res := resultOf(t, h.untilIdle())
		if !res.IsError || !strings.HasPrefix(res.Content.Message, "subagent.create failed: reach the daemon: ") {
			t.Fatalf("tool_result %+v", res.Content)
		}
	})
}

func TestSubagentWaitAbortClosesTheConnection(t *testing.T) {
	d := newFakeDaemon(t, func(req fakeRequest) (any, error) {
		if req.header.Type == protocol.TypeSubagentWait {
			return nil, errHold // a run that never ends
		}
		return echoAnswer(req)
	})
	h := startWithDaemon(t, d, nil)
	h.prompt("sim: tool subagent {\"action\":\"wait\",\"handles\":[\"run-1\"]}\nsim: say never")
	if req := d.request(); req.header.Type != protocol.TypeSubagentWait {
		t.Fatalf("first request %s", req.raw)
	}
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "a"}})
	evs := h.untilIdle()
	// Closing the connection is what tells the daemon to drop the waiter.
	d.waitClosed()
	res := resultOf(t, evs)
	if !res.IsError || res.Content.Message != "subagent.wait aborted" {
		t.Fatalf("tool_result %+v", res.Content)
	}
	if txt := assistantText(evs); strings.Contains(txt, "never") {
		t.Fatalf("directives after the abort ran: %q", txt)
	}
	d.noRequest() // no stop, no second wait: the runs go on
	if s := statuses(evs); s[len(s)-1] != protocol.StatusIdle {
		t.Fatalf("statuses %v", s)
	}
}

func TestSubagentCallDrainsDaemonEvents(t *testing.T) {
	d := newFakeDaemon(t, echoAnswer)
	// More events than the client buffers, before the response: the call
	// must still get its answer.
	d.before = func(req fakeRequest) [][]byte {
		ev := protocol.MustMarshal(protocol.SubagentRunChanged{Header: protocol.Header{Type: protocol.TypeSubagentRunChanged},
			ParentAgentID: "agent-test", JobID: "job-1", RunID: "run-1", State: protocol.RunActive})
		evs := make([][]byte, client.EventBuffer+100)
		for i := range evs {
			evs[i] = ev
		}
		return evs
	}
	h := startWithDaemon(t, d, nil)
	h.prompt(`sim: tool subagent {"action":"status"}`)
	res := resultOf(t, h.untilIdle())
	if res.IsError || !jsonEq(t, res.Content.Value, map[string]any{"echo": "subagent.status", "n": 1}) {
		t.Fatalf("tool_result %+v", res.Content)
	}
	d.request()
}
