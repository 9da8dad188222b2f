package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// The agent indexes (schema version 4). The registry keeps an actor only
// for the agents that are live; what it needs to know about the others —
// agent.list's pages, whether a session is already adopted, how many agents
// there are — is read here, each in a few keyed reads whatever the number
// of stored agents, instead of decoding every manifest.
//
// They are derived data, written in the same transaction as the manifest
// by putAgent and removeAgentIndexes: every write of the agents bucket
// goes through putAgent (putJSON sends it there), so no writer can forget
// them. A file of an older version is indexed by its migration; it is a
// version and not just new buckets because an older build would write
// agents without indexing them.
const (
	// bucketAgentsByCreated orders every agent as agent.list does.
	bucketAgentsByCreated = "agents_by_created" // key be64(created_at) agent_id: empty
	// bucketAgentChildren orders the children of each parent alike.
	bucketAgentChildren = "agent_children" // key parent_agent_id \x00 be64(created_at) agent_id: empty
	// bucketAgentSessions says which agents hold a session id. A multimap
	// (the agent id is in the key): two manifests of one session, which
	// older builds could leave, are both found and each removed alone.
	bucketAgentSessions = "agent_sessions" // key session_id \x00 agent_id: empty
	// bucketAgentForks lists the agents whose session directory is not
	// <session_id> (an adopted fork's, Agent.SessionDir), so that removing
	// an agent keeps the forks others adopted under its directory.
	bucketAgentForks = "agent_forks" // key session_dir \x00 agent_id: empty
	// agentCountKey in the meta bucket is the number of stored agents.
	agentCountKey = "agent_count"
)

// createdKey is the order key of an agent: its created_at big-endian with
// the sign bit flipped (so a negative one still sorts first), then its id.
func createdKey(createdAt int64, agentID string) []byte {
	k := make([]byte, 8, 8+len(agentID))
	binary.BigEndian.PutUint64(k, uint64(createdAt)^(1<<63))
	return append(k, agentID...)
}

// parseCreatedKey splits a createdKey.
func parseCreatedKey(k []byte) (createdAt int64, agentID string, ok bool) {
	if len(k) < 8 {
		return 0, "", false
	}
	return int64(binary.BigEndian.Uint64(k[:8]) ^ (1 << 63)), string(k[8:]), true
}

func childKey(parent string, createdAt int64, agentID string) []byte {
	return append([]byte(parent+"\x00"), createdKey(createdAt, agentID)...)
}

func sessionKey(sessionID, agentID string) []byte {
	return []byte(sessionID + "\x00" + agentID)
}

// indexHead is what the indexes key on, decoded from a stored manifest
// without the rest of it.
type indexHead struct {
	AgentID       string `json:"agent_id"`
	SessionID     string `json:"session_id"`
	ParentAgentID string `json:"parent_agent_id,omitempty"`
	CreatedAt     int64  `json:"created_at"`
	SessionDir    string `json:"session_dir,omitempty"`
}

func headOf(a *Agent) indexHead {
	return indexHead{AgentID: a.AgentID, SessionID: a.SessionID, ParentAgentID: a.ParentAgentID, CreatedAt: a.CreatedAt, SessionDir: a.SessionDir}
}

// putAgent stores a (new or replacing) manifest and keeps the indexes and
// the count: the only way the agents bucket is written. tx must be
// writable.
func putAgent(tx *bolt.Tx, a *Agent) error {
	b, err := bucket(tx, bucketAgents)
	if err != nil {
		return err
	}
	key := []byte(a.AgentID)
	if old := b.Get(key); old != nil {
		var h indexHead
		if err := json.Unmarshal(old, &h); err != nil {
			return fmt.Errorf("decode agents record %q: %w", a.AgentID, err)
		}
		if h == headOf(a) {
			return putRaw(b, a) // the indexed fields are unchanged
		}
		if err := removeAgentIndexes(tx, h); err != nil {
			return err
		}
	} else if err := addAgentCount(tx, 1); err != nil {
		return err
	}
	if err := putRaw(b, a); err != nil {
		return err
	}
	return addAgentIndexes(tx, headOf(a))
}

