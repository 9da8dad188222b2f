package refagent

// Compaction (on request, automatic, emergency, by provider) and fork.

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

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
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 3 {
			fakellm.Hold(r, release)
			fakellm.Reply(w, r, fakellm.Turn{Text: "short summary", Usage: fakellm.Usage{Input: 20, Output: 3}})
			return
		}
		fakellm.Reply(w, r, fakellm.Turn{Text: "answer", Usage: fakellm.Usage{Input: 10, Output: 2}})
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

func TestCompactionSummaryByProvider(t *testing.T) {
	f := fakellm.Start(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 4:
			fakellm.Reply(w, r, fakellm.Turn{Text: "The user asked two things.", Usage: fakellm.Usage{Input: 30, Output: 5}})
		case 6:
			fakellm.JSONError(w, http.StatusBadRequest, `{"error":{"message":"nope","type":"invalid_request_error"}}`)
		default:
			fakellm.Reply(w, r, fakellm.Turn{Text: "answer", Usage: fakellm.Usage{Input: 10, Output: 2}})
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
	req := f.Request(t, 4)
	msgs := fakellm.Get(t, req.Body, "messages").([]any)
	if last := fakellm.Get(t, msgs[len(msgs)-1], "content"); !strings.Contains(last.(string), "Summarize the conversation above") {
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
