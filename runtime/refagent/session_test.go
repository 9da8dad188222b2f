package refagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// ---- helpers ----

// sessionDir is a fresh session directory as the daemon lays it out.
func sessionDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "sessions", "sess-test")
}

// inSession starts a runtime on dir (mod may adjust more options) and
// consumes its handshake.
func inSession(t *testing.T, dir string, mod func(*Options)) (*harness, *protocol.Sync) {
	t.Helper()
	h := start(t, func(o *Options) {
		o.SessionDir = dir
		if mod != nil {
			mod(o)
		}
	})
	_, sync := h.handshake()
	return h, sync
}

// sessionOp sends a session_op and returns its response with the events
// before it.
func (h *harness) sessionOp(op string, args any) (*protocol.Response, []event) {
	h.t.Helper()
	id := h.id("op")
	cmd := map[string]any{"type": protocol.TypeSessionOp, "id": id, "op": op}
	if args != nil {
		cmd["args"] = args
	}
	h.send(cmd)
	return h.response(id)
}

// decodeData decodes a response's data into T.
func decodeData[T any](t *testing.T, r *protocol.Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatalf("decode %s data %s: %v", r.Command, r.Data, err)
	}
	return v
}

// readEntriesAt reads and decodes a transcript file.
func readEntriesAt(t *testing.T, path string) []entry {
	t.Helper()
	entries, err := readTranscript(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return entries
}

// stopped stops h and fails on a Run error.
func stopped(t *testing.T, h *harness) {
	t.Helper()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// turns plays plain prompts, each to its end.
func turns(h *harness, prompts ...string) {
	h.t.Helper()
	for _, p := range prompts {
		h.prompt(p)
		h.untilIdle()
	}
}

// ---- transcript and restart ----

func TestRestartResumesLiveWindow(t *testing.T) {
	dir := sessionDir(t)
	h, sync := inSession(t, dir, nil)
	if len(sync.LiveWindow.Messages) != 0 || sync.LiveWindow.CompactionIndex != nil {
		t.Fatalf("fresh session sync %+v", sync.LiveWindow)
	}
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "f.txt"), []byte("file body\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: think pondering\nsim: tool read {\"path\":\"f.txt\"}\nsim: tool bash {\"command\":\"echo out; exit 3\"}\nsim: say finished")
	evs := h.until(protocol.TypePermissionRequest)
	req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow"})
	evs = h.untilIdle()
	if res := of[*protocol.ToolResult](evs); len(res) != 1 || res[0].ExitCode == nil || *res[0].ExitCode != 3 {
		t.Fatalf("bash result %+v", res)
	}
	turns(h, "and a plain one")
	before := h.quietSync().LiveWindow
	stopped(t, h)

	// The exit code is in the transcript, next to the result it belongs to.
	var codes int
	for _, e := range readEntriesAt(t, filepath.Join(dir, sessionFileName)) {
		if e.Type != entryMessage || e.ID == "" {
			t.Fatalf("entry %+v", e)
		}
		for _, code := range e.ExitCodes {
			if code == 3 {
				codes++
			}
		}
	}
	if codes != 1 {
		t.Fatalf("%d entries keep exit code 3", codes)
	}

	h2, sync2 := inSession(t, dir, nil)
	if !equalJSON(t, sync2.LiveWindow, before) {
		t.Fatalf("restored window\n got %s\nwant %s", protocol.MustMarshal(sync2.LiveWindow), protocol.MustMarshal(before))
	}
	var results int
	for _, m := range sync2.LiveWindow.Messages {
		for _, b := range m.Content {
			if b.Type == protocol.BlockToolResult {
				results++
			}
		}
	}
	if results != 2 {
		t.Fatalf("restored window holds %d tool results, want 2", results)
	}
	h2.prompt("again")
	if txt := assistantText(h2.untilIdle()); txt != "You said: again" {
		t.Fatalf("reply after restart %q", txt)
	}
	if n := len(h2.quietSync().LiveWindow.Messages); n != len(before.Messages)+2 {
		t.Fatalf("window after restart and a turn: %d messages", n)
	}
}

// TestRestartKeepsSignaturesAndExitCodes: after a restart the model still
// gets the thinking signature and the "[exit code: N]" note of the turns
// before it.
func TestRestartKeepsSignaturesAndExitCodes(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := fakellm.StartMessages(w)
		s.MessageStart(50, 0, 0)
		if n != 1 {
			s.TextBlock(0, "ok")
			s.End("end_turn", 2)
			return
		}
		s.ThinkingBlock(0, "SIG-RESTART", "run it")
		s.ToolBlock(1, "toolu_9", "bash", `{"command":"exit 7"}`)
		s.End("tool_use", 10)
	})
	dir := sessionDir(t)
	h := startWithProvider(t, f, "anthropic", "claude-sonnet-4-5", func(o *Options) { o.SessionDir = dir })
	h.prompt("run the thing")
	evs := h.until(protocol.TypePermissionRequest)
	req := evs[len(evs)-1].msg.(*protocol.PermissionRequest)
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow"})
	h.untilIdle()
	stopped(t, h)

	h2 := startWithProvider(t, f, "anthropic", "claude-sonnet-4-5", func(o *Options) { o.SessionDir = dir })
	h2.prompt("and now?")
	h2.untilIdle()
	third := f.Request(t, 3)
	thinking := fakellm.Get(t, third.Body, "messages", 1, "content", 0)
	if fakellm.Get(t, thinking, "type") != "thinking" || fakellm.Get(t, thinking, "signature") != "SIG-RESTART" {
		t.Fatalf("thinking after restart sent as %v", thinking)
	}
	if raw := string(third.Raw); !strings.Contains(raw, "[exit code: 7]") {
		t.Fatalf("request after restart lacks the exit code: %s", raw)
	}
	if strings.Contains(string(bytes.Join(h2.all(), nil)), "SIG-RESTART") {
		t.Fatal("the signature reached the wire")
	}
}

func TestCorruptTranscriptIsSessionCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, sessionFileName)
	good := `{"type":"message","id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}`
	data := good + "\n{garbage\n" + strings.Replace(good, "m1", "m2", 1) + "\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := Run(context.Background(), Options{
		Stdio:    Stdio{Stdin: strings.NewReader(`{"type":"prompt","message":"x"}` + "\n"), Stdout: &out},
		Identity: Identity{SessionDir: dir},
	})
	if protocol.CodeOf(err) != protocol.CodeSessionCorrupt {
		t.Fatalf("Run = %v, want SESSION_CORRUPT", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("output %q", out.String())
	}
	if typ := protocol.PeekType([]byte(lines[0])); typ != protocol.TypeHello {
		t.Fatalf("first record %s", lines[0])
	}
	var ev protocol.ErrorEvent
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil || ev.Type != protocol.TypeError || ev.Code != protocol.CodeSessionCorrupt || !ev.Fatal {
		t.Fatalf("second record %s", lines[1])
	}
	if b, _ := os.ReadFile(path); string(b) != data {
		t.Fatalf("a corrupt transcript was modified: %q", b)
	}
}

func TestReplayRejectsInconsistentTranscripts(t *testing.T) {
	msg := func(id string) entry {
		return entry{Type: entryMessage, ID: id, messageFields: messageFields{Role: roleUser, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: id}}}}
	}
	cmpEntry := func(id, keep string) entry {
		return entry{Type: entryCompaction, ID: id, compactionFields: compactionFields{Index: 1, Summary: "s", FirstKeptEntryID: keep, MessageRange: &[2]string{"a", "a"}}}
	}
	fork := entry{Type: entryCheckpoint, ID: "fork-1", checkpointFields: checkpointFields{ArtifactKind: artifactFork}}
	tests := []struct {
		name    string
		entries []entry
		window  []string
	}{
		{"messages", []entry{msg("a"), msg("b")}, []string{"a", "b"}},
		{"compaction", []entry{msg("a"), msg("b"), cmpEntry("c1", "b"), msg("d")}, []string{"c1", "b", "d"}},
		{"fork", []entry{fork, msg("a")}, []string{"a"}},
		{"compaction keeping an unknown entry", []entry{msg("a"), cmpEntry("c1", "zz")}, nil},
		{"compaction keeping everything", []entry{msg("a"), cmpEntry("c1", "a")}, nil},
		{"compaction keeping its predecessor's summary", []entry{msg("a"), msg("b"), cmpEntry("c1", "b"), cmpEntry("c2", "c1")}, nil},
		{"checkpoint in the middle", []entry{msg("a"), fork}, nil},
	}
	for _, tt := range tests {
		st, err := replay(tt.entries)
		if (err != nil) != (tt.window == nil) {
			t.Errorf("%s: err %v", tt.name, err)
			continue
		}
		if err != nil {
			continue
		}
		var ids []string
		for _, m := range st.window {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, tt.window) {
			t.Errorf("%s: window %v, want %v", tt.name, ids, tt.window)
		}
	}
}

