package refagent

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
)

// session_op (docs/protocol.md §9.2): list, compact (compaction.go) and
// fork. The runtime answers them (it refuses compact and fork while turn
// work is queued or in flight); the conversation lists its session and
// forks it.

// Kinds of sessions in a session_op list answer.
const (
	kindSession = "session"
	kindFork    = "fork"
)

// sessionInfo describes one session in the data of session_op list:
//
//	{ sessions: [ { session_id, kind: "session"|"fork", current, entries,
//	                head_entry_id?, live_messages?, compaction_index?,
//	                fork_id?, source_session_id?, source_entry_id?,
//	                created_at?, corrupt? } ] }
//
// The first is this runtime's session (current: true, with the size of its
// live window and its latest compaction index); then come the forks made
// from it, oldest first, each with where it was forked from. entries counts
// transcript rows; created_at is epoch milliseconds; corrupt marks a fork
// whose transcript cannot be read.
type sessionInfo struct {
	SessionID       string `json:"session_id"`
	Kind            string `json:"kind"`
	Current         bool   `json:"current"`
	Entries         int    `json:"entries"`
	HeadEntryID     string `json:"head_entry_id,omitempty"`
	LiveMessages    *int   `json:"live_messages,omitempty"`
	CompactionIndex *int   `json:"compaction_index,omitempty"`
	ForkID          string `json:"fork_id,omitempty"`
	SourceSessionID string `json:"source_session_id,omitempty"`
	SourceEntryID   string `json:"source_entry_id,omitempty"`
	CreatedAt       int64  `json:"created_at,omitempty"`
	Corrupt         bool   `json:"corrupt,omitempty"`
}

type (
	listSessionsData struct {
		Sessions []sessionInfo `json:"sessions"`
	}
	forkData struct {
		ForkID      string `json:"fork_id"`
		SessionID   string `json:"session_id"`
		HeadEntryID string `json:"head_entry_id"`
	}
)

// sessionOpLocked dispatches a validated session_op.
func (r *runtime) sessionOpLocked(h protocol.Header, c *protocol.SessionOp) {
	switch c.Op {
	case protocol.SessionOpList:
		r.out.respond(h, listSessionsData{Sessions: r.conv.listSessionsLocked()})
	case protocol.SessionOpCompact:
		r.compactLocked(h, c.Args)
	case protocol.SessionOpFork:
		if err := r.loop.betweenTurnsLocked(); err != nil {
			r.out.respondErr(h, err)
			return
		}
		d, err := r.conv.forkLocked(c.Args.FromEntryID) // non-empty: checked by protocol.SessionOp.Validate
		if err != nil {
			r.out.respondErr(h, err)
			return
		}
		r.out.respond(h, d)
	}
}

// listSessionsLocked lists this session and its forks.
func (c *conversation) listSessionsLocked() []sessionInfo {
	n := len(c.window)
	// Entries counts lines written to the file; during a turn that may
	// include one whose fsync (and announcement) is still pending.
	entries, head := c.store.stats()
	cur := sessionInfo{
		SessionID:    c.sessionID,
		Kind:         kindSession,
		Current:      true,
		Entries:      entries,
		HeadEntryID:  head,
		LiveMessages: &n,
	}
	if c.compactionIndex > 0 {
		idx := c.compactionIndex
		cur.CompactionIndex = &idx
	}
	out := []sessionInfo{cur}
	if !c.store.persisted() {
		return out
	}
	dirs, err := os.ReadDir(filepath.Join(c.store.dir, forksDirName))
	if err != nil {
		return out // no forks yet
	}
	var forks []sessionInfo
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		forks = append(forks, forkInfo(filepath.Join(c.store.dir, forksDirName, d.Name()), d.Name()))
	}
	slices.SortStableFunc(forks, func(a, b sessionInfo) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ForkID, b.ForkID))
	})
	return append(out, forks...)
}

