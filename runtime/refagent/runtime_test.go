package refagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

func TestHelloAndSyncOnStart(t *testing.T) {
	h := start(t, nil)
	hello, sync := h.handshake()
	if hello.ProtocolVersion != protocol.Version || hello.ServerVersion != "test" {
		t.Fatalf("hello = %+v", hello)
	}
	wantCaps := []string{"streaming-deltas", "mode-catalog", "mode-switch", "model-catalog", "model-switch", "image-input"}
	if !slices.Equal(hello.Capabilities, wantCaps) || !slices.Equal(sync.Capabilities, wantCaps) {
		t.Fatalf("capabilities: hello %v sync %v", hello.Capabilities, sync.Capabilities)
	}
	if sync.Status != protocol.StatusIdle || sync.Mode != modeBuild || sync.RuntimeEpoch != nil || sync.AgentID != "" {
		t.Fatalf("sync = %+v", sync)
	}
	raw := string(h.all()[1])
	for _, want := range []string{`"messages":[]`, `"pending_requests":[]`} {
		if !strings.Contains(raw, want) {
			t.Errorf("sync %s lacks %s", raw, want)
		}
	}
	for _, banned := range []string{`"agent_id"`, `"runtime_epoch"`} {
		if strings.Contains(raw, banned) {
			t.Errorf("direct sync %s carries %s", raw, banned)
		}
	}
}

func TestPlainPromptEventSequence(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	id := h.prompt("hello there")
	evs := h.untilIdle()
	wantTypes(t, evs, "response", "status", "turn_start", "message_delta*", "message_complete", "usage", "turn_end", "status")
	mustResponse(t, evs[0].msg.(*protocol.Response), protocol.TypePrompt)
	if r := evs[0].msg.(*protocol.Response); r.ID != id {
		t.Fatalf("response id %q, want %q", r.ID, id)
	}
	if got := statuses(evs); !slices.Equal(got, []protocol.AgentStatus{protocol.StatusStreaming, protocol.StatusIdle}) {
		t.Fatalf("statuses %v", got)
	}
	start := one[*protocol.TurnStart](t, evs)
	end := one[*protocol.TurnEnd](t, evs)
	if start.TurnID == "" || end.TurnID != start.TurnID {
		t.Fatalf("turn ids %q / %q", start.TurnID, end.TurnID)
	}
	deltas := of[*protocol.MessageDelta](evs)
	if len(deltas) < 2 {
		t.Fatalf("want the reply in several deltas, got %d", len(deltas))
	}
	mc := one[*protocol.MessageComplete](t, evs)
	var streamed strings.Builder
	for _, d := range deltas {
		if d.MessageID != mc.MessageID || d.Kind != protocol.DeltaText || d.BlockIndex != 0 {
			t.Fatalf("delta %+v does not belong to block 0 of %s", d, mc.MessageID)
		}
		streamed.WriteString(d.TextDelta)
	}
	if got := textOf(mc.Message); got != "You said: hello there" || streamed.String() != got {
		t.Fatalf("reply %q, streamed %q", got, streamed.String())
	}
	if mc.Message.Role != roleAssistant || mc.Message.ID != mc.MessageID {
		t.Fatalf("message %+v", mc.Message)
	}
	u := one[*protocol.UsageEvent](t, evs)
	if u.Input < 1 || u.Output < 1 || u.ContextTokens != u.Input+u.Output || u.Model != "sim" {
		t.Fatalf("usage %+v", u.Usage)
	}
	if end.Usage == nil || end.Usage.Input != u.Input || end.Usage.Output != u.Output || end.Usage.Model != "sim" {
		t.Fatalf("turn usage %+v vs call usage %+v", end.Usage, u.Usage)
	}

	d := h.quietSync()
	if d.Status != protocol.StatusIdle || len(d.LiveWindow.Messages) != 2 || len(d.PendingRequests) != 0 {
		t.Fatalf("sync after turn: %+v", d)
	}
	if w := d.LiveWindow.Messages; w[0].Role != roleUser || textOf(w[0]) != "hello there" || w[1].ID != mc.MessageID {
		t.Fatalf("window %+v", w)
	}
}

