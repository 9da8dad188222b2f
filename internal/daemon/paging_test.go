package daemon_test

import (
	"bytes"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// listAgents asks agent.list with m's filters and page.
func listAgents(t *testing.T, c *client.Conn, m protocol.AgentList) protocol.AgentListData {
	t.Helper()
	m.Header = hdr(protocol.TypeAgentList)
	var data protocol.AgentListData
	if err := c.Call(ctx(t), &m, &data); err != nil {
		t.Fatalf("agent.list %+v: %v", m, err)
	}
	return data
}

// agentPages follows next_cursor from the first page to the last and
// returns the agent ids in the order the pages held them.
func agentPages(t *testing.T, c *client.Conn, m protocol.AgentList) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("agent.list never reached its last page")
		}
		data := listAgents(t, c, m)
		if m.Limit > 0 && len(data.Agents) > m.Limit {
			t.Fatalf("page of %d agents, limit %d", len(data.Agents), m.Limit)
		}
		for _, a := range data.Agents {
			out = append(out, a.AgentID)
		}
		if data.NextCursor == "" {
			return out
		}
		m.Cursor = data.NextCursor
	}
}

func idsOf(infos []protocol.AgentInfo) []string {
	out := make([]string, 0, len(infos))
	for _, a := range infos {
		out = append(out, a.AgentID)
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

// TestAgentListPaged drives agent.list's paging and filters over the wire
// (docs/protocol.md §10.1, §13 "Paged lists"): pages visit every agent
// exactly once in the unpaged order, the unpaged answer has no
// next_cursor, filters keep what they say, and a bad cursor is refused.
func TestAgentListPaged(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	for i := 0; i < 7; i++ {
		h.create(c, nil)
	}
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "kid", Task: "sim: say hi"})
	waitRuns(t, c, parent, []string{job.JobID}, "", nil)

	// The unpaged form: every agent, oldest first, no next_cursor.
	resp, err := c.Request(ctx(t), &protocol.AgentList{Header: hdr(protocol.TypeAgentList)})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(resp.Data, []byte("next_cursor")) {
		t.Fatalf("unpaged agent.list carries next_cursor: %s", resp.Data)
	}
	all := listAgents(t, c, protocol.AgentList{})
	if len(all.Agents) != 9 {
		t.Fatalf("unpaged agent.list has %d agents, want 9", len(all.Agents))
	}
	for i := 1; i < len(all.Agents); i++ {
		a, b := all.Agents[i-1], all.Agents[i]
		if a.CreatedAt > b.CreatedAt || a.CreatedAt == b.CreatedAt && a.AgentID >= b.AgentID {
			t.Fatalf("unpaged agent.list out of order at %d: %+v", i, all.Agents)
		}
	}
	want := idsOf(all.Agents)
	for _, limit := range []int{1, 2, 4, 9, 10} {
		sameIDs(t, "paged agent.list", agentPages(t, c, protocol.AgentList{Limit: limit}), want)
	}
	if last := listAgents(t, c, protocol.AgentList{Limit: 9}); last.NextCursor != "" {
		t.Fatalf("a page holding the last agent has next_cursor %q", last.NextCursor)
	}

	// Filters.
	kid := job.Runs[0].AgentID
	sameIDs(t, "parent_agent_id", idsOf(listAgents(t, c, protocol.AgentList{ParentAgentID: parent}).Agents), []string{kid})
	since := all.Agents[5].CreatedAt
	var recent []string
	for _, a := range all.Agents {
		if a.CreatedAt >= since {
			recent = append(recent, a.AgentID)
		}
	}
	sameIDs(t, "since_ms paged", agentPages(t, c, protocol.AgentList{SinceMs: since, Limit: 2}), recent)

	live := all.Agents[2].AgentID
	attach(t, c, live, "")
	eventually(t, "the attached agent is active", func() bool {
		for _, a := range listAgents(t, c, protocol.AgentList{Active: true}).Agents {
			if a.AgentID == live {
				return true
			}
		}
		return false
	})
	for _, a := range listAgents(t, c, protocol.AgentList{Active: true}).Agents {
		if a.RuntimeState == protocol.RuntimeStopped && a.AttachedClients == 0 {
			t.Fatalf("active agent.list holds an idle stopped agent: %+v", a)
		}
	}

	// A malformed cursor, and one of jobs.list, are INVALID_REQUEST.
	jobsCursor := protocol.Cursor{Kind: protocol.CursorJobs, ID: job.JobID}.Encode()
	for _, bad := range []string{"%%%", "bm9wZQ", jobsCursor} {
		if _, err := c.Request(ctx(t), &protocol.AgentList{Header: hdr(protocol.TypeAgentList), Limit: 2, Cursor: bad}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Fatalf("agent.list cursor %q: %v, want INVALID_REQUEST", bad, err)
		}
	}
}

