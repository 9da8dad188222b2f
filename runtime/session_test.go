package runtime

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
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startMessages(w, 50)
		if n != 1 {
			s.textBlock(0, "ok")
			s.end("end_turn", 2)
			return
		}
		s.blockStart(0, map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		s.delta(0, map[string]any{"type": "thinking_delta", "thinking": "run it"})
		s.delta(0, map[string]any{"type": "signature_delta", "signature": "SIG-RESTART"})
		s.blockStop(0)
		s.blockStart(1, map[string]any{"type": "tool_use", "id": "toolu_9", "name": "bash", "input": map[string]any{}})
		s.delta(1, map[string]any{"type": "input_json_delta", "partial_json": `{"command":"exit 7"}`})
		s.blockStop(1)
		s.end("tool_use", 10)
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
	third := f.request(t, 3)
	thinking := jget(t, third.Body, "messages", 1, "content", 0)
	if jget(t, thinking, "type") != "thinking" || jget(t, thinking, "signature") != "SIG-RESTART" {
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
	err := Run(context.Background(), Options{Stdin: strings.NewReader(`{"type":"prompt","message":"x"}` + "\n"), Stdout: &out, SessionDir: dir})
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
		return entry{Type: entryMessage, ID: id, Role: roleUser, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: id}}}
	}
	cmpEntry := func(id, keep string) entry {
		return entry{Type: entryCompaction, ID: id, Index: 1, Summary: "s", FirstKeptEntryID: keep, MessageRange: &[2]string{"a", "a"}}
	}
	fork := entry{Type: entryCheckpoint, ID: "fork-1", ArtifactKind: artifactFork}
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

func TestCompactEventsAndResponse(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, nil)
	turns(h, "first question about alpha", "second question about beta", "third question about gamma")
	w := h.quietSync().LiveWindow.Messages

	r, evs := h.sessionOp("compact", map[string]any{"keep_recent_tokens": 1})
	wantTypes(t, evs, "status", "compaction")
	evs = append(evs, h.next())
	wantTypes(t, evs, "status", "compaction", "status")
	if got := statuses(evs); !slices.Equal(got, []protocol.AgentStatus{protocol.StatusCompacting, protocol.StatusIdle}) {
		t.Fatalf("statuses %v", got)
	}
	mustResponse(t, r, protocol.TypeSessionOp)
	d := decodeData[compactedData](t, r)
	ev := one[*protocol.Compaction](t, evs)
	// The last message (the reply) is enough to keep one token: everything
	// before it is summarized.
	if !d.Compacted || d.Index != 1 || ev.Index != 1 || d.FirstKeptEntryID != w[5].ID || ev.FirstKeptEntryID != w[5].ID ||
		d.MessageRange != [2]string{w[0].ID, w[4].ID} || ev.MessageRange != d.MessageRange ||
		d.TokensBefore != ev.TokensBefore || d.TokensAfter != ev.TokensAfter || d.TokensBefore != tokens(windowBytes(w)) {
		t.Fatalf("response %+v, event %+v", d, ev)
	}
	if !strings.Contains(string(r.Data), `"compacted":true`) || !strings.Contains(string(r.Data), `"message_range":[`) {
		t.Fatalf("response data %s", r.Data)
	}

	after := h.quietSync().LiveWindow
	if after.CompactionIndex == nil || *after.CompactionIndex != 1 || len(after.Messages) != 2 || after.Messages[1].ID != w[5].ID {
		t.Fatalf("window after compaction %s", protocol.MustMarshal(after))
	}
	summary := textOf(after.Messages[0])
	for _, want := range []string{"[compaction 1]", "5 earlier messages", w[0].ID, w[4].ID, `"first question about alpha"`, `"second question about beta"`} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	if d.TokensAfter != tokens(windowBytes(after.Messages)) {
		t.Fatalf("tokens_after %d, window %d", d.TokensAfter, tokens(windowBytes(after.Messages)))
	}

	// The conversation goes on from the summary; the sim never reads it
	// as a script.
	h.prompt("fourth")
	if txt := assistantText(h.untilIdle()); txt != "You said: fourth" {
		t.Fatalf("reply after compaction %q", txt)
	}

	// A second compaction folds the first summary in; its range starts
	// after it.
	w2 := h.quietSync().LiveWindow.Messages
	r, _ = h.sessionOp("compact", map[string]any{"keep_recent_tokens": 1})
	h.next()
	d2 := decodeData[compactedData](t, r)
	if !d2.Compacted || d2.Index != 2 || d2.MessageRange != [2]string{w2[1].ID, w2[2].ID} || d2.FirstKeptEntryID != w2[3].ID {
		t.Fatalf("second compaction %+v of %v", d2, w2)
	}
	want := h.quietSync().LiveWindow
	if !strings.Contains(textOf(want.Messages[0]), "Includes the previous summary.") {
		t.Fatalf("second summary %q", textOf(want.Messages[0]))
	}
	stopped(t, h)

	// The transcript keeps everything; a restart resumes the live window
	// after the latest compaction.
	entries := readEntriesAt(t, filepath.Join(dir, sessionFileName))
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Type)
	}
	if !slices.Equal(kinds, []string{"message", "message", "message", "message", "message", "message", "compaction", "message", "message", "compaction"}) {
		t.Fatalf("entry types %v", kinds)
	}
	_, sync := inSession(t, dir, nil)
	if !equalJSON(t, sync.LiveWindow, want) {
		t.Fatalf("restored\n got %s\nwant %s", protocol.MustMarshal(sync.LiveWindow), protocol.MustMarshal(want))
	}
}

