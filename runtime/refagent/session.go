package refagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// Session transcripts.
//
// A session is one append-only JSONL file, session.jsonl in
// Options.SessionDir ($SHARD_HOME/sessions/<session_id>/ under the daemon).
// Every line is an entry, a JSON object with a "type" and an "id" unique in
// the file:
//
//	{"type":"message","id":"msg-…","ts":1712000000000,"role":"user"|"assistant","content":[…],
//	 "exit_codes":{"<tool_call_id>":0},"signatures":[{"index":0,"value":"…","redacted":false}]}
//	{"type":"compaction","id":"cmp-…","ts":…,"index":1,"summary":"[compaction 1] …",
//	 "first_kept_entry_id":"msg-…","message_range":["msg-…","msg-…"],"tokens_before":…,"tokens_after":…}
//	{"type":"checkpoint","id":"fork-…","ts":…,"artifactKind":"fork","forkId":"fork-…",
//	 "sessionId":"sess-…","sourceSessionId":"sess-…","sourceEntryId":"msg-…"}
//
// A message entry is a live-window message (its fields are the wire
// Message's, so the line also decodes as one) and its entry id is the
// message id: any message a client sees can be named as an entry. It also
// keeps what the wire message does not carry but the model needs after a
// restart: the exit codes of its tool results (bash) and the provider
// signatures of its thinking blocks. A tool-call batch is one user message
// of tool_result blocks, written once all its calls ran.
//
// A compaction entry replaces the messages before first_kept_entry_id with
// its summary, a user message whose id is the compaction's id. A checkpoint
// entry with artifactKind "fork" is the first row of a fork (see
// session_op fork) and records where it came from.
//
// The live window is the replay of the entries: messages append, a
// compaction cuts. Lines without a "type" are messages as written before
// entries had types; they are read as message entries and never rewritten.
// A final line without its newline is a write cut short by a crash: it is
// kept if it decodes and dropped (cut from the file) if not. Anything else
// that does not decode, an unknown entry type, a duplicate id or a
// compaction that keeps an unknown entry makes the transcript
// SESSION_CORRUPT.
const (
	sessionFileName = "session.jsonl"
	forksDirName    = "forks"
)

// Entry types and the fork artifact kind.
const (
	entryMessage    = "message"
	entryCompaction = "compaction"
	entryCheckpoint = "checkpoint"
	artifactFork    = "fork"
)

// sigRecord is a thinking block's provider signature in a message entry.
type sigRecord struct {
	Index    int    `json:"index"`
	Value    string `json:"value"`
	Redacted bool   `json:"redacted,omitempty"`
}

// entry is one transcript line: a type, an id and a timestamp, and the
// fields of its type. The fields of the three types are embedded structs,
// so a line is one flat JSON object, in this field order.
type entry struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	TS   int64  `json:"ts,omitempty"` // epoch milliseconds
	messageFields
	compactionFields
	checkpointFields
}

// messageFields are the fields of a message entry.
type messageFields struct {
	Role       string                  `json:"role,omitempty"`
	Content    []protocol.ContentBlock `json:"content,omitempty"`
	ExitCodes  map[string]int          `json:"exit_codes,omitempty"`
	Signatures []sigRecord             `json:"signatures,omitempty"`
}

// compactionFields are the fields of a compaction entry.
type compactionFields struct {
	Index            int        `json:"index,omitempty"`
	Summary          string     `json:"summary,omitempty"`
	FirstKeptEntryID string     `json:"first_kept_entry_id,omitempty"`
	MessageRange     *[2]string `json:"message_range,omitempty"`
	TokensBefore     int64      `json:"tokens_before,omitempty"`
	TokensAfter      int64      `json:"tokens_after,omitempty"`
}

// checkpointFields are the fields of a checkpoint entry (a fork's first).
type checkpointFields struct {
	ArtifactKind    string `json:"artifactKind,omitempty"`
	ForkID          string `json:"forkId,omitempty"`
	SessionID       string `json:"sessionId,omitempty"`
	SourceSessionID string `json:"sourceSessionId,omitempty"`
	SourceEntryID   string `json:"sourceEntryId,omitempty"`
}

