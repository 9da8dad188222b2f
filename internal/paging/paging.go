// Package paging cuts one page out of a sorted, filtered list for the
// paged list commands (agent.list, jobs.list; docs/protocol.md §13 "Paged
// lists"). It is kept apart from the actors that hold the lists so that it
// moves with the lists when they stop being held in memory.
package paging

import "github.com/shard-dev/shard/protocol"

// Page returns the page of items that follows cur (nil: the first page),
// at most limit long (0: no bound), and the cursor of the next page ("" on
// the last one). items must already be filtered and sorted in the list's
// order; key gives an item's sort key as a cursor, and after reports
// whether key a sorts after key b in that order. The page starts at the
// first item after the cursor's key, so an item added or removed between
// two pages shifts nothing.
func Page[T any](items []T, cur *protocol.Cursor, limit int, key func(T) protocol.Cursor, after func(a, b protocol.Cursor) bool) ([]T, string) {
	start := 0
	if cur != nil {
		for start < len(items) && !after(key(items[start]), *cur) {
			start++
		}
	}
	items = items[start:]
	if limit <= 0 || len(items) <= limit {
		return items, ""
	}
	return items[:limit], key(items[limit-1]).Encode()
}

// Ascending orders keys oldest first: by At, then by ID.
func Ascending(a, b protocol.Cursor) bool {
	if a.At != b.At {
		return a.At > b.At
	}
	return a.ID > b.ID
}

// DescendingID orders keys by ID, greatest first (newest first for ULID
// ids).
func DescendingID(a, b protocol.Cursor) bool { return a.ID < b.ID }