func TestCompactWithoutSafeCut(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	noCut := func() {
		t.Helper()
		r, evs := h.sessionOp("compact", nil)
		evs = append(evs, h.next())
		wantTypes(t, evs, "status", "status")
		if got := statuses(evs); !slices.Equal(got, []protocol.AgentStatus{protocol.StatusCompacting, protocol.StatusIdle}) {
			t.Fatalf("statuses %v", got)
		}
		mustResponse(t, r, protocol.TypeSessionOp)
		if string(r.Data) != `{"compacted":false,"reason":"no_safe_cut"}` {
			t.Fatalf("data %s", r.Data)
		}
	}
	noCut() // empty window
	turns(h, "small")
	noCut() // the whole window is within the default budget
	if d := h.quietSync(); len(d.LiveWindow.Messages) != 2 || d.LiveWindow.CompactionIndex != nil || d.Status != protocol.StatusIdle {
		t.Fatalf("after no-ops %+v", d)
	}
}

func TestCompactAndForkValidation(t *testing.T) {
	h := start(t, func(o *Options) { o.SessionDir = sessionDir(t) })
	h.handshake()
	turns(h, "one")
	for _, args := range []string{`{"keep_recent_tokens":0}`, `{"keep_recent_tokens":-5}`, `{"keep_recent_tokens":1.5}`, `{"keep_recent_tokens":"5"}`} {
		h.send(`{"type":"session_op","id":"c","op":"compact","args":` + args + `}`)
		r, before := h.response("c")
		mustErrorResponse(t, r, protocol.CodeInvalidRequest, "keep_recent_tokens")
		if len(before) != 0 {
			t.Fatalf("%s: events %v", args, types(before))
		}
	}
	for _, cmd := range []string{
		`{"type":"session_op","id":"f","op":"fork"}`,
		`{"type":"session_op","id":"f","op":"fork","args":{}}`,
		`{"type":"session_op","id":"f","op":"fork","args":{"from_entry_id":""}}`,
		`{"type":"session_op","id":"f","op":"fork","args":{"from_entry_id":5}}`,
	} {
		h.send(cmd)
		r, _ := h.response("f")
		if r.Success || r.Error.Code != protocol.CodeInvalidRequest {
			t.Fatalf("%s: %+v", cmd, r.Error)
		}
	}
	r, _ := h.sessionOp("fork", map[string]any{"from_entry_id": "msg-nope"})
	mustErrorResponse(t, r, protocol.CodeNotFound, "msg-nope")
	if _, err := os.Stat(filepath.Join(h.opts.SessionDir, forksDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed fork left %v", err)
	}
	h.quietSync()
}

func TestCompactAndForkConflictMidTurn(t *testing.T) {
	h := start(t, func(o *Options) { o.SessionDir = sessionDir(t) })
	h.handshake()
	turns(h, "one")
	first := h.quietSync().LiveWindow.Messages[0].ID
	startWrite(t, h, "x.txt", "v") // a turn waiting for permission
	r, before := h.sessionOp("compact", map[string]any{"keep_recent_tokens": 1})
	mustErrorResponse(t, r, protocol.CodeConflict, "turn")
	if len(before) != 0 {
		t.Fatalf("events %v", types(before))
	}
	r, _ = h.sessionOp("fork", map[string]any{"from_entry_id": first})
	mustErrorResponse(t, r, protocol.CodeConflict, "turn")
	h.send(protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, ID: "a"}})
	h.untilIdle()
	r, _ = h.sessionOp("fork", map[string]any{"from_entry_id": first})
	mustResponse(t, r, protocol.TypeSessionOp)
}