func TestTornLastLineIsDroppedAndRepaired(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, nil)
	turns(h, "one")
	want := h.quietSync().LiveWindow
	stopped(t, h)

	path := filepath.Join(dir, sessionFileName)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(slices.Clone(whole), `{"type":"message","id":"msg-torn","role":"us`...), 0o600); err != nil {
		t.Fatal(err)
	}
	h2, sync := inSession(t, dir, nil)
	if !equalJSON(t, sync.LiveWindow, want) {
		t.Fatalf("window %+v, want %+v", sync.LiveWindow, want)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, whole) {
		t.Fatalf("torn line not cut: %q", b)
	}
	turns(h2, "two")
	stopped(t, h2)
	if n := len(readEntriesAt(t, path)); n != 4 {
		t.Fatalf("%d entries after the repair and a turn", n)
	}
}

// TestLegacyTranscriptIsRead: plain message lines, as written before
// entries had types, are read as message entries and kept as they are.
func TestLegacyTranscriptIsRead(t *testing.T) {
	dir := sessionDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	legacy := `{"id":"msg-old-1","role":"user","content":[{"type":"text","text":"old question"}]}` + "\n" +
		`{"id":"msg-old-2","role":"assistant","content":[{"type":"text","text":"old answer"}]}` + "\n"
	path := filepath.Join(dir, sessionFileName)
	if err := os.WriteFile(path, []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	h, sync := inSession(t, dir, nil)
	if w := sync.LiveWindow.Messages; len(w) != 2 || w[0].ID != "msg-old-1" || textOf(w[1]) != "old answer" {
		t.Fatalf("legacy window %+v", w)
	}
	turns(h, "new")
	stopped(t, h)
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), legacy) {
		t.Fatalf("legacy lines rewritten: %q", b)
	}
	entries := readEntriesAt(t, path)
	if len(entries) != 4 || entries[2].Type != entryMessage || !strings.Contains(string(b[len(legacy):]), `"type":"message"`) {
		t.Fatalf("entries after a new turn: %+v", entries)
	}
}

