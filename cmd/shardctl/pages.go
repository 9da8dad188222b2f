package main

import (
	"context"
	"slices"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// listPageSize is how many agents or jobs shardctl asks the daemon for in
// one request: a list of any length arrives in bounded answers, following
// next_cursor (docs/protocol.md §13 "Paged lists").
const listPageSize = 200

// pageLimit is the limit of the next request: what is still wanted (want
// 0: everything), bounded by the page size.
func pageLimit(want, have, pageSize int) int {
	if pageSize <= 0 {
		pageSize = listPageSize
	}
	if want > 0 && want-have < pageSize {
		return want - have
	}
	return pageSize
}

// fetchJobs asks jobs.list page by page, newest first, until want jobs
// (0: all) are read or the daemon has no more. more reports jobs beyond
// the ones returned.
func fetchJobs(ctx context.Context, conn *client.Conn, q protocol.JobsList, want, pageSize int) (data protocol.JobsListData, more bool, err error) {
	data.Jobs = []protocol.OpJob{}
	q.Cursor = ""
	for {
		q.Limit = pageLimit(want, len(data.Jobs), pageSize)
		var page protocol.JobsListData
		if err := conn.Call(ctx, &q, &page); err != nil {
			return data, false, err
		}
		data.Jobs = append(data.Jobs, page.Jobs...)
		for _, n := range page.UnavailableNodes {
			if !slices.Contains(data.UnavailableNodes, n) {
				data.UnavailableNodes = append(data.UnavailableNodes, n)
			}
		}
		if page.NextCursor == "" || len(page.Jobs) == 0 {
			return data, false, nil
		}
		if want > 0 && len(data.Jobs) >= want {
			return data, true, nil
		}
		q.Cursor = page.NextCursor
	}
}

// fetchAgents asks agent.list page by page, oldest first, keeping the
// agents keep accepts, until want of them (0: all) are read or the daemon
// has no more. more reports agents beyond the ones returned.
func fetchAgents(ctx context.Context, conn *client.Conn, q protocol.AgentList, keep func(protocol.AgentInfo) bool, want, pageSize int) (data protocol.AgentListData, more bool, err error) {
	data.Agents = []protocol.AgentInfo{}
	q.Cursor = ""
	for {
		// keep may drop agents, so a page asks for a full page size.
		q.Limit = pageLimit(0, 0, pageSize)
		var page protocol.AgentListData
		if err := conn.Call(ctx, &q, &page); err != nil {
			return data, false, err
		}
		for _, a := range page.Agents {
			if !keep(a) {
				continue
			}
			if want > 0 && len(data.Agents) == want {
				return data, true, nil
			}
			data.Agents = append(data.Agents, a)
		}
		if page.NextCursor == "" || len(page.Agents) == 0 {
			return data, false, nil
		}
		q.Cursor = page.NextCursor
	}
}

// readAllAgents reads every agent into out, page by page (agent.list with
// a limit, following next_cursor), so that resolving a name or listing
// questions works however many agents the daemon has: one unpaged answer
// stops fitting in a record at some 90,000 agents (docs/protocol.md §2).
// A daemon without paging answers everything at once.
func readAllAgents(ctx context.Context, conn *client.Conn, out *protocol.AgentListData) error {
	data, _, err := fetchAgents(ctx, conn, protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}},
		func(protocol.AgentInfo) bool { return true }, 0, allAgentsPage)
	if err != nil {
		return err
	}
	*out = data
	return nil
}

// allAgentsPage is the page size of readAllAgents.
const allAgentsPage = 1000
