package registry

import (
	"github.com/shard-dev/shard/internal/paging"
	"github.com/shard-dev/shard/protocol"
)

// listAgents answers agent.list from infos (oldest first): the filters,
// then one page (docs/protocol.md §10.1, §13 "Paged lists"). Without
// filters, limit and cursor it is every agent, as before paging existed.
func listAgents(infos []protocol.AgentInfo, m *protocol.AgentList) (protocol.AgentListData, error) {
	var cur *protocol.Cursor
	if m.Cursor != "" {
		c, err := protocol.DecodeCursor(protocol.CursorAgents, m.Cursor)
		if err != nil {
			return protocol.AgentListData{}, err
		}
		cur = &c
	}
	kept := infos[:0]
	for _, in := range infos {
		if m.Active && !active(in) {
			continue
		}
		if m.ParentAgentID != "" && in.ParentAgentID != m.ParentAgentID {
			continue
		}
		if m.SinceMs != 0 && in.CreatedAt < m.SinceMs {
			continue
		}
		kept = append(kept, in)
	}
	page, next := paging.Page(kept, cur, m.Limit, agentKey, paging.Ascending)
	return protocol.AgentListData{Agents: page, NextCursor: next}, nil
}

// agentKey is an agent's place in agent.list's order.
func agentKey(in protocol.AgentInfo) protocol.Cursor {
	return protocol.Cursor{Kind: protocol.CursorAgents, At: in.CreatedAt, ID: in.AgentID}
}

// active reports whether an agent is live now, as agent.list's active
// filter means it: a runtime that is not stopped or failed, or a client
// attached.
func active(in protocol.AgentInfo) bool {
	switch in.RuntimeState {
	case protocol.RuntimeStarting, protocol.RuntimeRunning, protocol.RuntimeStopping:
		return true
	}
	return in.AttachedClients > 0
}
