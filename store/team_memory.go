package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
)

// MemoryScopeShared is the scope of the memory every agent of the team
// reads; any other scope is an agent id.
const MemoryScopeShared = "shared"

// MemoryEntry is one markdown note of the team's memory.
type MemoryEntry struct {
	MemoryID string `json:"memory_id"` // required; a "memory-" id (internal/ids); never changes
	Scope    string `json:"scope"`     // required; MemoryScopeShared or an agent id; never changes
	// Key is the entry's slug, unique within its scope (AgentCraft's id
	// is "<scope>/<key>").
	Key     string `json:"key"` // required
	Title   string `json:"title,omitempty"`
	Body    string `json:"body"`             // markdown
	Author  string `json:"author,omitempty"` // the agent id or "user" that last wrote it
	Updated int64  `json:"updated"`          // epoch milliseconds; 0 is now
}

func (m *MemoryEntry) validate() error {
	if err := checkID(idgen.Memory, "memory", m.MemoryID); err != nil {
		return err
	}
	switch {
	case m.Scope == "" || strings.ContainsRune(m.Scope, 0):
		return fmt.Errorf("%w: memory %q has scope %q", ErrInvalid, m.MemoryID, m.Scope)
	case m.Key == "" || strings.ContainsRune(m.Key, 0):
		return fmt.Errorf("%w: memory %q has key %q", ErrInvalid, m.MemoryID, m.Key)
	}
	return nil
}

// PutMemory writes a memory entry: a new one when no entry of its Scope
// has its Key (an empty MemoryID is minted), else it replaces that entry
// (MemoryID may be left empty, or must match). Updated defaults to now. It
// returns the stored entry.
func (s *Store) PutMemory(m MemoryEntry) (MemoryEntry, error) {
	if m.Updated == 0 {
		m.Updated = now()
	}
	var out MemoryEntry
	err := s.update(func(tx *bolt.Tx) error {
		out = m
		keys := tx.Bucket([]byte(bucketMemoryKeys))
		if prev := string(keys.Get(scopedKey(m.Scope, m.Key))); prev != "" {
			if out.MemoryID != "" && out.MemoryID != prev {
				return fmt.Errorf("%w: key %q of scope %q belongs to memory %q", ErrConflict, m.Key, m.Scope, prev)
			}
			out.MemoryID = prev
		} else if out.MemoryID == "" {
			out.MemoryID = idgen.New(idgen.Memory)
		}
		if err := out.validate(); err != nil {
			return err
		}
		return putMemory(tx, &out)
	})
	if err != nil {
		return MemoryEntry{}, wrapOp(err, "put memory %q", m.Key)
	}
	return out, nil
}

// putMemory writes m over whatever entry had its id, keeping the indexes.
func putMemory(tx *bolt.Tx, m *MemoryEntry) error {
	idsB := tx.Bucket([]byte(bucketMemoryIDs))
	if scope := idsB.Get([]byte(m.MemoryID)); scope != nil {
		var old MemoryEntry
		if _, err := getJSON(tx, bucketMemory, string(scopedKey(string(scope), m.MemoryID)), &old); err != nil {
			return err
		}
		if old.Scope != m.Scope {
			return fmt.Errorf("%w: memory %q may not change its scope", ErrInvalid, m.MemoryID)
		}
		if old.Key != m.Key {
			keys := tx.Bucket([]byte(bucketMemoryKeys))
			if prev := keys.Get(scopedKey(m.Scope, m.Key)); prev != nil && string(prev) != m.MemoryID {
				return fmt.Errorf("%w: key %q of scope %q belongs to memory %q", ErrConflict, m.Key, m.Scope, prev)
			}
			if err := keys.Delete(scopedKey(old.Scope, old.Key)); err != nil {
				return err
			}
		}
	}
	if err := idsB.Put([]byte(m.MemoryID), []byte(m.Scope)); err != nil {
		return err
	}
	if err := tx.Bucket([]byte(bucketMemoryKeys)).Put(scopedKey(m.Scope, m.Key), []byte(m.MemoryID)); err != nil {
		return err
	}
	return putJSON(tx, bucketMemory, string(scopedKey(m.Scope, m.MemoryID)), m)
}

// GetMemory returns memory entry id, or an error wrapping ErrNotFound.
func (s *Store) GetMemory(id string) (MemoryEntry, error) {
	var m MemoryEntry
	err := s.db.View(func(tx *bolt.Tx) error { return getMemory(tx, id, &m) })
	if err != nil {
		return MemoryEntry{}, wrapOp(err, "get memory %q", id)
	}
	return m, nil
}

func getMemory(tx *bolt.Tx, id string, m *MemoryEntry) error {
	var scope string
	if b := optionalBucket(tx, bucketMemoryIDs); b != nil {
		scope = string(b.Get([]byte(id)))
	}
	if scope == "" {
		return fmt.Errorf("%w: memory %q", ErrNotFound, id)
	}
	return getTeam(tx, bucketMemory, string(scopedKey(scope, id)), "memory", m)
}

// ListMemory returns the entries of scope (MemoryScopeShared or an agent
// id), oldest first.
func (s *Store) ListMemory(scope string) ([]MemoryEntry, error) {
	out := []MemoryEntry{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketMemory)
		if b == nil {
			return nil
		}
		prefix := scopedKey(scope, "")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var m MemoryEntry
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decode memory %q: %w", k[len(prefix):], err)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp(err, "list memory of %q", scope)
	}
	return out, nil
}

// AllMemory returns every memory entry, by scope, each scope's oldest
// first (team.memory.list without a scope).
func (s *Store) AllMemory() ([]MemoryEntry, error) {
	out := []MemoryEntry{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketMemory)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var m MemoryEntry
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decode memory %q: %w", k, err)
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return nil, wrapOp(err, "list memory")
	}
	return out, nil
}

// UpdateMemory reads entry id, lets fn modify it and writes the result in
// one transaction (fn's contract as UpdateGoal's). MemoryID and Scope may
// not change; a Key another entry of the scope holds is ErrConflict.
// Updated is set to now unless fn set it.
func (s *Store) UpdateMemory(id string, fn func(*MemoryEntry) error) (MemoryEntry, error) {
	var m MemoryEntry
	err := s.update(func(tx *bolt.Tx) error {
		m = MemoryEntry{}
		if err := getMemory(tx, id, &m); err != nil {
			return err
		}
		was := m.Updated
		if err := fn(&m); err != nil {
			return err
		}
		if m.MemoryID != id {
			return fmt.Errorf("%w: memory_id of %q may not change", ErrInvalid, id)
		}
		touch(&m.Updated, was)
		if err := m.validate(); err != nil {
			return err
		}
		return putMemory(tx, &m)
	})
	if err != nil {
		return MemoryEntry{}, wrapOp(err, "update memory %q", id)
	}
	return m, nil
}

// DeleteMemory removes entry id and its index entries. A missing id is
// ErrNotFound.
func (s *Store) DeleteMemory(id string) error {
	err := s.update(func(tx *bolt.Tx) error {
		var m MemoryEntry
		if err := getMemory(tx, id, &m); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketMemoryKeys)).Delete(scopedKey(m.Scope, m.Key)); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketMemoryIDs)).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketMemory)).Delete(scopedKey(m.Scope, id))
	})
	return wrapOp(err, "delete memory %q", id)
}
