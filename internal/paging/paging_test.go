package paging_test

import (
	"fmt"
	"testing"

	"github.com/shard-dev/shard/internal/paging"
	"github.com/shard-dev/shard/protocol"
)

type item struct {
	at int64
	id string
}

func key(i item) protocol.Cursor {
	return protocol.Cursor{Kind: protocol.CursorAgents, At: i.at, ID: i.id}
}

// TestPageVisitsEachOnce walks a list page by page through encoded cursors
// and sees each item exactly once, in order, for several page sizes.
func TestPageVisitsEachOnce(t *testing.T) {
	var items []item
	for i := 0; i < 23; i++ {
		items = append(items, item{at: int64(i / 3), id: fmt.Sprintf("a-%02d", i)})
	}
	for _, limit := range []int{1, 2, 5, 22, 23, 24} {
		var got []item
		var cur *protocol.Cursor
		for pages := 0; ; pages++ {
			if pages > len(items)+1 {
				t.Fatalf("limit %d: no last page", limit)
			}
			page, next := paging.Page(items, cur, limit, key, paging.Ascending)
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			got = append(got, page...)
			if next == "" {
				break
			}
			c, err := protocol.DecodeCursor(protocol.CursorAgents, next)
			if err != nil {
				t.Fatalf("limit %d: next cursor %q: %v", limit, next, err)
			}
			cur = &c
		}
		if fmt.Sprint(got) != fmt.Sprint(items) {
			t.Fatalf("limit %d: visited %v, want %v", limit, got, items)
		}
	}
}

// TestPageSurvivesRemoval: the item a cursor names is gone before the next
// page; the page starts at the item after it.
func TestPageSurvivesRemoval(t *testing.T) {
	items := []item{{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}}
	page, next := paging.Page(items, nil, 2, key, paging.Ascending)
	if len(page) != 2 || next == "" {
		t.Fatalf("first page %v next %q", page, next)
	}
	c, err := protocol.DecodeCursor(protocol.CursorAgents, next)
	if err != nil {
		t.Fatal(err)
	}
	rest := []item{{1, "a"}, {3, "c"}, {4, "d"}} // "b" removed
	page, next = paging.Page(rest, &c, 2, key, paging.Ascending)
	if fmt.Sprint(page) != fmt.Sprint([]item{{3, "c"}, {4, "d"}}) || next != "" {
		t.Fatalf("second page %v next %q", page, next)
	}
}

// TestDescendingID pages newest first by id.
func TestDescendingID(t *testing.T) {
	items := []item{{0, "j-3"}, {0, "j-2"}, {0, "j-1"}}
	page, next := paging.Page(items, nil, 1, key, paging.DescendingID)
	if fmt.Sprint(page) != fmt.Sprint(items[:1]) || next == "" {
		t.Fatalf("first page %v next %q", page, next)
	}
	c, err := protocol.DecodeCursor(protocol.CursorAgents, next)
	if err != nil {
		t.Fatal(err)
	}
	page, next = paging.Page(items, &c, 5, key, paging.DescendingID)
	if fmt.Sprint(page) != fmt.Sprint(items[1:]) || next != "" {
		t.Fatalf("page %v next %q", page, next)
	}
}