// jobPages follows jobs.list's next_cursor to the last page.
func jobPages(t *testing.T, c *client.Conn, m protocol.JobsList) []string {
	t.Helper()
	m.Header = hdr(protocol.TypeJobsList)
	var out []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("jobs.list never reached its last page")
		}
		var data protocol.JobsListData
		if err := c.Call(ctx(t), &m, &data); err != nil {
			t.Fatalf("jobs.list %+v: %v", m, err)
		}
		if m.Limit > 0 && len(data.Jobs) > m.Limit {
			t.Fatalf("page of %d jobs, limit %d", len(data.Jobs), m.Limit)
		}
		for _, j := range data.Jobs {
			out = append(out, j.JobID)
		}
		if data.NextCursor == "" {
			return out
		}
		m.Cursor = data.NextCursor
	}
}

// TestJobsListPaged drives jobs.list's cursor over the wire: pages visit
// every job exactly once, newest first, with and without a filter; the
// unpaged answer is unchanged; a bad cursor is refused.
func TestJobsListPaged(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	p1, p2 := h.create(c, nil), h.create(c, nil)
	var mine []string // p1's jobs, oldest first
	var every []string
	for i := 0; i < 5; i++ {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		j := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: p, Name: "k", Task: "sim: say hi"})
		waitRuns(t, c, p, []string{j.JobID}, "", nil)
		every = append(every, j.JobID)
		if p == p1 {
			mine = append(mine, j.JobID)
		}
	}
	reverse := func(s []string) []string {
		out := make([]string, len(s))
		for i := range s {
			out[len(s)-1-i] = s[i]
		}
		return out
	}

	resp, err := c.Request(ctx(t), &protocol.JobsList{Header: hdr(protocol.TypeJobsList)})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(resp.Data, []byte("next_cursor")) {
		t.Fatalf("unpaged jobs.list carries next_cursor: %s", resp.Data)
	}
	sameIDs(t, "unpaged jobs.list", jobPages(t, c, protocol.JobsList{}), reverse(every))
	for _, limit := range []int{1, 2, 5, 6} {
		sameIDs(t, "paged jobs.list", jobPages(t, c, protocol.JobsList{Limit: limit}), reverse(every))
	}
	sameIDs(t, "paged jobs.list of one parent", jobPages(t, c, protocol.JobsList{ParentAgentID: p1, Limit: 2}), reverse(mine))
	sameIDs(t, "paged completed jobs", jobPages(t, c, protocol.JobsList{State: protocol.JobCompleted, Limit: 3}), reverse(every))

	agentsCursor := protocol.Cursor{Kind: protocol.CursorAgents, At: 1, ID: p1}.Encode()
	for _, bad := range []string{"!!", "bm9wZQ", agentsCursor} {
		if _, err := c.Request(ctx(t), &protocol.JobsList{Header: hdr(protocol.TypeJobsList), Cursor: bad}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Fatalf("jobs.list cursor %q: %v, want INVALID_REQUEST", bad, err)
		}
	}
}