// ---- session_op fork ----

func TestForkLayoutAndSourceUnchanged(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, func(o *Options) { o.SessionID = "sess-src" })
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "a.txt"), []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	turns(h, "alpha", "sim: tool read {\"path\":\"a.txt\"}\nsim: say seen", "gamma")
	w := h.quietSync().LiveWindow.Messages // alpha, reply, prompt, call, results, seen, gamma, reply
	src := filepath.Join(dir, sessionFileName)
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}

	// Fork at the assistant message that called read: its results come
	// along, so the fork never holds an unanswered call.
	r, evs := h.sessionOp("fork", map[string]any{"from_entry_id": w[3].ID})
	mustResponse(t, r, protocol.TypeSessionOp)
	if len(evs) != 0 {
		t.Fatalf("fork emitted %v", types(evs))
	}
	d := decodeData[forkData](t, r)
	if !strings.HasPrefix(d.ForkID, "fork-") || !strings.HasPrefix(d.SessionID, "sess-") || d.HeadEntryID == "" {
		t.Fatalf("fork data %+v", d)
	}
	forkDir := filepath.Join(dir, forksDirName, d.ForkID)
	forkPath := filepath.Join(forkDir, sessionFileName)
	if fi, err := os.Stat(forkDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("fork dir %v %v", fi, err)
	}
	if fi, err := os.Stat(forkPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("fork file %v %v", fi, err)
	}
	if names, _ := os.ReadDir(forkDir); len(names) != 1 {
		t.Fatalf("fork dir holds %d files", len(names))
	}
	rows := readEntriesAt(t, forkPath)
	if len(rows) != 6 {
		t.Fatalf("fork rows %+v", rows)
	}
	m := rows[0]
	if m.Type != entryCheckpoint || m.ArtifactKind != "fork" || m.ForkID != d.ForkID || m.ID != d.ForkID || m.SessionID != d.SessionID ||
		m.SourceSessionID != "sess-src" || m.SourceEntryID != w[3].ID {
		t.Fatalf("marker %+v", m)
	}
	raw, _ := os.ReadFile(forkPath)
	for _, key := range []string{`"artifactKind":"fork"`, `"forkId":`, `"sourceSessionId":"sess-src"`, `"sourceEntryId":`} {
		if !bytes.Contains(raw, []byte(key)) {
			t.Fatalf("fork marker lacks %s: %s", key, raw)
		}
	}
	for i, e := range rows[1:] {
		if e.Type != entryMessage || e.ID == w[i].ID || e.Role != w[i].Role || !equalJSON(t, e.Content, w[i].Content) {
			t.Fatalf("copy %d %+v of %+v", i, e, w[i])
		}
	}
	if d.HeadEntryID != rows[5].ID {
		t.Fatalf("head %s, last row %s", d.HeadEntryID, rows[5].ID)
	}
	if b, _ := os.ReadFile(src); !bytes.Equal(b, orig) {
		t.Fatal("the fork changed the source transcript")
	}
	if h.quietSync().LiveWindow.Messages[len(w)-1].ID != w[len(w)-1].ID {
		t.Fatal("the fork moved the source's head")
	}
	stopped(t, h)

	// The fork is a session of its own: a runtime on it resumes its window.
	h2, sync := inSession(t, forkDir, nil)
	if got := sync.LiveWindow.Messages; len(got) != 5 || textOf(got[0]) != "alpha" || got[4].Content[0].Type != protocol.BlockToolResult {
		t.Fatalf("fork window %+v", got)
	}
	turns(h2, "on the fork")
	if b, _ := os.ReadFile(src); !bytes.Equal(b, orig) {
		t.Fatal("talking on the fork changed the source")
	}
}

