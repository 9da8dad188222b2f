package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestGatherAcrossNodes drives gathers through a real gateway (node na)
// forwarding to another real gateway (nb) over its upstream: jobs.list is
// asked of na's registry under the client's id and of nb's under the
// gather's, and answered once, merged, each job with its node, nd (dead)
// and nx (cannot be dialed) named unavailable; a node silent past the
// bound is named too, and the client is answered; a workspace.status
// na does not hold is nb's answer under the client's id; subagent.status
// of nb's parent goes to nb; workspace.list with cwd is na's alone.
func TestGatherAcrossNodes(t *testing.T) {
	b := startGateway(t, Config{})
	fc := &fakeCluster{ln: newPipeListener()}
	b.g.ServeTunnel(fc.ln)
	a := startGateway(t, Config{Cluster: fc, hooks: &testHooks{gatherTimeout: 300 * time.Millisecond}})
	c := a.dialRaw(t)
	c.mustRead(t) // hello

	c.send(t, `{"type":"jobs.list","id":"l1","limit":2}`)
	mine, theirs := a.next(t), b.next(t)
	if mine.Header.ID != "l1" || !strings.HasPrefix(theirs.Header.ID, gatherIDPrefix) || theirs.Header.Type != protocol.TypeJobsList {
		t.Fatalf("na's registry got %+v, nb's %+v", mine.Header, theirs.Header)
	}
	if q, _ := theirs.Cmd.(*protocol.JobsList); q == nil || q.Limit != 2 {
		t.Fatalf("nb was asked %+v", theirs.Cmd)
	}
	jobs := func(next string, ids ...string) protocol.JobsListData {
		d := protocol.JobsListData{Jobs: []protocol.OpJob{}, NextCursor: next}
		for _, id := range ids {
			d.Jobs = append(d.Jobs, protocol.OpJob{JobID: id})
		}
		return d
	}
	theirs.Client.Send(protocol.NewResponse(theirs.Header.ID, protocol.TypeJobsList,
		jobs(protocol.Cursor{Kind: protocol.CursorJobs, ID: "job-2"}.Encode(), "job-4", "job-2")))
	mine.Client.Send(protocol.NewResponse("l1", protocol.TypeJobsList, jobs("", "job-3", "job-1")))
	w := c.next(t)
	var d protocol.JobsListData
	if w.Type != "response" || w.ID != "l1" || !w.Success || json.Unmarshal(w.Data, &d) != nil {
		t.Fatalf("jobs.list answer %+v", w)
	}
	var got []string
	for _, j := range d.Jobs {
		got = append(got, j.JobID+"@"+j.Node)
	}
	cur, err := protocol.DecodeCursor(protocol.CursorJobs, d.NextCursor)
	if fmt.Sprint(got) != "[job-4@nb job-3@na]" || err != nil || cur.ID != "job-3" || fmt.Sprint(d.UnavailableNodes) != "[nd nx]" {
		t.Fatalf("merged %v next %+v (%v) unavailable %v", got, cur, err, d.UnavailableNodes)
	}

	// nb silent: answered at the bound, nb named.
	c.send(t, `{"type":"workspace.list","id":"l2"}`)
	mine, theirs = a.next(t), b.next(t)
	if theirs.Header.Type != protocol.TypeWorkspaceList {
		t.Fatalf("nb was asked %+v", theirs.Header)
	}
	mine.Client.Send(protocol.NewResponse("l2", protocol.TypeWorkspaceList,
		protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{{WorkspaceID: "ws-a", CreatedAt: 1}}}))
	w = c.next(t)
	var wd protocol.WorkspaceListData
	if w.ID != "l2" || !w.Success || json.Unmarshal(w.Data, &wd) != nil || len(wd.Workspaces) != 1 || wd.Workspaces[0].Node != "na" ||
		fmt.Sprint(wd.UnavailableNodes) != "[nb nd nx]" {
		t.Fatalf("workspace.list with nb silent: %+v %+v", w, wd)
	}

	// nb's answer past the bound never reaches the client (the next record
	// it reads is the next command's answer).
	theirs.Client.Send(protocol.NewResponse(theirs.Header.ID, protocol.TypeWorkspaceList, protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{}}))

	// A workspace na does not hold: nb's answer, under the client's id.
	c.send(t, `{"type":"workspace.status","id":"s1","workspace_id":"ws-b"}`)
	mine, theirs = a.next(t), b.next(t)
	mine.Client.Send(protocol.NewErrorResponse("s1", protocol.TypeWorkspaceStatus, protocol.Errorf(protocol.CodeNotFound, "no workspace ws-b")))
	theirs.Client.Send(protocol.NewResponse(theirs.Header.ID, protocol.TypeWorkspaceStatus,
		protocol.WorkspaceStatusData{Workspace: protocol.WorkspaceInfo{WorkspaceID: "ws-b"}}))
	w = c.next(t)
	if w.ID != "s1" || !w.Success || !strings.Contains(string(w.Data), `"ws-b"`) {
		t.Fatalf("workspace.status of nb's workspace: %+v", w)
	}

	// A parent's jobs are its node's: subagent.status for nb's agent is
	// forwarded there as written.
	c.send(t, `{"type":"subagent.status","id":"st1","parent_agent_id":"agent-b1"}`)
	theirs = b.next(t)
	if theirs.Header.ID != "st1" || theirs.Header.Type != protocol.TypeSubagentStatus {
		t.Fatalf("nb's registry got %+v", theirs.Header)
	}
	answer(theirs)
	if w = c.next(t); w.ID != "st1" || !w.Success {
		t.Fatalf("subagent.status through nb: %+v", w)
	}

	// With cwd: na's list alone, nb not asked.
	c.send(t, `{"type":"workspace.list","id":"l3","cwd":"/tmp/repo"}`)
	mine = a.next(t)
	answer(mine)
	if w = c.next(t); w.ID != "l3" || !w.Success {
		t.Fatalf("workspace.list with cwd: %+v", w)
	}
	select {
	case cmd := <-b.cmds:
		t.Fatalf("nb's registry got %+v", cmd.Header)
	default:
	}
}