func putRaw(b *bolt.Bucket, a *Agent) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode agents record %q: %w", a.AgentID, err)
	}
	if err := b.Put([]byte(a.AgentID), raw); err != nil {
		return fmt.Errorf("put agents record %q: %w", a.AgentID, err)
	}
	return nil
}

// deleteAgent deletes a stored manifest, its index entries and its count.
func deleteAgent(tx *bolt.Tx, a *Agent) error {
	b, err := bucket(tx, bucketAgents)
	if err != nil {
		return err
	}
	if err := removeAgentIndexes(tx, headOf(a)); err != nil {
		return err
	}
	if err := addAgentCount(tx, -1); err != nil {
		return err
	}
	return b.Delete([]byte(a.AgentID))
}

func addAgentIndexes(tx *bolt.Tx, h indexHead) error {
	if err := tx.Bucket([]byte(bucketAgentsByCreated)).Put(createdKey(h.CreatedAt, h.AgentID), nil); err != nil {
		return err
	}
	if h.ParentAgentID != "" {
		if err := tx.Bucket([]byte(bucketAgentChildren)).Put(childKey(h.ParentAgentID, h.CreatedAt, h.AgentID), nil); err != nil {
			return err
		}
	}
	if h.SessionDir != "" {
		if err := tx.Bucket([]byte(bucketAgentForks)).Put(sessionKey(h.SessionDir, h.AgentID), nil); err != nil {
			return err
		}
	}
	if h.SessionID != "" {
		return tx.Bucket([]byte(bucketAgentSessions)).Put(sessionKey(h.SessionID, h.AgentID), nil)
	}
	return nil
}

func removeAgentIndexes(tx *bolt.Tx, h indexHead) error {
	if err := tx.Bucket([]byte(bucketAgentsByCreated)).Delete(createdKey(h.CreatedAt, h.AgentID)); err != nil {
		return err
	}
	if h.ParentAgentID != "" {
		if err := tx.Bucket([]byte(bucketAgentChildren)).Delete(childKey(h.ParentAgentID, h.CreatedAt, h.AgentID)); err != nil {
			return err
		}
	}
	if h.SessionDir != "" {
		if err := tx.Bucket([]byte(bucketAgentForks)).Delete(sessionKey(h.SessionDir, h.AgentID)); err != nil {
			return err
		}
	}
	if h.SessionID != "" {
		return tx.Bucket([]byte(bucketAgentSessions)).Delete(sessionKey(h.SessionID, h.AgentID))
	}
	return nil
}

func agentCount(tx *bolt.Tx) (int, error) {
	raw := tx.Bucket([]byte(bucketMeta)).Get([]byte(agentCountKey))
	if raw == nil {
		return 0, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: unreadable agent count %q", ErrSchema, raw)
	}
	return n, nil
}

func addAgentCount(tx *bolt.Tx, d int) error {
	n, err := agentCount(tx)
	if err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketMeta)).Put([]byte(agentCountKey), []byte(strconv.Itoa(max(n+d, 0))))
}

// indexAgents rebuilds the agent indexes and the count from the agents
// bucket (the migration to schema version 4).
func indexAgents(tx *bolt.Tx) error {
	for _, name := range []string{bucketAgentsByCreated, bucketAgentChildren, bucketAgentSessions, bucketAgentForks} {
		if err := tx.DeleteBucket([]byte(name)); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte(name)); err != nil {
			return err
		}
	}
	n := 0
	err := tx.Bucket([]byte(bucketAgents)).ForEach(func(k, v []byte) error {
		var h indexHead
		if err := json.Unmarshal(v, &h); err != nil {
			return fmt.Errorf("agent %q: %w", k, err)
		}
		n++
		return addAgentIndexes(tx, h)
	})
	if err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketMeta)).Put([]byte(agentCountKey), []byte(strconv.Itoa(n)))
}

