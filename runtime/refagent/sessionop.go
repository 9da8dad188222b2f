package refagent

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// session_op (wire spec §9.2): list, compact (compaction.go) and fork.

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
		r.respondLocked(h, listSessionsData{Sessions: r.listSessionsLocked()})
	case protocol.SessionOpCompact:
		r.compactLocked(h, c.Args)
	case protocol.SessionOpFork:
		r.forkLocked(h, c.Args.FromEntryID) // non-empty: checked by protocol.SessionOp.Validate
	}
}

// sessionIDLocked is this session's id: Options.SessionID, or else the name
// of the session directory.
func (r *runtime) sessionIDLocked() string {
	if r.opts.SessionID == "" && r.opts.SessionDir != "" {
		return filepath.Base(r.opts.SessionDir)
	}
	return r.opts.SessionID
}

// listSessionsLocked lists this session and its forks.
func (r *runtime) listSessionsLocked() []sessionInfo {
	n := len(r.window)
	// Entries counts lines written to the file; during a turn that may
	// include one whose fsync (and announcement) is still pending.
	entries, head := r.sess.stats()
	cur := sessionInfo{
		SessionID:    r.sessionIDLocked(),
		Kind:         kindSession,
		Current:      true,
		Entries:      entries,
		HeadEntryID:  head,
		LiveMessages: &n,
	}
	if r.compactionIndex > 0 {
		idx := r.compactionIndex
		cur.CompactionIndex = &idx
	}
	out := []sessionInfo{cur}
	if !r.sess.persisted() {
		return out
	}
	dirs, err := os.ReadDir(filepath.Join(r.opts.SessionDir, forksDirName))
	if err != nil {
		return out // no forks yet
	}
	var forks []sessionInfo
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		forks = append(forks, forkInfo(filepath.Join(r.opts.SessionDir, forksDirName, d.Name()), d.Name()))
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

// forkLocked handles session_op fork: the live window as it was at entry
// from (the window right after that entry was written; when from is an
// assistant message whose tool calls were answered, with the answering
// results) is copied with fresh ids into a new session,
// <session dir>/forks/<fork_id>/session.jsonl, under a checkpoint row that
// records its provenance. The source transcript is not touched. A
// compaction summary in that window is copied as a plain user message.
func (r *runtime) forkLocked(h protocol.Header, from string) {
	if err := r.betweenTurnsLocked(); err != nil {
		r.respondErrLocked(h, err)
		return
	}
	if !r.sess.persisted() {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "no entry %q: this runtime keeps no transcript (no session directory)", from))
		return
	}
	entries, err := r.sess.readEntries()
	if err != nil {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInternal, "read the session: %s", protocol.AsError(err).Message))
		return
	}
	pos := slices.IndexFunc(entries, func(e entry) bool { return e.ID == from })
	if pos < 0 {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "no entry %q in this session", from))
		return
	}
	st, err := replay(entries[:pos+1])
	if err != nil {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInternal, "replay the session: %w", err))
		return
	}
	if calls := unanswered(st.window); calls != nil && pos+1 < len(entries) && answers(entries[pos+1], calls) {
		st.window = append(st.window, entries[pos+1].message())
		st.meta.add(entries[pos+1])
	}

	now := time.Now()
	forkID, sessionID := ids.New(kindFork), ids.New(ids.Session)
	rows := []entry{{
		Type: entryCheckpoint, ID: forkID, TS: now.UnixMilli(),
		ArtifactKind: artifactFork, ForkID: forkID, SessionID: sessionID,
		SourceSessionID: r.sessionIDLocked(), SourceEntryID: from,
	}}
	for _, m := range st.window {
		e := st.meta.entryFor(m, now)
		e.ID = r.ids.next("msg")
		rows = append(rows, e)
	}
	dir := filepath.Join(r.opts.SessionDir, forksDirName, forkID)
	if err := writeNewTranscript(dir, rows); err != nil {
		r.log.Error("fork failed", "fork_id", forkID, "err", err)
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeInternal, "write the fork: %w", err))
		return
	}
	r.log.Info("session forked", "fork_id", forkID, "fork_session_id", sessionID, "entries", len(rows))
	r.respondLocked(h, forkData{ForkID: forkID, SessionID: sessionID, HeadEntryID: rows[len(rows)-1].ID})
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
