package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
)

// FeedKind is what a feed item is about; the values are AgentCraft's.
type FeedKind string

// The FeedKind values.
const (
	FeedGoal     FeedKind = "goal"
	FeedPlan     FeedKind = "plan"
	FeedTask     FeedKind = "task"
	FeedMessage  FeedKind = "message"
	FeedDecision FeedKind = "decision"
	FeedMerge    FeedKind = "merge"
	FeedCI       FeedKind = "ci"
	FeedMemory   FeedKind = "memory"
	FeedSystem   FeedKind = "system"
	FeedError    FeedKind = "error"
	FeedUser     FeedKind = "user"
)

// Valid reports whether k is a FeedKind.
func (k FeedKind) Valid() bool {
	switch k {
	case FeedGoal, FeedPlan, FeedTask, FeedMessage, FeedDecision, FeedMerge, FeedCI, FeedMemory, FeedSystem, FeedError, FeedUser:
		return true
	}
	return false
}

// FeedItem is one line of a goal's activity feed; items are appended,
// never changed.
type FeedItem struct {
	FeedID  string   `json:"feed_id"`           // a "feed-" id (internal/ids); the store mints it, so it sorts by append time
	GoalID  string   `json:"goal_id,omitempty"` // the goal, which must exist; "" for a team-wide item
	Kind    FeedKind `json:"kind"`              // required
	Text    string   `json:"text"`
	AgentID string   `json:"agent_id,omitempty"` // who it is about or from
	TaskID  string   `json:"task_id,omitempty"`
	To      string   `json:"to,omitempty"` // a message's recipient
	At      int64    `json:"at"`           // epoch milliseconds; 0 is now
}

// AppendFeed appends an item to its goal's feed (GoalID "": the team-wide
// feed, for what belongs to no goal) and returns it as stored: the store
// mints FeedID (any given one is ErrInvalid), so ids sort by append order;
// At defaults to now. A missing goal is ErrNotFound.
func (s *Store) AppendFeed(f FeedItem) (FeedItem, error) {
	if f.FeedID != "" {
		return FeedItem{}, fmt.Errorf("%w: feed item has id %q; the store mints it", ErrInvalid, f.FeedID)
	}
	if f.GoalID != "" {
		if err := checkID(idgen.Goal, "goal", f.GoalID); err != nil {
			return FeedItem{}, fmt.Errorf("feed item: %w", err)
		}
	}
	if !f.Kind.Valid() {
		return FeedItem{}, fmt.Errorf("%w: feed item has kind %q", ErrInvalid, f.Kind)
	}
	if f.At == 0 {
		f.At = now()
	}
	err := s.update(func(tx *bolt.Tx) error {
		if f.GoalID != "" {
			if err := goalExists(tx, f.GoalID); err != nil {
				return err
			}
		}
		// Minted inside the transaction, which commits in queue order, so
		// the keys sort as the items were appended.
		f.FeedID = idgen.New(idgen.Feed)
		if err := tx.Bucket([]byte(bucketFeedAll)).Put([]byte(f.FeedID), []byte(f.GoalID)); err != nil {
			return err
		}
		return putJSON(tx, bucketFeed, string(scopedKey(f.GoalID, f.FeedID)), f)
	})
	if err != nil {
		return FeedItem{}, wrapOp(err, "append feed of goal %q", f.GoalID)
	}
	return f, nil
}

// Feed returns up to limit items of goal id's feed, newest first, older
// than the item before (a FeedID; "" starts at the newest). next is the
// cursor for the following page, "" when there is none. limit <= 0 is
// ErrInvalid.
func (s *Store) Feed(goalID, before string, limit int) (items []FeedItem, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: feed limit %d", ErrInvalid, limit)
	}
	items = []FeedItem{}
	err = s.db.View(func(tx *bolt.Tx) error {
		b := optionalBucket(tx, bucketFeed)
		if b == nil {
			return nil
		}
		prefix := scopedKey(goalID, "")
		c := b.Cursor()
		var k, v []byte
		if before == "" {
			// The first key past the goal's range, then one back.
			k, _ = c.Seek([]byte(goalID + "\x01"))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		} else {
			k, _ = c.Seek(scopedKey(goalID, before))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if len(items) == limit {
				next = items[len(items)-1].FeedID
				return nil
			}
			var f FeedItem
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("decode feed item %q: %w", k[len(prefix):], err)
			}
			items = append(items, f)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrapOp(err, "feed of goal %q", goalID)
	}
	return items, next, nil
}

// RecentFeed returns up to limit items of every goal's feed and the
// team-wide one, newest first, older than the item before ("" starts at
// the newest), through team_feed_all: what a client's snapshot shows.
// next and limit are as Feed's.
func (s *Store) RecentFeed(before string, limit int) (items []FeedItem, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: feed limit %d", ErrInvalid, limit)
	}
	items = []FeedItem{}
	err = s.db.View(func(tx *bolt.Tx) error {
		all := optionalBucket(tx, bucketFeedAll)
		if all == nil {
			return nil
		}
		c := all.Cursor()
		var k, v []byte
		if before == "" {
			k, v = c.Last()
		} else if k, _ = c.Seek([]byte(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			if len(items) == limit {
				next = items[len(items)-1].FeedID
				return nil
			}
			var f FeedItem
			if err := getTeam(tx, bucketFeed, string(scopedKey(string(v), string(k))), "feed item", &f); err != nil {
				return err
			}
			items = append(items, f)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrapOp(err, "recent feed")
	}
	return items, next, nil
}