func TestEveryRecordStartsWithType(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say hi")
	h.untilIdle()
	h.getSync()
	h.send(`{"id":"bad","type":"nope"}`)
	h.response("bad")
	for _, rec := range h.all() {
		if !bytes.HasPrefix(rec, []byte(`{"type":"`)) {
			t.Errorf("record does not start with type: %s", rec)
		}
	}
}

func TestSayAndThink(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: think pondering the request\nsim: say the answer is forty-two")
	evs := h.untilIdle()
	mc := one[*protocol.MessageComplete](t, evs)
	blocks := mc.Message.Content
	if len(blocks) != 2 || blocks[0].Type != protocol.BlockThinking || blocks[0].Text != "pondering the request" ||
		blocks[1].Type != protocol.BlockText || blocks[1].Text != "the answer is forty-two" {
		t.Fatalf("blocks %+v", blocks)
	}
	perBlock := map[int]string{}
	kinds := map[int]string{}
	counts := map[int]int{}
	for _, d := range of[*protocol.MessageDelta](evs) {
		perBlock[d.BlockIndex] += d.TextDelta
		kinds[d.BlockIndex] = d.Kind
		counts[d.BlockIndex]++
	}
	if perBlock[0] != blocks[0].Text || perBlock[1] != blocks[1].Text || kinds[0] != protocol.DeltaThinking || kinds[1] != protocol.DeltaText {
		t.Fatalf("deltas per block %v kinds %v", perBlock, kinds)
	}
	if counts[0] < 2 || counts[1] < 2 {
		t.Fatalf("want each block in several deltas, got %v", counts)
	}
}

func TestToolReadRunsWithoutPermission(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "notes.txt"), []byte("line one\nline two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: say reading\nsim: tool read {\"path\": \"notes.txt\"}\nsim: say after")
	evs := h.untilIdle()
	wantTypes(t, evs, "response", "status", "turn_start",
		"message_delta*", "message_complete", "usage", "tool_call", "tool_result",
		"message_delta*", "message_complete", "usage", "turn_end", "status")

	// The tool_call block streams its id and name first, then the JSON
	// arguments in at least two fragments.
	mcs := of[*protocol.MessageComplete](evs)
	var callDeltas []*protocol.MessageDelta
	for _, d := range of[*protocol.MessageDelta](evs) {
		if d.Kind == protocol.DeltaToolCall {
			callDeltas = append(callDeltas, d)
		}
	}
	if len(callDeltas) < 3 || callDeltas[0].ToolCallID == "" || callDeltas[0].Name != "read" || callDeltas[0].ArgsDelta != "" {
		t.Fatalf("tool_call deltas %+v", callDeltas)
	}
	var args strings.Builder
	for _, d := range callDeltas[1:] {
		if d.ArgsDelta == "" || d.BlockIndex != 1 || d.MessageID != mcs[0].MessageID {
			t.Fatalf("args delta %+v", d)
		}
		args.WriteString(d.ArgsDelta)
	}
	if args.String() != `{"path":"notes.txt"}` {
		t.Fatalf("streamed args %q", args.String())
	}
	block := mcs[0].Message.Content[1]
	if block.Type != protocol.BlockToolCall || block.ID != callDeltas[0].ToolCallID || block.Args["path"] != "notes.txt" {
		t.Fatalf("tool_call block %+v", block)
	}

	call := one[*protocol.ToolCall](t, evs)
	res := one[*protocol.ToolResult](t, evs)
	if call.ToolCallID != block.ID || call.Name != "read" || call.ReadOnly == nil || !*call.ReadOnly || call.Args["path"] != "notes.txt" {
		t.Fatalf("tool_call %+v", call)
	}
	if res.ToolCallID != block.ID || res.IsError || res.Content.Kind != "text" || res.Content.Text != "line one\nline two\n" || res.DurationMs == nil {
		t.Fatalf("tool_result %+v", res)
	}
	if res.Render == nil || res.Render.Kind != "code" || res.Render.Path != "notes.txt" || res.Render.Text != "line one\nline two\n" {
		t.Fatalf("render %+v", res.Render)
	}
	if textOf(mcs[1].Message) != "after" {
		t.Fatalf("second call said %q", textOf(mcs[1].Message))
	}
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("read asked for permission")
	}

	w := h.quietSync().LiveWindow.Messages
	if len(w) != 4 || w[2].Role != roleUser || len(w[2].Content) != 1 {
		t.Fatalf("window %+v", w)
	}
	if b := w[2].Content[0]; b.Type != protocol.BlockToolResult || b.ToolCallID != block.ID || b.Content == nil || b.Content.Text != "line one\nline two\n" {
		t.Fatalf("tool_result block %+v", b)
	}
}