// message is the live-window message of a message entry.
func (e entry) message() protocol.Message {
	content := e.Content
	if content == nil {
		content = []protocol.ContentBlock{}
	}
	return protocol.Message{ID: e.ID, Role: e.Role, Content: content}
}

// summaryMessage is the live-window message standing for a compaction.
func summaryMessage(id, text string) protocol.Message {
	return protocol.Message{ID: id, Role: roleUser, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: text}}}
}

// windowMeta is what live-window messages carry besides their content: the
// provider signatures of thinking blocks and the exit codes of tool
// results. Its maps are owned by one conversation (under runtime.mu) or
// one replay.
type windowMeta struct {
	sigs      map[provider.BlockRef]provider.Signature
	exitCodes map[string]int // by tool_call_id
}

func newWindowMeta() windowMeta {
	return windowMeta{sigs: make(map[provider.BlockRef]provider.Signature), exitCodes: make(map[string]int)}
}

// add records the meta of a message entry.
func (wm windowMeta) add(e entry) {
	for _, s := range e.Signatures {
		wm.sigs[provider.BlockRef{MessageID: e.ID, Index: s.Index}] = provider.Signature{Value: s.Value, Redacted: s.Redacted}
	}
	for id, code := range e.ExitCodes {
		wm.exitCodes[id] = code
	}
}

// forget drops the meta of messages that left the window.
func (wm windowMeta) forget(msgs []protocol.Message) {
	for _, m := range msgs {
		for i, b := range m.Content {
			delete(wm.sigs, provider.BlockRef{MessageID: m.ID, Index: i})
			if b.Type == protocol.BlockToolResult {
				delete(wm.exitCodes, b.ToolCallID)
			}
		}
	}
}

// entryFor is the message entry of m with its meta.
func (wm windowMeta) entryFor(m protocol.Message, now time.Time) entry {
	e := entry{Type: entryMessage, ID: m.ID, TS: now.UnixMilli(), messageFields: messageFields{Role: m.Role, Content: m.Content}}
	for i, b := range m.Content {
		if sig, ok := wm.sigs[provider.BlockRef{MessageID: m.ID, Index: i}]; ok {
			e.Signatures = append(e.Signatures, sigRecord{Index: i, Value: sig.Value, Redacted: sig.Redacted})
		}
		if code, ok := wm.exitCodes[b.ToolCallID]; ok && b.Type == protocol.BlockToolResult {
			if e.ExitCodes == nil {
				e.ExitCodes = make(map[string]int)
			}
			e.ExitCodes[b.ToolCallID] = code
		}
	}
	return e
}

// sessionState is the replay of a transcript: the live window and what
// goes with it.
type sessionState struct {
	window          []protocol.Message
	meta            windowMeta
	compactionIndex int    // index of the latest compaction; 0: none
	summaryID       string // id of window[0] when it is a compaction summary
	// delivered holds the ids of messages that carried a dedupe key (see
	// dedupeID), also those compacted away since.
	delivered map[string]bool
}

// replay folds entries into the live window.
func replay(entries []entry) (*sessionState, error) {
	st := &sessionState{window: []protocol.Message{}, meta: newWindowMeta(), delivered: map[string]bool{}}
	for i, e := range entries {
		switch e.Type {
		case entryMessage:
			st.window = append(st.window, e.message())
			st.meta.add(e)
			if strings.HasPrefix(e.ID, dedupePrefix) {
				st.delivered[e.ID] = true
			}
		case entryCompaction:
			k := slices.IndexFunc(st.window, func(m protocol.Message) bool { return m.ID == e.FirstKeptEntryID })
			if k < 1 {
				return nil, fmt.Errorf("compaction %s keeps entry %q, which is not a message after the summarized ones", e.ID, e.FirstKeptEntryID)
			}
			st.meta.forget(st.window[:k])
			w := make([]protocol.Message, 0, 1+len(st.window)-k)
			w = append(w, summaryMessage(e.ID, e.Summary))
			st.window = append(w, st.window[k:]...)
			st.summaryID, st.compactionIndex = e.ID, e.Index
		case entryCheckpoint:
			if i != 0 {
				return nil, fmt.Errorf("checkpoint %s is not the first entry", e.ID)
			}
		}
	}
	return st, nil
}