func TestForkAfterCompactionCopiesTheSummary(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, nil)
	turns(h, "one", "two")
	r, _ := h.sessionOp("compact", map[string]any{"keep_recent_tokens": 1})
	h.next()
	mustResponse(t, r, protocol.TypeSessionOp)
	w := h.quietSync().LiveWindow.Messages // summary, last reply

	// An entry summarized away can still be forked from: the window as it
	// was then.
	entries := readEntriesAt(t, filepath.Join(dir, sessionFileName))
	r, _ = h.sessionOp("fork", map[string]any{"from_entry_id": entries[1].ID})
	mustResponse(t, r, protocol.TypeSessionOp)
	old := readEntriesAt(t, filepath.Join(dir, forksDirName, decodeData[forkData](t, r).ForkID, sessionFileName))
	if len(old) != 3 || textOf(old[1].message()) != "one" {
		t.Fatalf("fork of a summarized entry %+v", old)
	}

	// The compaction entry itself: its window is the summary and the kept
	// message; the summary becomes a plain message of the fork.
	r, _ = h.sessionOp("fork", map[string]any{"from_entry_id": w[0].ID})
	mustResponse(t, r, protocol.TypeSessionOp)
	rows := readEntriesAt(t, filepath.Join(dir, forksDirName, decodeData[forkData](t, r).ForkID, sessionFileName))
	if len(rows) != 3 || rows[1].Type != entryMessage || textOf(rows[1].message()) != textOf(w[0]) || isSummaryID(rows[1].ID) {
		t.Fatalf("fork rows %+v", rows)
	}
}

func TestForkWithoutSessionDir(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	turns(h, "one")
	id := h.quietSync().LiveWindow.Messages[0].ID
	r, _ := h.sessionOp("fork", map[string]any{"from_entry_id": id})
	mustErrorResponse(t, r, protocol.CodeNotFound, "no session directory")
}

// ---- automatic compaction ----

func TestAutoCompactionBetweenTurns(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, func(o *Options) { o.ContextWindow = 100 })
	var evs []event
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("no compaction after 10 turns")
		}
		h.prompt("a question that takes some room in the window")
		evs = h.untilIdle()
		if len(of[*protocol.Compaction](evs)) > 0 {
			break
		}
	}
	i := slices.IndexFunc(evs, func(e event) bool { return e.typ == protocol.TypeTurnEnd })
	wantTypes(t, evs[i:], "turn_end", "status", "compaction", "status")
	if got := statuses(evs[i:]); !slices.Equal(got, []protocol.AgentStatus{protocol.StatusCompacting, protocol.StatusIdle}) {
		t.Fatalf("statuses %v", got)
	}
	c := one[*protocol.Compaction](t, evs)
	if c.Index != 1 || c.TokensBefore*5 <= 100*4 || c.TokensAfter*5 > 100*4 || c.MessageRange[0] == "" || c.FirstKeptEntryID == "" {
		t.Fatalf("compaction %+v", c)
	}
	d := h.quietSync()
	if d.Status != protocol.StatusIdle || d.LiveWindow.CompactionIndex == nil || d.LiveWindow.Messages[1].ID != c.FirstKeptEntryID {
		t.Fatalf("after auto compaction %+v", d)
	}
}

// TestPromptWaitsForCompaction: while a between-turn compaction runs (here
// a slow provider summary), a prompt is accepted and runs after it, and
// compact and fork are refused.
func TestPromptWaitsForCompaction(t *testing.T) {
	release := make(chan struct{})
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 3 {
			hold(r, release)
			oaText(w, 20, 3, "short summary")
			return
		}
		oaText(w, 10, 2, "answer")
	})
	h := startWithProvider(t, f, "openai", "gpt-4.1", func(o *Options) { o.SessionDir = sessionDir(t) })
	turns(h, "one", "two")
	first := h.quietSync().LiveWindow.Messages[0].ID
	h.send(`{"type":"session_op","id":"c","op":"compact","args":{"keep_recent_tokens":1}}`)
	if st := h.next().msg.(*protocol.Status); st.Status != protocol.StatusCompacting {
		t.Fatalf("status %s", st.Status)
	}
	p := h.prompt("three")
	r, before := h.response(p)
	mustResponse(t, r, protocol.TypePrompt)
	if len(before) != 0 {
		t.Fatalf("the prompt did not wait: %v", types(before))
	}
	for _, op := range []string{"compact", "fork"} {
		r, _ := h.sessionOp(op, map[string]any{"from_entry_id": first})
		mustErrorResponse(t, r, protocol.CodeConflict, "")
	}
	if d := h.quietSync(); d.Status != protocol.StatusCompacting {
		t.Fatalf("status while compacting %s", d.Status)
	}
	close(release)
	r, evs := h.response("c")
	mustResponse(t, r, protocol.TypeSessionOp)
	wantTypes(t, evs, "compaction")
	evs = h.untilIdle()
	wantTypes(t, evs, "status", "status", "turn_start", "message_delta*", "message_complete", "usage", "turn_end", "status")
	if got := statuses(evs); !slices.Equal(got, []protocol.AgentStatus{protocol.StatusIdle, protocol.StatusStreaming, protocol.StatusIdle}) {
		t.Fatalf("statuses %v", got)
	}
	if txt := textOf(h.quietSync().LiveWindow.Messages[0]); !strings.HasSuffix(txt, "short summary") {
		t.Fatalf("summary %q", txt)
	}
}