// TestUnansweredCallGetsResultOnRestart: a runtime that stopped while a
// tool ran left a call without result; the restart answers it as
// interrupted, in the window and the transcript.
func TestUnansweredCallGetsResultOnRestart(t *testing.T) {
	dir := sessionDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rows := `{"type":"message","id":"m1","role":"user","content":[{"type":"text","text":"go"}]}` + "\n" +
		`{"type":"message","id":"m2","role":"assistant","content":[{"type":"tool_call","id":"tc-1","name":"bash","args":{"command":"sleep 100"}}]}` + "\n"
	path := filepath.Join(dir, sessionFileName)
	if err := os.WriteFile(path, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	h, sync := inSession(t, dir, nil)
	w := sync.LiveWindow.Messages
	if len(w) != 3 {
		t.Fatalf("window %+v", w)
	}
	if b := w[2].Content[0]; w[2].Role != roleUser || b.Type != protocol.BlockToolResult || b.ToolCallID != "tc-1" || !b.IsError ||
		!strings.Contains(b.Content.Message, "interrupted") {
		t.Fatalf("repair %+v", w[2])
	}
	stopped(t, h)
	if entries := readEntriesAt(t, path); len(entries) != 3 || entries[2].ID != w[2].ID {
		t.Fatalf("repair not persisted: %+v", entries)
	}
}

// TestTranscriptIsDurableBeforeTurnEnd reads the transcript the moment
// turn_end arrives: the prompt, the tool results and every assistant
// message of the turn are already in it.
func TestTranscriptIsDurableBeforeTurnEnd(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, nil)
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "a.txt"), []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: tool read {\"path\":\"a.txt\"}\nsim: say read it")
	evs := h.until(protocol.TypeTurnEnd)
	entries := readEntriesAt(t, filepath.Join(dir, sessionFileName)) // before anything else happens
	ids := map[string]bool{}
	for _, e := range entries {
		ids[e.ID] = true
	}
	mcs := of[*protocol.MessageComplete](evs)
	if len(mcs) != 2 {
		t.Fatalf("events %v", types(evs))
	}
	for _, mc := range mcs {
		if !ids[mc.MessageID] {
			t.Fatalf("assistant message %s not in the transcript at turn_end (%d entries)", mc.MessageID, len(entries))
		}
	}
	if len(entries) != 4 || entries[2].Content[0].Type != protocol.BlockToolResult || entries[2].Content[0].Content.Text != "A" {
		t.Fatalf("transcript at turn_end: %+v", entries)
	}
	if st, ok := h.next().msg.(*protocol.Status); !ok || st.Status != protocol.StatusIdle {
		t.Fatalf("after turn_end: %+v", st)
	}
}

// ---- session_op list ----

func TestSessionOpList(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, func(o *Options) { o.SessionID = "sess-listed" })
	turns(h, "one")
	r, before := h.sessionOp("list", nil)
	mustResponse(t, r, protocol.TypeSessionOp)
	if len(before) != 0 {
		t.Fatalf("events before the list response: %v", types(before))
	}
	d := decodeData[listSessionsData](t, r)
	w := h.quietSync().LiveWindow.Messages
	if len(d.Sessions) != 1 {
		t.Fatalf("sessions %+v", d.Sessions)
	}
	s := d.Sessions[0]
	if s.SessionID != "sess-listed" || s.Kind != "session" || !s.Current || s.Entries != 2 || s.HeadEntryID != w[1].ID ||
		s.LiveMessages == nil || *s.LiveMessages != 2 || s.CompactionIndex != nil {
		t.Fatalf("session %+v", s)
	}

	r, _ = h.sessionOp("fork", map[string]any{"from_entry_id": w[0].ID})
	mustResponse(t, r, protocol.TypeSessionOp)
	fd := decodeData[forkData](t, r)
	r, _ = h.sessionOp("list", nil)
	d = decodeData[listSessionsData](t, r)
	if len(d.Sessions) != 2 {
		t.Fatalf("sessions after a fork %+v", d.Sessions)
	}
	if f := d.Sessions[1]; f.Kind != "fork" || f.Current || f.ForkID != fd.ForkID || f.SessionID != fd.SessionID ||
		f.SourceSessionID != "sess-listed" || f.SourceEntryID != w[0].ID || f.Entries != 2 || f.HeadEntryID != fd.HeadEntryID || f.CreatedAt == 0 {
		t.Fatalf("fork %+v (fork data %+v)", f, fd)
	}

	// Without a session directory the session is listed from memory.
	h2 := start(t, nil)
	h2.handshake()
	r, _ = h2.sessionOp("list", nil)
	if d := decodeData[listSessionsData](t, r); len(d.Sessions) != 1 || d.Sessions[0].Entries != 0 || d.Sessions[0].SessionID != "sess-test" {
		t.Fatalf("sessions without a dir %+v", d.Sessions)
	}
}

// ---- session_op compact ----

// ---- session_op fork ----

// ---- automatic compaction ----

// ---- compaction by a real provider ----

// ---- grants and headless policies ----