// session appends entries to session.jsonl. A session without a file (no
// Options.SessionDir) only counts them.
//
// Writing and syncing are split so that the runtime's state mutex
// (runtime.mu) is never held across an fsync:
//
//   - write appends one line with write(2) under the session's own small
//     lock (wmu) and returns its sequence number. The runtime calls it with
//     runtime.mu held, so lines reach the file in the order the state
//     changed (entry order = live-window order), and a failed write is cut
//     from the file again before anyone else writes.
//   - durable waits, without runtime.mu, until every line up to a sequence
//     number is fsynced. Syncs are serialised by smu and grouped: one fsync
//     covers every line written before it started, so concurrent waiters
//     share it. A failed sync leaves synced where it was; the next waiter
//     syncs again.
//
// The caller announces an entry (message_complete, compaction, turn_end)
// only after durable returned for it, taking runtime.mu again to do so, so
// what the runtime announces still survives a crash. Meanwhile commands that
// only read state (get_sync, list_modes, …) are answered.
//
// Lock order: runtime.mu before wmu; smu before wmu; smu is never taken
// with runtime.mu held.
type session struct {
	dir string
	f   *os.File // nil: nothing is persisted
	// syncFile makes f's contents durable: (*os.File).Sync unless a test
	// injected another (Options.syncFile).
	syncFile func(*os.File) error

	// smu serialises fsyncs (durable).
	smu sync.Mutex

	// wmu protects the following.
	wmu     sync.Mutex
	size    int64  // bytes of whole lines in the file
	count   int    // entries
	head    string // id of the last entry
	written uint64 // sequence number of the last line written
	synced  uint64 // lines up to this sequence number are fsynced
}

// writeTicket names one written entry: durable(t) returns once it is on
// disk. The zero ticket is durable already (nothing was written).
type writeTicket struct{ seq uint64 }

// openSession opens (creating it if needed) the transcript in dir, repairs
// a torn last line and returns the session and its replay. A restored
// window that ends with tool calls without results (the runtime stopped
// while they ran) gets an error result for each, appended to the
// transcript, so the model is never sent an unanswered call. A transcript
// that cannot be restored is a SESSION_CORRUPT error. dir == "" returns an
// empty session that persists nothing.
func openSession(dir string, ids *idGen, now time.Time, syncFile func(*os.File) error) (*session, *sessionState, error) {
	if syncFile == nil {
		syncFile = (*os.File).Sync
	}
	if dir == "" {
		st, _ := replay(nil)
		return &session{syncFile: syncFile}, st, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("agent: create session dir: %w", err)
	}
	path := filepath.Join(dir, sessionFileName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		if statErr == nil {
			// The transcript exists but cannot be opened (a directory, no
			// access): the session cannot be restored, not a passing fault.
			return nil, nil, corrupt(fmt.Errorf("open %s: %w", sessionFileName, errors.Unwrap(err)))
		}
		return nil, nil, fmt.Errorf("agent: open session: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		syncDir(dir) // the new file's name is durable too
	}
	s := &session{dir: dir, f: f, syncFile: syncFile}
	st, err := s.restore()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("agent: restore session %s: %w", path, err)
	}
	if rest := unanswered(st.window); rest != nil {
		m := protocol.Message{ID: ids.next("msg"), Role: roleUser}
		for _, id := range rest {
			content := protocol.ToolResultContent{Kind: "error", Message: "interrupted: the agent runtime stopped before this tool call finished; it may or may not have run"}
			m.Content = append(m.Content, protocol.ContentBlock{Type: protocol.BlockToolResult, ToolCallID: id, Content: &content, IsError: true})
		}
		if err := s.append(st.meta.entryFor(m, now)); err != nil {
			_ = f.Close()
			return nil, nil, err
		}
		st.window = append(st.window, m)
	}
	return s, st, nil
}