func TestToolReadMissingFileIsError(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt(`sim: tool read {"path":"nope.txt"}`)
	evs := h.untilIdle()
	res := one[*protocol.ToolResult](t, evs)
	if !res.IsError || res.Content.Kind != "error" || !strings.Contains(res.Content.Message, "nope.txt") {
		t.Fatalf("tool_result %+v", res)
	}
	if textOf(of[*protocol.MessageComplete](evs)[1].Message) != afterToolsReply {
		t.Fatalf("the call after the tool should say %q", afterToolsReply)
	}
}

// TestUnknownToolAndSubagentAreToolErrors runs without a daemon socket:
// the subagent tool explains that it needs the daemon.
func TestUnknownToolAndSubagentAreToolErrors(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: tool frobnicate {}\nsim: subagent scout look around the repo")
	evs := h.untilIdle()
	res := of[*protocol.ToolResult](evs)
	if len(res) != 2 {
		t.Fatalf("want 2 tool results, got %v", types(evs))
	}
	if !res[0].IsError || !strings.Contains(res[0].Content.Message, "unknown tool") {
		t.Fatalf("unknown tool result %+v", res[0])
	}
	if !res[1].IsError || !strings.Contains(res[1].Content.Message, "subagents need the daemon") {
		t.Fatalf("subagent result %+v", res[1])
	}
	if calls := of[*protocol.ToolCall](evs); len(calls) != 2 || calls[1].Name != "subagent" || calls[1].Args["name"] != "scout" {
		t.Fatalf("tool calls %+v", calls)
	}
}

func TestAbortDuringSleep(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say before\nsim: sleep 30000\nsim: say after")
	// "before" streams in pieces: abort once all of it was sent, so the
	// abort lands in the sleep, not between two pieces.
	for said := ""; said != "before"; {
		for _, d := range of[*protocol.MessageDelta](h.until(protocol.TypeMessageDelta)) {
			said += d.TextDelta
		}
	}
	began := time.Now()
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "a"}})
	evs := h.untilIdle()
	if time.Since(began) > 2*time.Second {
		t.Fatalf("abort took %s", time.Since(began))
	}
	if txt := assistantText(evs); strings.Contains(txt, "after") {
		t.Fatalf("directives after the abort ran: %q", txt)
	}
	mc := one[*protocol.MessageComplete](t, evs)
	if textOf(mc.Message) != "before" {
		t.Fatalf("partial message %q", textOf(mc.Message))
	}
	if s := statuses(evs); s[len(s)-1] != protocol.StatusIdle {
		t.Fatalf("statuses %v", s)
	}

	// Abort when idle: success and nothing else.
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "idle"}})
	r, before := h.response("idle")
	mustResponse(t, r, protocol.TypeAbort)
	if len(before) != 0 {
		t.Fatalf("idle abort produced %v", types(before))
	}
	h.quietSync()
}

func TestSteerDeliveredBeforeNextProviderCall(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "s.txt", "v")

	// Mid-turn, a prompt must say how it is to be delivered.
	id := h.prompt("no behaviour")
	r, _ := h.response(id)
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, `field "streaming_behavior": required while a turn is in flight`)

	h.send(protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "st"}, Message: "sim: say steered"})
	r, _ = h.response("st")
	mustResponse(t, r, protocol.TypeSteer)
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow"})
	evs := h.untilIdle()
	if n := len(of[*protocol.TurnStart](evs)); n != 0 {
		t.Fatalf("steer started a new turn")
	}
	mcs := of[*protocol.MessageComplete](evs)
	if len(mcs) != 1 || textOf(mcs[0].Message) != "steered" {
		t.Fatalf("call after the tool said %v", types(evs))
	}
	w := h.quietSync().LiveWindow.Messages
	var roles []string
	for _, m := range w {
		roles = append(roles, m.Role+":"+m.Content[0].Type)
	}
	want := []string{"user:text", "assistant:tool_call", "user:tool_result", "user:text", "assistant:text"}
	if !slices.Equal(roles, want) || textOf(w[3]) != "sim: say steered" {
		t.Fatalf("window %v, want %v", roles, want)
	}
}