// forkInfo describes the fork in dir (named forkID).
func forkInfo(dir, forkID string) sessionInfo {
	info := sessionInfo{Kind: kindFork, ForkID: forkID}
	entries, err := readTranscript(filepath.Join(dir, sessionFileName))
	if err != nil || len(entries) == 0 || entries[0].Type != entryCheckpoint {
		info.Corrupt = true
		return info
	}
	m := entries[0]
	info.SessionID, info.SourceSessionID, info.SourceEntryID = m.SessionID, m.SourceSessionID, m.SourceEntryID
	info.CreatedAt = m.TS
	info.Entries = len(entries)
	info.HeadEntryID = entries[len(entries)-1].ID
	return info
}

// forkLocked makes the fork of session_op fork: the live window as it was at entry
// from (the window right after that entry was written; when from is an
// assistant message whose tool calls were answered, with the answering
// results) is copied with fresh ids into a new session,
// <session dir>/forks/<fork_id>/session.jsonl, under a checkpoint row that
// records its provenance. The source transcript is not touched. A
// compaction summary in that window is copied as a plain user message.
// The runtime calls it only between turns, so the transcript does not
// grow while it is read.
func (c *conversation) forkLocked(from string) (forkData, error) {
	if !c.store.persisted() {
		return forkData{}, protocol.Errorf(protocol.CodeNotFound, "no entry %q: this runtime keeps no transcript (no session directory)", from)
	}
	entries, err := c.store.readEntries()
	if err != nil {
		return forkData{}, protocol.Errorf(protocol.CodeInternal, "read the session: %s", protocol.AsError(err).Message)
	}
	pos := slices.IndexFunc(entries, func(e entry) bool { return e.ID == from })
	if pos < 0 {
		return forkData{}, protocol.Errorf(protocol.CodeNotFound, "no entry %q in this session", from)
	}
	st, err := replay(entries[:pos+1])
	if err != nil {
		return forkData{}, protocol.Errorf(protocol.CodeInternal, "replay the session: %w", err)
	}
	if calls := unanswered(st.window); calls != nil && pos+1 < len(entries) && answers(entries[pos+1], calls) {
		st.window = append(st.window, entries[pos+1].message())
		st.meta.add(entries[pos+1])
	}

	now := time.Now()
	forkID, sessionID := ids.New(kindFork), ids.New(ids.Session)
	rows := []entry{{Type: entryCheckpoint, ID: forkID, TS: now.UnixMilli(), checkpointFields: checkpointFields{
		ArtifactKind: artifactFork, ForkID: forkID, SessionID: sessionID,
		SourceSessionID: c.sessionID, SourceEntryID: from,
	}}}
	for _, m := range st.window {
		e := st.meta.entryFor(m, now)
		e.ID = c.ids.next("msg")
		rows = append(rows, e)
	}
	dir := filepath.Join(c.store.dir, forksDirName, forkID)
	if err := writeNewTranscript(dir, rows); err != nil {
		c.log.Error("fork failed", "fork_id", forkID, "err", err)
		return forkData{}, protocol.Errorf(protocol.CodeInternal, "write the fork: %w", err)
	}
	// The fork is a session of its own: the images its messages name are
	// linked into its images/ (docs/protocol.md §13 P4).
	var blocks []protocol.ContentBlock
	for _, m := range st.window {
		blocks = append(blocks, m.Content...)
	}
	if err := images.Open(c.store.dir).CopyTo(dir, blocks); err != nil {
		_ = os.RemoveAll(dir)
		c.log.Error("fork failed", "fork_id", forkID, "err", err)
		return forkData{}, protocol.Errorf(protocol.CodeInternal, "copy the fork's images: %w", err)
	}
	c.log.Info("session forked", "fork_id", forkID, "fork_session_id", sessionID, "entries", len(rows))
	return forkData{ForkID: forkID, SessionID: sessionID, HeadEntryID: rows[len(rows)-1].ID}, nil
}

// answers reports whether e is the tool-result message answering calls.
func answers(e entry, calls []string) bool {
	if e.Type != entryMessage || e.Role != roleUser {
		return false
	}
	for _, b := range e.Content {
		if b.Type == protocol.BlockToolResult && slices.Contains(calls, b.ToolCallID) {
			return true
		}
	}
	return false
}