func TestAllowAlwaysSurvivesRestart(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, nil)
	req, _ := startWrite(t, h, "a.txt", "same")
	h.send(protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse}, RequestID: req.RequestID, Decision: "allow_always"})
	h.untilIdle()
	stopped(t, h)
	path := filepath.Join(dir, grantsFileName)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("grants file %v %v", fi, err)
	}

	// A new runtime of the same Agent (any headless policy) runs the exact
	// request without asking, even with its keys in another order.
	h2, _ := inSession(t, dir, func(o *Options) { o.HeadlessPolicy = protocol.HeadlessAllowIfRuleMatches })
	h2.prompt(`sim: tool write {"content":"same","path":"a.txt"}`)
	evs := h2.untilIdle()
	if n := len(of[*protocol.PermissionRequest](evs)); n != 0 {
		t.Fatalf("remembered request asked again: %v", types(evs))
	}
	if tr := one[*protocol.ToolResult](t, evs); tr.IsError {
		t.Fatalf("tool_result %+v", tr)
	}
	if b, err := os.ReadFile(filepath.Join(h2.opts.Cwd, "a.txt")); err != nil || string(b) != "same" {
		t.Fatalf("write: %q %v", b, err)
	}
	// Another request still asks.
	startWrite(t, h2, "a.txt", "other")
	h2.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort}})
	h2.untilIdle()
	stopped(t, h2)

	// Unreadable grant lines grant nothing; a torn last line is cut.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("not json\n" + `{"tool":"write","args":{"path":"b.txt"`)
	f.Close()
	h3, _ := inSession(t, dir, nil)
	h3.prompt(`sim: tool write {"path":"a.txt","content":"same"}`)
	if evs := h3.untilIdle(); len(of[*protocol.PermissionRequest](evs)) != 0 {
		t.Fatalf("grant lost after a bad line: %v", types(evs))
	}
	if b, _ := os.ReadFile(path); !bytes.HasSuffix(b, []byte("not json\n")) {
		t.Fatalf("torn grant not cut: %q", b)
	}
}

func TestHeadlessPolicies(t *testing.T) {
	timedOut := func(policy string) string {
		t.Helper()
		h := start(t, func(o *Options) {
			o.HeadlessTimeout = 50 * time.Millisecond
			o.HeadlessPolicy = policy
		})
		h.handshake()
		startWrite(t, h, "t.txt", "v")
		evs := h.untilIdle()
		if res := one[*protocol.PermissionResolved](t, evs); res.Decision != "deny" || res.Source != "timeout" {
			t.Fatalf("%s: resolved %+v", policy, res)
		}
		tr := one[*protocol.ToolResult](t, evs)
		if !tr.IsError {
			t.Fatalf("%s: tool_result %+v", policy, tr)
		}
		if _, err := os.Stat(filepath.Join(h.opts.Cwd, "t.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the write happened", policy)
		}
		return tr.Content.Message
	}
	if msg := timedOut(protocol.HeadlessQueue); !strings.Contains(msg, "TIMEOUT") {
		t.Fatalf("queue: %q", msg)
	}
	for _, p := range []string{protocol.HeadlessDeny, protocol.HeadlessAllowIfRuleMatches} {
		if msg := timedOut(p); !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "headless policy "+p) {
			t.Fatalf("%s: %q", p, msg)
		}
	}

	// The daemon's headless answer is a denial the model is told about.
	h := start(t, nil)
	h.handshake()
	req, _ := startWrite(t, h, "h.txt", "v")
	h.send(`{"type":"permission_response","request_id":"` + req.RequestID + `","decision":"deny","source":"headless"}`)
	evs := h.untilIdle()
	if tr := one[*protocol.ToolResult](t, evs); !strings.Contains(tr.Content.Message, "headless policy") {
		t.Fatalf("tool_result %+v", tr)
	}

	err := Run(context.Background(), Options{Stdio: Stdio{Stdin: strings.NewReader(""), Stdout: io.Discard}, Headless: Headless{HeadlessPolicy: "allow"}})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Run with an unknown policy = %v", err)
	}
}
