package registry

import (
	"fmt"
	"slices"
	"testing"

	"github.com/shard-dev/shard/internal/paging"
	"github.com/shard-dev/shard/protocol"
)

// TestMergeRemotePages: the other nodes' agents merged into this node's
// pages give, page after page, every agent of the cluster once, in
// agent.list's order, for every page size and with a filter — the local
// pages cut as the store cuts them (a page after the cursor and whether
// more follow).
func TestMergeRemotePages(t *testing.T) {
	var local, remote, all []protocol.AgentInfo
	for i := range 9 {
		in := protocol.AgentInfo{AgentID: fmt.Sprintf("agent-%02d", i), CreatedAt: int64(i / 2)} // pairs share a time
		if i%3 == 0 {
			in.ParentAgentID = "agent-p"
		}
		if i%2 == 0 {
			local = append(local, in)
		} else {
			in.Node = "n2"
			remote = append(remote, in)
		}
		all = append(all, in)
	}
	for _, parent := range []string{"", "agent-p"} {
		var want []string
		for _, in := range all {
			if parent == "" || in.ParentAgentID == parent {
				want = append(want, in.AgentID)
			}
		}
		for limit := 0; limit <= 10; limit++ {
			m := &protocol.AgentList{Limit: limit, ParentAgentID: parent}
			var got []string
			for range 20 {
				var cur *protocol.Cursor
				if m.Cursor != "" {
					c, err := protocol.DecodeCursor(protocol.CursorAgents, m.Cursor)
					if err != nil {
						t.Fatal(err)
					}
					cur = &c
				}
				mine := slices.DeleteFunc(slices.Clone(local), func(in protocol.AgentInfo) bool {
					return parent != "" && in.ParentAgentID != parent
				})
				page, next := paging.Page(mine, cur, limit, agentKey, paging.Ascending)
				merged, more := mergeRemote(page, next != "", remote, m)
				if limit > 0 && len(merged) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(merged))
				}
				for _, in := range merged {
					got = append(got, in.AgentID)
				}
				if !more || len(merged) == 0 {
					break
				}
				m.Cursor = agentKey(merged[len(merged)-1]).Encode()
			}
			if !slices.Equal(got, want) {
				t.Errorf("parent %q, limit %d: %q, want %q", parent, limit, got, want)
			}
		}
	}
}