func TestSteerDuringFinalCallContinuesTurn(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say first\nsim: sleep 200\nsim: say original")
	h.until(protocol.TypeMessageDelta)
	h.promptWith("plain words", protocol.BehaviorSteer)
	evs := h.untilIdle()
	if n := len(of[*protocol.TurnEnd](evs)); n != 1 {
		t.Fatalf("turn_end count %d", n)
	}
	mcs := of[*protocol.MessageComplete](evs)
	if len(mcs) != 2 || textOf(mcs[0].Message) != "firstoriginal" || textOf(mcs[1].Message) != "You said: plain words" {
		var got []string
		for _, m := range mcs {
			got = append(got, textOf(m.Message))
		}
		t.Fatalf("messages %q", got)
	}
}

func TestFollowUpRunsAfterTurn(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "f.txt", "v")
	id := h.promptWith("sim: say later", protocol.BehaviorFollowUp)
	r, _ := h.response(id)
	mustResponse(t, r, protocol.TypePrompt)
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow"})
	evs := append(h.untilIdle(), h.untilIdle()...)
	starts := of[*protocol.TurnStart](evs)
	ends := of[*protocol.TurnEnd](evs)
	if len(starts) != 1 || len(ends) != 2 || ends[1].TurnID != starts[0].TurnID || ends[0].TurnID == starts[0].TurnID {
		t.Fatalf("turns: %v", types(evs))
	}
	if txt := assistantText(evs); !strings.HasSuffix(txt, "later") {
		t.Fatalf("follow-up did not run last: %q", txt)
	}
	// The first turn ends (idle) before the follow-up starts.
	want := []protocol.AgentStatus{protocol.StatusStreaming, protocol.StatusIdle, protocol.StatusStreaming, protocol.StatusIdle}
	if got := statuses(evs); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
}

func TestFailEndsTurnWithError(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say partial\nsim: fail upstream exploded\nsim: say never")
	evs := h.untilIdle()
	wantTypes(t, evs, "response", "status", "turn_start", "message_delta*", "message_complete", "usage", "error", "turn_end", "status")
	e := one[*protocol.ErrorEvent](t, evs)
	if e.Code != protocol.CodeProviderError || e.Message != "upstream exploded" || e.Fatal {
		t.Fatalf("error %+v", e)
	}
	if s := statuses(evs); s[len(s)-1] != protocol.StatusError {
		t.Fatalf("statuses %v", s)
	}
	if d := h.quietSync(); d.Status != protocol.StatusError {
		t.Fatalf("status %s", d.Status)
	}
	// The runtime recovers on the next prompt.
	h.prompt("again")
	evs = h.untilIdle()
	if got := statuses(evs); !slices.Equal(got, []protocol.AgentStatus{protocol.StatusStreaming, protocol.StatusIdle}) {
		t.Fatalf("statuses %v", got)
	}
}

func TestContextWindowExceededIsProviderError(t *testing.T) {
	h := start(t, func(o *Options) { o.ContextWindow = 5 })
	h.handshake()
	h.prompt("a prompt comfortably longer than twenty bytes")
	evs := h.untilIdle()
	if e := one[*protocol.ErrorEvent](t, evs); e.Code != protocol.CodeProviderError || !strings.Contains(e.Message, "context window exceeded") {
		t.Fatalf("error %+v", e)
	}
	if len(of[*protocol.MessageComplete](evs)) != 0 {
		t.Fatal("an overflowing call produced a message")
	}
}

