package registry

import (
	"slices"

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
//
// In a cluster the other nodes' agents (the directory, Deps.Directory)
// are merged in, in the same order and under the same filters and paging:
// a page is cut from the merged list, so a cursor names an agent of any
// node (docs/protocol.md §13 "Agents of other nodes").
func (r *Actor) list(cmd *Command, m *protocol.AgentList) {
	dir := r.deps.Directory
	if cmd.Local {
		dir = nil
	}
	if m.Active {
		infos := r.infos()
		if dir != nil {
			infos = append(infos, dir.Remote()...)
		}
		if len(infos) > len(r.agents) {
			slices.SortFunc(infos, compareAgents)
		}
		data, err := listAgents(infos, m)
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
		if dir != nil { // the directory's copy, read here, off the mailbox
			data.Agents, more = mergeRemote(data.Agents, more, dir.Remote(), m)
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

// compareAgents is agent.list's order: oldest first, then by agent_id.
func compareAgents(a, b protocol.AgentInfo) int {
	if a.CreatedAt != b.CreatedAt {
		if a.CreatedAt < b.CreatedAt {
			return -1
		}
		return 1
	}
	switch {
	case a.AgentID < b.AgentID:
		return -1
	case a.AgentID > b.AgentID:
		return 1
	}
	return 0
}

// mergeRemote merges the other nodes' agents (remote, sorted) that pass
// m's filters and follow its cursor into local, one page of this node's
// agents (more: this node has more after it). Both lists are in the same
// order, so the merged page's first limit agents are the page of the
// merged list, and more is true when either side has more after them.
func mergeRemote(local []protocol.AgentInfo, more bool, remote []protocol.AgentInfo, m *protocol.AgentList) ([]protocol.AgentInfo, bool) {
	var cur *protocol.Cursor
	if m.Cursor != "" {
		if c, err := protocol.DecodeCursor(protocol.CursorAgents, m.Cursor); err == nil {
			cur = &c
		}
	}
	merged := make([]protocol.AgentInfo, 0, len(local)+len(remote))
	merged = append(merged, local...)
	for _, in := range remote {
		switch {
		case m.ParentAgentID != "" && in.ParentAgentID != m.ParentAgentID,
			m.SinceMs != 0 && in.CreatedAt < m.SinceMs,
			cur != nil && !paging.Ascending(agentKey(in), *cur):
			continue
		}
		// Past this node's page: when this node has more, they belong
		// to a later page (its next agent may sort before them).
		if more && len(local) > 0 && compareAgents(in, local[len(local)-1]) > 0 {
			continue
		}
		merged = append(merged, in)
	}
	slices.SortFunc(merged, compareAgents)
	if m.Limit > 0 && len(merged) > m.Limit {
		return merged[:m.Limit], true
	}
	return merged, more
}