func TestEmergencyCompactionMidTurn(t *testing.T) {
	h, _ := inSession(t, sessionDir(t), func(o *Options) { o.ContextWindow = 150 })
	if err := os.WriteFile(filepath.Join(h.opts.Cwd, "big.txt"), []byte(strings.Repeat("0123456789abcdef\n", 12)), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prompt("sim: tool read {\"path\":\"big.txt\"}\nsim: tool read {\"path\":\"big.txt\"}\nsim: tool read {\"path\":\"big.txt\"}\nsim: say all read")
	evs := h.untilIdle()
	if e := of[*protocol.ErrorEvent](evs); len(e) != 0 {
		t.Fatalf("errors %+v", e)
	}
	if got := assistantText(evs); !strings.HasSuffix(got, "all read") {
		t.Fatalf("the turn did not finish its script: %q", got)
	}
	end := slices.IndexFunc(evs, func(e event) bool { return e.typ == protocol.TypeTurnEnd })
	first := slices.IndexFunc(evs, func(e event) bool { return e.typ == protocol.TypeCompaction })
	if first < 0 || first > end {
		t.Fatalf("no compaction mid-turn: %v", types(evs))
	}
	// compacting between a tool result and the next provider call, then
	// streaming again.
	wantTypes(t, evs[first-2:first+3], "tool_result", "status", "compaction", "status", "message_delta*")
	if s1, s2 := evs[first-1].msg.(*protocol.Status), evs[first+1].msg.(*protocol.Status); s1.Status != protocol.StatusCompacting || s2.Status != protocol.StatusStreaming {
		t.Fatalf("statuses %s %s", s1.Status, s2.Status)
	}
	if c := evs[first].msg.(*protocol.Compaction); c.TokensBefore < 150 || c.TokensAfter >= 150 {
		t.Fatalf("compaction %+v", c)
	}
	if n := len(of[*protocol.ToolResult](evs)); n != 3 {
		t.Fatalf("%d tool results", n)
	}
}

// ---- compaction by a real provider ----

func TestCompactionSummaryByProvider(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 4:
			oaText(w, 30, 5, "The user asked ", "two things.")
		case 6:
			jsonError(w, http.StatusBadRequest, `{"error":{"message":"nope","type":"invalid_request_error"}}`)
		default:
			oaText(w, 10, 2, "answer")
		}
	})
	h := startWithProvider(t, f, "openai", "gpt-4.1", func(o *Options) { o.SessionDir = sessionDir(t) })
	turns(h, "one", "two", "three")
	r, evs := h.sessionOp("compact", map[string]any{"keep_recent_tokens": 1})
	h.next()
	mustResponse(t, r, protocol.TypeSessionOp)
	one[*protocol.Compaction](t, evs)
	summary := textOf(h.quietSync().LiveWindow.Messages[0])
	if !strings.HasPrefix(summary, "[compaction 1]") || !strings.HasSuffix(summary, "The user asked two things.") {
		t.Fatalf("summary %q", summary)
	}
	req := f.request(t, 4)
	msgs := jget(t, req.Body, "messages").([]any)
	if last := jget(t, msgs[len(msgs)-1], "content"); !strings.Contains(last.(string), "Summarize the conversation above") {
		t.Fatalf("summary request ends with %v", last)
	}

	// A failing provider: INTERNAL_ERROR, no event, window unchanged, idle.
	turns(h, "four")
	before := h.quietSync().LiveWindow
	r, evs = h.sessionOp("compact", map[string]any{"keep_recent_tokens": 1})
	evs = append(evs, h.next())
	wantTypes(t, evs, "status", "status")
	mustErrorResponse(t, r, protocol.CodeInternal, "compaction failed")
	if d := h.quietSync(); d.Status != protocol.StatusIdle || !equalJSON(t, d.LiveWindow, before) {
		t.Fatalf("after a failed compaction %+v", d)
	}
}

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

	err := Run(context.Background(), Options{Stdin: strings.NewReader(""), Stdout: io.Discard, HeadlessPolicy: "allow"})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Run with an unknown policy = %v", err)
	}
}