func TestSteerWhenIdleStartsTurn(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.send(protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "s"}, Message: "sim: say steering idle"})
	evs := h.untilIdle()
	mustResponse(t, evs[0].msg.(*protocol.Response), protocol.TypeSteer)
	if len(of[*protocol.TurnStart](evs)) != 1 || assistantText(evs) != "steering idle" {
		t.Fatalf("events %v", types(evs))
	}
}

func TestMalformedDirectiveIsProviderError(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: tool write not-json")
	evs := h.untilIdle()
	if e := one[*protocol.ErrorEvent](t, evs); e.Code != protocol.CodeProviderError || !strings.Contains(e.Message, "JSON object") {
		t.Fatalf("error %+v", e)
	}
}

// TestGetSyncMatchesEventsBeforeIt checks the resync guarantee under load:
// each get_sync answer equals the state derived from exactly the events
// written before it.
func TestGetSyncMatchesEventsBeforeIt(t *testing.T) {
	h := start(t, nil)
	_, sync := h.handshake()
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "f.txt"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	var script []string
	for range 25 {
		script = append(script, "sim: sleep 1", "sim: say step", `sim: tool read {"path":"f.txt"}`)
	}
	h.prompt(strings.Join(script, "\n"))
	const syncs = 60
	for i := range syncs {
		h.send(protocol.GetSync{Header: protocol.Header{Type: protocol.TypeGetSync, ID: fmt.Sprintf("gs%d", i)}})
		time.Sleep(time.Millisecond)
	}

	status := sync.Status
	var completed []string
	results := 0
	seen, ended := 0, false
	for seen < syncs || !ended {
		ev := h.next()
		switch m := ev.msg.(type) {
		case *protocol.Status:
			status = m.Status
			ended = ended || m.Status == protocol.StatusIdle
		case *protocol.MessageComplete:
			completed = append(completed, m.MessageID)
		case *protocol.ToolResult:
			results++
		case *protocol.Response:
			if m.Command != protocol.TypeGetSync {
				continue
			}
			seen++
			var d protocol.GetSyncData
			if err := json.Unmarshal(m.Data, &d); err != nil {
				t.Fatal(err)
			}
			var assistants []string
			blocks := 0
			for _, msg := range d.LiveWindow.Messages {
				if msg.Role == roleAssistant {
					assistants = append(assistants, msg.ID)
				}
				for _, b := range msg.Content {
					if b.Type == protocol.BlockToolResult {
						blocks++
					}
				}
			}
			if d.Status != status || !slices.Equal(assistants, completed) || blocks != results {
				t.Fatalf("%s: snapshot status %s, %d assistant messages, %d results; events say %s, %d, %d",
					m.ID, d.Status, len(assistants), blocks, status, len(completed), results)
			}
		}
	}
}

func TestSessionPersistsAcrossRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions", "sess-1")
	h := start(t, func(o *Options) { o.SessionDir = dir })
	h.handshake()
	h.prompt("remember me")
	h.untilIdle()
	first := h.quietSync().LiveWindow.Messages
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("session dir: %v %v", fi.Mode(), err)
	}
	path := filepath.Join(dir, sessionFileName)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v %v", fi.Mode(), err)
	}

	// A torn last line (crash mid-write) is ignored.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"id":"msg-torn","role":"us`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	h2 := start(t, func(o *Options) { o.SessionDir = dir })
	_, sync := h2.handshake()
	if !equalJSON(t, sync.LiveWindow.Messages, first) {
		t.Fatalf("restored window %+v, want %+v", sync.LiveWindow.Messages, first)
	}
	h2.prompt("and this")
	h2.untilIdle()
	second := h2.quietSync().LiveWindow.Messages
	if len(second) != 4 {
		t.Fatalf("window after second turn: %d messages", len(second))
	}
	if err := h2.stop(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, keep, addNL, err := parseTranscript(data)
	if err != nil || keep != len(data) || addNL {
		t.Fatalf("transcript after restart: %d entries keep %d/%d addNL %v err %v", len(entries), keep, len(data), addNL, err)
	}
	st, err := replay(entries)
	if err != nil || !equalJSON(t, st.window, second) {
		t.Fatalf("replayed transcript %+v (%v), want %+v", st, err, second)
	}
}

func TestCorruptSessionFailsRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sessionFileName), []byte("garbage\n{\"id\":\"m\",\"role\":\"user\",\"content\":[]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Options{Stdio: Stdio{Stdin: strings.NewReader(""), Stdout: io.Discard}, Identity: Identity{SessionDir: dir}})
	if protocol.CodeOf(err) != protocol.CodeSessionCorrupt {
		t.Fatalf("Run = %v, want SESSION_CORRUPT", err)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	return bytes.Equal(protocol.MustMarshal(a), protocol.MustMarshal(b))
}

func TestInvalidInputKeepsRuntimeWorking(t *testing.T) {
	h := start(t, nil)
	h.handshake()

	h.send("this is not json")
	r := h.next().msg.(*protocol.Response)
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, "JSON")
	if r.ID != "" {
		t.Fatalf("id %q", r.ID)
	}

	h.send(`{"id":"u1","type":"teleport"}`)
	r, _ = h.response("u1")
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, "teleport")
	if r.Command != "teleport" {
		t.Fatalf("command %q", r.Command)
	}

	h.send(`{"id":"u2","type":"prompt","message":42}`)
	r, _ = h.response("u2")
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, "message")

	h.send(`{"id":"u3","type":"set_model"}`)
	r, _ = h.response("u3")
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, "model")

	h.send(`{"id":"u4","type":"session_op","op":"branch"}`)
	r, _ = h.response("u4")
	mustErrorResponse(t, r, protocol.CodeInvalidRequest, "op")

	h.prompt("still alive")
	if txt := assistantText(h.untilIdle()); txt != "You said: still alive" {
		t.Fatalf("reply %q", txt)
	}
}

func TestFloodDeltaCount(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: flood 50 100")
	evs := h.untilIdle()
	deltas := of[*protocol.MessageDelta](evs)
	if len(deltas) != 50 {
		t.Fatalf("got %d deltas", len(deltas))
	}
	for _, d := range deltas {
		if len(d.TextDelta) != 100 {
			t.Fatalf("delta of %d bytes", len(d.TextDelta))
		}
	}
	mc := one[*protocol.MessageComplete](t, evs)
	if len(textOf(mc.Message)) != 5000 {
		t.Fatalf("message of %d bytes", len(textOf(mc.Message)))
	}
	if u := one[*protocol.UsageEvent](t, evs); u.Output != 5000/4 {
		t.Fatalf("output tokens %d", u.Output)
	}
}

func TestExitCallsOptionsExit(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: exit 3")
	select {
	case code := <-h.exits:
		if code != 3 {
			t.Fatalf("exit code %d", code)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Exit was not called")
	}
	h.untilIdle()
}

func TestModes(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.send(protocol.ListModes{Header: protocol.Header{Type: protocol.TypeListModes, ID: "lm"}})
	r, _ := h.response("lm")
	mustResponse(t, r, protocol.TypeListModes)
	var lm listModesData
	if err := json.Unmarshal(r.Data, &lm); err != nil {
		t.Fatal(err)
	}
	if len(lm.Modes) != 2 || lm.Modes[0].Name != "build" || lm.Modes[1].Name != "plan" || lm.Modes[0].Description == "" || lm.Active != "build" {
		t.Fatalf("list_modes %+v", lm)
	}

	h.send(protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode, ID: "m1"}, Mode: "plan"})
	mc := h.next()
	if ev, ok := mc.msg.(*protocol.ModeChanged); !ok || ev.PreviousMode != "build" || ev.Mode != "plan" {
		t.Fatalf("want mode_changed first, got %s", mc.raw)
	}
	r, _ = h.response("m1")
	if string(r.Data) != `{"previous_mode":"build","mode":"plan"}` {
		t.Fatalf("set_mode data %s", r.Data)
	}

	h.send(protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode, ID: "m2"}, Mode: "plan"})
	r, before := h.response("m2")
	if len(before) != 0 || string(r.Data) != `{"previous_mode":"plan","mode":"plan"}` {
		t.Fatalf("idempotent set_mode: events %v data %s", types(before), r.Data)
	}

	h.send(protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode, ID: "m3"}, Mode: "yolo"})
	r, before = h.response("m3")
	mustErrorResponse(t, r, protocol.CodeNotFound, "yolo")
	if len(before) != 0 {
		t.Fatalf("unknown mode produced %v", types(before))
	}
	if d := h.quietSync(); d.Mode != "plan" {
		t.Fatalf("mode %q after unknown set_mode", d.Mode)
	}

	// Plan mode refuses write without asking; read still works.
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "r.txt"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: tool write {\"path\":\"p.txt\",\"content\":\"x\"}\nsim: tool read {\"path\":\"r.txt\"}")
	evs := h.untilIdle()
	if len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatal("plan mode asked for permission")
	}
	res := of[*protocol.ToolResult](evs)
	if len(res) != 2 || !res[0].IsError || !strings.Contains(res[0].Content.Message, "plan mode") || res[1].IsError {
		t.Fatalf("results %+v", res)
	}
	if _, err := os.Stat(filepath.Join(h.opts.Cwd, "p.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("plan mode wrote a file")
	}

	// Back to build: write asks again.
	h.send(protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode, ID: "m4"}, Mode: "build"})
	h.response("m4")
	startWrite(t, h, "p.txt", "x")
}

