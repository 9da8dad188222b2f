package registry

import (
	"github.com/shard-dev/shard/internal/paging"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// list answers agent.list (and agent.status of every agent). The active
// filter lists live agents only, which are all in memory. Any other list
// reads a page of the store's index off the mailbox, the live agents'
// projections replacing their manifests' (a snapshot taken here): a page
// costs a few keyed reads whatever the number of stored agents. Without
// filters, limit and cursor it is every agent, as before paging existed:
// fine for a small store, and still off the mailbox for a large one.
func (r *Actor) list(cmd *Command, m *protocol.AgentList) {
	if m.Active {
		data, err := listAgents(r.infos(), m)
		if err != nil {
			fail(cmd, err)
			return
		}
		reply(cmd, data)
		return
	}
	q := store.AgentQuery{ParentAgentID: m.ParentAgentID, SinceMs: m.SinceMs, Limit: m.Limit}
	if m.Cursor != "" {
		cur, err := protocol.DecodeCursor(protocol.CursorAgents, m.Cursor)
		if err != nil {
			fail(cmd, err)
			return
		}
		q.After, q.AfterAt, q.AfterID = true, cur.At, cur.ID
	}
	live := make(map[string]protocol.AgentInfo, len(r.agents))
	for id, e := range r.agents {
		live[id] = e.info
	}
	st, models, node := r.deps.Store, r.deps.Agent.Models, r.deps.Agent.Node
	started := r.deps.Group.Go(func() {
		ms, more, err := st.ListAgentsPage(q)
		if err != nil {
			fail(cmd, protocol.Errorf(protocol.CodeInternal, "the agents could not be read"))
			return
		}
		data := protocol.AgentListData{Agents: make([]protocol.AgentInfo, 0, len(ms))}
		for _, a := range ms {
			in, ok := live[a.AgentID]
			if !ok {
				in = restingInfo(models, node, a)
			}
			data.Agents = append(data.Agents, in)
		}
		if more && len(data.Agents) > 0 {
			data.NextCursor = agentKey(data.Agents[len(data.Agents)-1]).Encode()
		}
		reply(cmd, data)
	})
	if !started {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
	}
}

// listAgents answers agent.list from infos (oldest first; the live
// agents, for the active filter): the filters,
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