// unanswered returns the ids of the tool calls of a final assistant
// message, which no result follows; nil when there are none.
func unanswered(w []protocol.Message) []string {
	if len(w) == 0 || w[len(w)-1].Role != roleAssistant {
		return nil
	}
	var ids []string
	for _, b := range w[len(w)-1].Content {
		if b.Type == protocol.BlockToolCall {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// restore reads the file from the start, repairs a torn last line in place
// and replays the entries.
func (s *session) restore() (*sessionState, error) {
	data, err := io.ReadAll(s.f)
	if err != nil {
		return nil, corrupt(fmt.Errorf("read: %w", err))
	}
	entries, keep, addNewline, err := parseTranscript(data)
	if err != nil {
		return nil, err
	}
	st, err := replay(entries)
	if err != nil {
		return nil, corrupt(err)
	}
	if keep < len(data) {
		if err := s.f.Truncate(int64(keep)); err != nil {
			return nil, fmt.Errorf("truncate torn line: %w", err)
		}
	}
	s.size = int64(keep)
	if addNewline {
		if _, err := s.f.Write([]byte{'\n'}); err != nil {
			return nil, fmt.Errorf("repair last line: %w", err)
		}
		s.size++
	}
	s.count = len(entries)
	if len(entries) > 0 {
		s.head = entries[len(entries)-1].ID
	}
	return st, nil
}

// corrupt wraps err as a SESSION_CORRUPT protocol error whose message says
// why (docs/protocol.md §8): the runtime writes it in its fatal error
// event, and the daemon answers the start with it. The causes name lines,
// entry ids, roles and decoder errors, never a message's text.
func corrupt(err error) error {
	return protocol.Errorf(protocol.CodeSessionCorrupt, "session transcript cannot be restored: %w", err)
}

// parseTranscript decodes a session.jsonl image. keep is the length of the
// prefix worth keeping; addNewline reports a decodable final line that lacks
// its '\n'.
func parseTranscript(data []byte) (entries []entry, keep int, addNewline bool, err error) {
	seen := make(map[string]bool)
	for lineNo, start := 1, 0; start < len(data); lineNo++ {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 { // final line without newline
			line := bytes.TrimSpace(data[start:])
			if len(line) == 0 {
				return entries, start, false, nil
			}
			e, derr := decodeEntry(line)
			if derr != nil {
				return entries, start, false, nil // torn write: drop it
			}
			if seen[e.ID] {
				return nil, 0, false, corrupt(fmt.Errorf("line %d: duplicate entry id %q", lineNo, e.ID))
			}
			return append(entries, e), len(data), true, nil
		}
		line := bytes.TrimSpace(data[start : start+end])
		start += end + 1
		if len(line) == 0 {
			continue
		}
		e, derr := decodeEntry(line)
		if derr == nil && seen[e.ID] {
			derr = fmt.Errorf("duplicate entry id %q", e.ID)
		}
		if derr != nil {
			return nil, 0, false, corrupt(fmt.Errorf("line %d: %w", lineNo, derr))
		}
		seen[e.ID] = true
		entries = append(entries, e)
	}
	return entries, len(data), false, nil
}

// decodeEntry decodes and checks one transcript line. A line without a
// type is a message (the format before entries had types).
func decodeEntry(line []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(line, &e); err != nil {
		return e, fmt.Errorf("decode entry: %w", err)
	}
	if e.ID == "" {
		return e, errors.New("entry without id")
	}
	switch e.Type {
	case "", entryMessage:
		e.Type = entryMessage
		if e.Role != roleUser && e.Role != roleAssistant {
			return e, fmt.Errorf("message %s has role %q", e.ID, e.Role)
		}
	case entryCompaction:
		if e.Index < 1 || e.Summary == "" || e.FirstKeptEntryID == "" || e.MessageRange == nil || e.MessageRange[0] == "" || e.MessageRange[1] == "" {
			return e, fmt.Errorf("compaction %s lacks its index, summary, first kept entry or message range", e.ID)
		}
	case entryCheckpoint:
		if e.ArtifactKind != artifactFork {
			return e, fmt.Errorf("checkpoint %s has unknown artifactKind %q", e.ID, e.ArtifactKind)
		}
	default:
		return e, fmt.Errorf("entry %s has unknown type %q", e.ID, e.Type)
	}
	return e, nil
}

// persisted reports whether entries reach a file.
func (s *session) persisted() bool { return s.f != nil }

// path is the transcript's path ("" when not persisted).
func (s *session) path() string {
	if s.f == nil {
		return ""
	}
	return filepath.Join(s.dir, sessionFileName)
}

// append writes one entry and waits until it is durable; for callers that
// hold no lock another goroutine needs (openSession).
func (s *session) append(e entry) error {
	t, err := s.write(e)
	if err != nil {
		return err
	}
	return s.durable(t)
}

// write appends one entry as a line (write(2), no fsync) and returns the
// ticket to wait on with durable. A failed write is cut from the file
// again, so the next write starts on a clean line. Callers hold runtime.mu,
// which orders the lines; wmu makes write safe against a concurrent
// durable.
func (s *session) write(e entry) (writeTicket, error) {
	var line []byte
	if s.f != nil {
		b, err := protocol.Marshal(e)
		if err != nil {
			return writeTicket{}, err
		}
		line = append(b, '\n')
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.f != nil {
		if _, err := s.f.Write(line); err != nil {
			_ = s.f.Truncate(s.size) // best effort; O_APPEND writes at the new end
			return writeTicket{}, fmt.Errorf("agent: append to session: %w", err)
		}
		s.size += int64(len(line))
	}
	s.count++
	s.head = e.ID
	s.written++
	if s.f == nil {
		s.synced = s.written // nothing to sync
	}
	return writeTicket{seq: s.written}, nil
}

// durable returns once the entry of t, and every one written before it, is
// fsynced. It must not be called with runtime.mu held: that is the point
// of the split (see session).
func (s *session) durable(t writeTicket) error {
	if s.isSynced(t) {
		return nil
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.isSynced(t) { // a sync that ran while we waited covered it
		return nil
	}
	s.wmu.Lock()
	upTo := s.written
	s.wmu.Unlock()
	if err := s.syncFile(s.f); err != nil {
		return fmt.Errorf("agent: sync session: %w", err)
	}
	s.wmu.Lock()
	s.synced = max(s.synced, upTo)
	s.wmu.Unlock()
	return nil
}

// isSynced reports whether t is durable.
func (s *session) isSynced(t writeTicket) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.synced >= t.seq
}

// stats returns the number of entries and the id of the last one.
func (s *session) stats() (count int, head string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.count, s.head
}

// readEntries reads the transcript again from disk (for fork and list).
func (s *session) readEntries() ([]entry, error) {
	return readTranscript(s.path())
}

// readTranscript reads and decodes the transcript at path.
func readTranscript(path string) ([]entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent: read session: %w", err)
	}
	entries, _, _, err := parseTranscript(data)
	return entries, err
}

// close closes the transcript.
func (s *session) close() error {
	if s == nil || s.f == nil {
		return nil
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("agent: close session: %w", err)
	}
	return nil
}

// writeNewTranscript writes rows as the transcript of a new session in dir,
// which must not exist: it is created (0700) with the file (0600) written,
// synced and renamed into place, so a reader sees the whole transcript or
// none. On failure dir is removed again.
func writeNewTranscript(dir string, rows []entry) (err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("agent: create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("agent: create %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	var buf bytes.Buffer
	for _, e := range rows {
		b, err := protocol.Marshal(e)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	tmp := filepath.Join(dir, sessionFileName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("agent: create transcript: %w", err)
	}
	_, werr := f.Write(buf.Bytes())
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("agent: write transcript: %w", werr)
	}
	if err := os.Rename(tmp, filepath.Join(dir, sessionFileName)); err != nil {
		return fmt.Errorf("agent: install transcript: %w", err)
	}
	syncDir(dir)
	syncDir(filepath.Dir(dir))
	return nil
}

// syncDir makes the names in dir durable; errors are ignored (some file
// systems do not support syncing a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// dedupePrefix marks the ids of user messages that carried a dedupe key.
const dedupePrefix = "msg-dk-"

// dedupeID is the message id a prompt with dedupe key k gets: the key is
// durable exactly when the message is (same transcript entry), so a prompt
// repeated after a crash is recognised iff it was delivered.
func dedupeID(k string) string {
	var b strings.Builder
	b.WriteString(dedupePrefix)
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == ':':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