func TestHangIgnoresEverythingUntilContextDone(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say going dark\nsim: hang")
	h.until(protocol.TypeMessageDelta)
	select {
	case <-h.hangs:
	case <-time.After(waitTimeout):
		t.Fatal("IgnoreSignals was not called")
	}
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "a"}})
	h.send(protocol.GetSync{Header: protocol.Header{Type: protocol.TypeGetSync, ID: "s"}})
	// Drain what was streamed before the hang, then expect silence.
	for {
		h.mu.Lock()
		n := len(h.lines)
		h.mu.Unlock()
		if h.pos >= n {
			break
		}
		if ev := h.next(); ev.typ != protocol.TypeMessageDelta {
			t.Fatalf("event after hang: %s", ev.raw)
		}
	}
	h.noEventWithin(200 * time.Millisecond)

	// Stdin EOF does not end a hung runtime; its context does.
	_ = h.in.Close()
	select {
	case err := <-h.runErr:
		t.Fatalf("hung Run returned on stdin EOF: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	h.cancel()
	select {
	case err := <-h.runErr:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		h.runErr <- nil // for the cleanup's stop
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestContextCancelMidTurn(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say waiting\nsim: sleep 30000")
	h.until(protocol.TypeMessageDelta)
	h.cancel()
	select {
	case err := <-h.runErr:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		h.runErr <- nil
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context was cancelled")
	}
	evs := h.untilIdle()
	if len(of[*protocol.TurnEnd](evs)) != 1 {
		t.Fatalf("want turn_end on shutdown, got %v", types(evs))
	}
}

func TestStdinEOFAbortsTurn(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "eof.txt", "v")
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	var evs []event
	for _, raw := range h.all()[h.pos:] {
		evs = append(evs, h.decode(raw))
	}
	wantTypes(t, evs, "permission_resolved", "status", "turn_end", "status")
	if r := one[*protocol.PermissionResolved](t, evs); r.RequestID != req.RequestID || r.Source != "abort" {
		t.Fatalf("resolved %+v", r)
	}
}

func TestStdoutFailureEndsRun(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	err := Run(context.Background(), Options{Stdio: Stdio{Stdin: inR, Stdout: failingWriter{}}})
	if err == nil || !strings.Contains(err.Error(), "write stdout") {
		t.Fatalf("Run = %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{
		{Stdio: Stdio{Stdout: io.Discard}},
		{Stdio: Stdio{Stdin: strings.NewReader("")}},
		{Stdio: Stdio{Stdin: strings.NewReader(""), Stdout: io.Discard}, Identity: Identity{Mode: "chaos"}},
	} {
		if err := Run(context.Background(), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestStderrNeverCarriesPromptText(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	const secret = "zebra-secret-4711"
	h.prompt("sim: say " + secret + "\nsim: tool read {\"path\":\"" + secret + "\"}\nsim: exit 0")
	h.untilIdle()
	<-h.exits
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.stderr.String(), secret) {
		t.Fatalf("stderr carries prompt text: %s", h.stderr.String())
	}
}

// TestStrictSteerAnsweredAtProviderBoundary: a strict steer is answered
// only once a provider request carrying it is built, with the turn it
// joined; until then it is pending.
func TestStrictSteerAnsweredAtProviderBoundary(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "strict.txt", "v")
	h.send(protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "st"}, Message: "sim: say steered", Strict: true})
	h.quietSync() // accepted, not answered: the turn waits for permission
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow"})
	r, before := h.response("st")
	mustResponse(t, r, protocol.TypeSteer)
	var data protocol.SteerData
	if err := json.Unmarshal(r.Data, &data); err != nil || data.TurnID == "" {
		t.Fatalf("strict steer answer %s", r.Data)
	}
	if len(of[*protocol.ToolResult](before)) != 1 || len(of[*protocol.MessageComplete](before)) != 0 {
		t.Fatalf("answered out of place, after %v", types(before))
	}
	evs := h.untilIdle()
	if mcs := of[*protocol.MessageComplete](evs); len(mcs) != 1 || textOf(mcs[0].Message) != "steered" {
		t.Fatalf("call after the steer: %v", types(evs))
	}
}

// TestStrictSteerRefusedWhenTurnEndsFirst: a strict steer still waiting
// when its turn fails or is aborted is answered CONFLICT and dropped,
// never run as a later turn.
func TestStrictSteerRefusedWhenTurnEndsFirst(t *testing.T) {
	for _, tc := range []struct{ name, end string }{{"failed", "fail"}, {"aborted", "abort"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil)
			h.handshake()
			h.prompt("sim: ask confirm Go\nsim: fail upstream broke")
			ask := h.until(protocol.TypeUIRequest)
			reqID := ask[len(ask)-1].msg.(*protocol.UIRequest).RequestID
			h.send(protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "st"}, Message: "sim: say ghost", Strict: true})
			if tc.end == "abort" {
				h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "ab"}})
			} else {
				h.send(protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse}, RequestID: reqID, Value: json.RawMessage(`"true"`)})
			}
			r, _ := h.response("st")
			mustErrorResponse(t, r, protocol.CodeConflict, "")
			evs := h.untilIdle()
			if n := len(of[*protocol.TurnStart](evs)); n != 0 {
				t.Fatalf("the refused steer started a turn: %v", types(evs))
			}
			for _, m := range h.quietSync().LiveWindow.Messages {
				if strings.Contains(textOf(m), "ghost") || (len(m.Content) > 0 && strings.Contains(m.Content[0].Text, "ghost")) {
					t.Fatalf("the refused steer is in the window: %+v", m)
				}
			}
		})
	}
}

