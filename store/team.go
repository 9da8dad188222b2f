package store

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	idgen "github.com/shard-dev/shard/internal/ids"
)

// The records of a team: goals, their task boards, the decisions queue,
// memory and the activity feed. They are what the AgentCraft v1 dialect
// (docs/agentcraft.md) and Shard's team commands serve, so each carries
// what the dialect's entity of the same name needs (Goal, Task, Decision,
// MemoryEntry, FeedItem), with the same enum spellings; the store keeps
// its own types so that the stored format does not follow a wire dialect. Every write
// commits (group commit, commit.go) before it returns, so a caller
// acknowledges only what is durable. The JSON field names are the stored
// format: add fields with omitempty and never rename one.
//
// Every read is keyed, never a scan of history:
//
//	team_goals           goal_id → Goal
//	team_open_goals      goal_id → empty, while the goal is planning or active
//	team_goal_requests   request_id → goal_id (a retried team.goal.submit)
//	team_tasks           goal_id \x00 task_id → Task (a goal's board, in creation order)
//	team_task_goals      task_id → goal_id
//	team_decisions       decision_id → Decision
//	team_goal_decisions  goal_id \x00 decision_id → empty
//	team_open_decisions  decision_id → goal_id, while the decision is open
//	team_memory          scope \x00 memory_id → MemoryEntry
//	team_memory_ids      memory_id → scope
//	team_memory_keys     scope \x00 key → memory_id (a key is unique in its scope)
//	team_feed            goal_id \x00 feed_id → FeedItem (feed ids sort by time;
//	                     goal_id "" holds the team-wide items)
//	team_feed_all        feed_id → goal_id (every item, for the team's latest)
//
// No schema version bump: these buckets are new, so no older build ever
// wrote a team record it left unindexed (the reason versions 2 to 4 were
// bumps). initSchema creates them in an existing file, older builds ignore
// buckets they do not know, and reads treat a missing bucket (an older
// file opened read-only) as empty, as the workspaces buckets do.
const (
	bucketGoals         = "team_goals"
	bucketOpenGoals     = "team_open_goals"
	bucketGoalRequests  = "team_goal_requests"
	bucketTasks         = "team_tasks"
	bucketTaskGoals     = "team_task_goals"
	bucketDecisions     = "team_decisions"
	bucketGoalDecisions = "team_goal_decisions"
	bucketOpenDecisions = "team_open_decisions"
	bucketMemory        = "team_memory"
	bucketMemoryIDs     = "team_memory_ids"
	bucketMemoryKeys    = "team_memory_keys"
	bucketFeed          = "team_feed"
	bucketFeedAll       = "team_feed_all"
)

// now is the store's clock for the times a caller left at 0.
func now() int64 { return time.Now().UnixMilli() }

// touch sets an update time fn left as it was to now (never backwards).
func touch(at *int64, was int64) {
	if *at == was {
		*at = max(now(), was)
	}
}

// checkID refuses an id without its kind's prefix.
func checkID(kind, what, id string) error {
	if !idgen.HasPrefix(id, kind) || strings.ContainsRune(id, 0) {
		return fmt.Errorf("%w: %s id %q is not a %s- id", ErrInvalid, what, id, kind)
	}
	return nil
}

// scopedKey is a \x00-joined index key.
func scopedKey(a, b string) []byte { return []byte(scoped(a, b)) }

// prefixKeys returns the keys of b that start with prefix, copied out of
// bbolt's memory, in order.
func prefixKeys(b *bolt.Bucket, prefix []byte) [][]byte {
	var out [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, bytes.Clone(k))
	}
	return out
}

// goalExists refuses a record of a goal that is not stored.
func goalExists(tx *bolt.Tx, goalID string) error {
	ok, err := exists(tx, bucketGoals, goalID)
	if err == nil && !ok {
		err = fmt.Errorf("%w: goal %q", ErrNotFound, goalID)
	}
	return err
}

// getTeam reads one record of a team bucket, ErrNotFound when it (or its
// bucket, in an older file) is missing.
func getTeam(tx *bolt.Tx, name, key, what string, v any) error {
	found := false
	if optionalBucket(tx, name) != nil {
		var err error
		if found, err = getJSON(tx, name, key, v); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: %s %q", ErrNotFound, what, key)
	}
	return nil
}