// CountAgents returns how many agents are stored, from a counter kept with
// every write: daemon.status counts the stopped agents from it.
func (s *Store) CountAgents() (int, error) {
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = agentCount(tx)
		return err
	})
	return n, wrapOp(err, "count agents")
}

// SessionAdopted reports whether a stored agent holds session id, and
// which one (the first by agent id when older builds left several).
func (s *Store) SessionAdopted(sessionID string) (agentID string, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAgentSessions)
		if err != nil {
			return err
		}
		prefix := []byte(sessionID + "\x00")
		if k, _ := b.Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			agentID, ok = string(k[len(prefix):]), true
		}
		return nil
	})
	return agentID, ok, wrapOp(err, "session %q", sessionID)
}

// SessionDirsUnder returns the session directories (Agent.SessionDir,
// relative to the sessions directory) of the stored agents that live at
// rel or under it.
func (s *Store) SessionDirsUnder(rel string) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAgentForks)
		if err != nil {
			return err
		}
		cur := b.Cursor()
		for k, _ := cur.Seek([]byte(rel)); k != nil && bytes.HasPrefix(k, []byte(rel)); k, _ = cur.Next() {
			dir, _, _ := bytes.Cut(k, []byte{0})
			if string(dir) == rel || bytes.HasPrefix(dir, []byte(rel+"/")) {
				out = append(out, string(dir))
			}
		}
		return nil
	})
	return out, wrapOp(err, "session directories under %q", rel)
}

// AgentQuery selects a page of stored agents in agent.list's order
// (CreatedAt, then AgentID, ascending).
type AgentQuery struct {
	// ParentAgentID keeps only that agent's children ("" keeps all).
	ParentAgentID string
	// SinceMs keeps only agents created at or after it (0 keeps all).
	SinceMs int64
	// After, when set, starts the page after the agent (AfterAt,
	// AfterID) in that order: a cursor's position, which need not be a
	// stored agent any more.
	After   bool
	AfterAt int64
	AfterID string
	// Limit bounds the page; 0 is no bound.
	Limit int
}

// ListAgentsPage returns the stored agents q selects, in order, and
// whether more follow the page. It reads the index and decodes only the
// manifests it returns (plus one key to tell whether more follow), so a
// page costs the same with a hundred agents stored or a hundred thousand.
// A manifest of the page that vanished concurrently is left out.
func (s *Store) ListAgentsPage(q AgentQuery) (agents []Agent, more bool, err error) {
	agents = []Agent{}
	err = s.db.View(func(tx *bolt.Tx) error {
		ab, err := bucket(tx, bucketAgents)
		if err != nil {
			return err
		}
		name, prefix := bucketAgentsByCreated, []byte(nil)
		if q.ParentAgentID != "" {
			name, prefix = bucketAgentChildren, []byte(q.ParentAgentID+"\x00")
		}
		idx, err := bucket(tx, name) // missing in an older file opened read-only
		if err != nil {
			return err
		}
		start := append(bytes.Clone(prefix), createdKey(q.SinceMs, "")...)
		if q.SinceMs == 0 {
			start = bytes.Clone(prefix)
		}
		if q.After {
			if at := append(bytes.Clone(prefix), createdKey(q.AfterAt, q.AfterID)...); bytes.Compare(at, start) > 0 {
				start = at
			}
		}
		cur := idx.Cursor()
		for k, _ := cur.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
			at, id, ok := parseCreatedKey(k[len(prefix):])
			if !ok || at < q.SinceMs && q.SinceMs != 0 {
				continue
			}
			if q.After && (at < q.AfterAt || at == q.AfterAt && id <= q.AfterID) {
				continue
			}
			if q.Limit > 0 && len(agents) == q.Limit {
				more = true
				return nil
			}
			raw := ab.Get([]byte(id))
			if raw == nil {
				continue
			}
			var a Agent
			if err := json.Unmarshal(raw, &a); err != nil {
				return fmt.Errorf("decode agents record %q: %w", id, err)
			}
			agents = append(agents, a)
		}
		return nil
	})
	if err != nil {
		return nil, false, wrapOp(err, "list agents")
	}
	return agents, more, nil
}