// TestToolCrashIsToolError: a tool that crashes (panics) gives an error
// event TOOL_ERROR, not fatal, and an error tool_result; the turn goes on
// and the model is called back with it.
func TestToolCrashIsToolError(t *testing.T) {
	crash := tool{name: "crash", readOnly: true,
		spec:  provider.ToolSpec{Name: "crash", Description: "crashes", Schema: json.RawMessage(`{"type":"object"}`)},
		check: func(map[string]any) error { return nil },
		run:   func(context.Context, map[string]any) toolOutput { panic("secret argument text") },
	}
	h := start(t, func(o *Options) { o.extraTools = []tool{crash} })
	h.handshake()
	h.prompt("sim: tool crash {}\nsim: say after")
	evs := h.untilIdle()
	e := one[*protocol.ErrorEvent](t, evs)
	if e.Code != protocol.CodeToolError || e.Fatal || !strings.Contains(e.Message, "crash") || strings.Contains(e.Message, "secret") {
		t.Fatalf("error event %+v", e)
	}
	res := one[*protocol.ToolResult](t, evs)
	if !res.IsError || strings.Contains(res.Content.Message, "secret") {
		t.Fatalf("tool_result %+v", res)
	}
	if txt := assistantText(evs); txt != "after" {
		t.Fatalf("the turn did not go on: %q", txt)
	}
	if s := statuses(evs); s[len(s)-1] != protocol.StatusIdle {
		t.Fatalf("statuses %v", s)
	}
}
