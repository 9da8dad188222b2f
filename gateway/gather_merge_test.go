package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// jobsAnswer is a node's jobs.list answer holding ids (newest first).
func jobsAnswer(node string, next bool, ids ...string) gathered {
	d := protocol.JobsListData{Jobs: []protocol.OpJob{}}
	for _, id := range ids {
		d.Jobs = append(d.Jobs, protocol.OpJob{JobID: id})
	}
	if next {
		d.NextCursor = protocol.Cursor{Kind: protocol.CursorJobs, ID: ids[len(ids)-1]}.Encode()
	}
	return gathered{node: node, rec: protocol.NewResponse("g", protocol.TypeJobsList, d)}
}

// decodeData reads a merged response's data into v, failing on an error.
func decodeData(t *testing.T, rec []byte, v any) {
	t.Helper()
	var r struct {
		ID      string          `json:"id"`
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
		Error   *protocol.Error `json:"error"`
	}
	if err := json.Unmarshal(rec, &r); err != nil || !r.Success || r.ID != "c1" {
		t.Fatalf("merged answer %s: %v", rec, err)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatal(err)
	}
}

// TestMergeJobsPagesAcrossNodes walks the cluster's jobs page by page as
// the nodes would answer each page (each node's first limit after the
// cursor) and sees every job exactly once, newest first, each with its
// node, for several page sizes.
func TestMergeJobsPagesAcrossNodes(t *testing.T) {
	held := map[string][]string{} // node → its jobs, newest first
	var all []string
	for i := 30; i >= 1; i-- {
		id := fmt.Sprintf("job-%02d", i)
		node := []string{"n1", "n2", "n3"}[i*7%3]
		held[node] = append(held[node], id)
		all = append(all, id)
	}
	answer := func(node, cursor string, limit int) gathered {
		var ids []string
		for _, id := range held[node] {
			if cursor == "" || id < cursor {
				ids = append(ids, id)
			}
		}
		next := limit > 0 && len(ids) > limit
		if next {
			ids = ids[:limit]
		}
		return jobsAnswer(node, next, ids...)
	}
	h := protocol.Header{ID: "c1", Type: protocol.TypeJobsList}
	for _, limit := range []int{1, 2, 4, 10, 29, 30, 31} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > len(all) {
				t.Fatalf("limit %d: no last page", limit)
			}
			after := ""
			if cursor != "" {
				c, err := protocol.DecodeCursor(protocol.CursorJobs, cursor)
				if err != nil {
					t.Fatal(err)
				}
				after = c.ID
			}
			answers := []gathered{answer("n1", after, limit), answer("n2", after, limit), answer("n3", after, limit)}
			var d protocol.JobsListData
			decodeData(t, mergeList(gatherJobs, h, limit, answers, nil), &d)
			if len(d.Jobs) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(d.Jobs))
			}
			for _, j := range d.Jobs {
				if !slices.Contains(held[j.Node], j.JobID) {
					t.Fatalf("limit %d: %s said on node %q", limit, j.JobID, j.Node)
				}
				got = append(got, j.JobID)
			}
			if d.NextCursor == "" {
				break
			}
			cursor = d.NextCursor
		}
		if fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("limit %d: visited %v, want %v", limit, got, all)
		}
	}
}

// TestMergeJobsUnavailable: a node that answered an error or not at all,
// and a dead one, are named; their jobs are simply absent. This node's
// own error is the answer.
func TestMergeJobsUnavailable(t *testing.T) {
	h := protocol.Header{ID: "c1", Type: protocol.TypeJobsList}
	answers := []gathered{
		jobsAnswer("n1", false, "job-3"),
		{node: "n2", err: nodeUnavailable("n2", "the connection to it was lost")},
		{node: "n4", rec: protocol.NewErrorResponse("g", protocol.TypeJobsList, protocol.Errorf(protocol.CodeInternal, "x"))},
	}
	var d protocol.JobsListData
	decodeData(t, mergeList(gatherJobs, h, 0, answers, []string{"n3"}), &d)
	if len(d.Jobs) != 1 || d.Jobs[0].Node != "n1" || fmt.Sprint(d.UnavailableNodes) != "[n2 n3 n4]" {
		t.Fatalf("merged %+v", d)
	}

	bad := []gathered{{node: "n1", rec: protocol.NewErrorResponse("c1", protocol.TypeJobsList,
		protocol.Errorf(protocol.CodeInvalidRequest, "cursor: malformed"))}, jobsAnswer("n2", false, "job-1")}
	if !responseIs(mergeList(gatherJobs, h, 0, bad, nil), protocol.CodeInvalidRequest) {
		t.Fatal("this node's refusal is not the answer")
	}
}

// TestMergeWorkspacesOldestFirst merges workspace lists oldest first, each
// with its node.
func TestMergeWorkspacesOldestFirst(t *testing.T) {
	ws := func(node string, items ...protocol.WorkspaceInfo) gathered {
		return gathered{node: node, rec: protocol.NewResponse("g", protocol.TypeWorkspaceList, protocol.WorkspaceListData{Workspaces: items})}
	}
	h := protocol.Header{ID: "c1", Type: protocol.TypeWorkspaceList}
	answers := []gathered{
		ws("n1", protocol.WorkspaceInfo{WorkspaceID: "ws-b", CreatedAt: 2}, protocol.WorkspaceInfo{WorkspaceID: "ws-d", CreatedAt: 4}),
		ws("n2", protocol.WorkspaceInfo{WorkspaceID: "ws-a", CreatedAt: 1}, protocol.WorkspaceInfo{WorkspaceID: "ws-c", CreatedAt: 2}),
	}
	var d protocol.WorkspaceListData
	decodeData(t, mergeList(gatherWorkspaces, h, 0, answers, nil), &d)
	var got []string
	for _, w := range d.Workspaces {
		got = append(got, w.WorkspaceID+"@"+w.Node)
	}
	if fmt.Sprint(got) != "[ws-a@n2 ws-b@n1 ws-c@n2 ws-d@n1]" || d.UnavailableNodes != nil {
		t.Fatalf("merged %v %v", got, d.UnavailableNodes)
	}
}

// TestMergeHolder: the holder's answer wins under the client's id, this
// node's first; when nobody holds the id it is NOT_FOUND, naming the nodes
// that could not answer.
func TestMergeHolder(t *testing.T) {
	h := protocol.Header{ID: "c1", Type: protocol.TypeWorkspaceStatus}
	nf := func(node string) gathered {
		return gathered{node: node, rec: protocol.NewErrorResponse("g", h.Type, protocol.Errorf(protocol.CodeNotFound, "workspace ws-x not found"))}
	}
	held := gathered{node: "n2", rec: protocol.NewResponse("g", h.Type, protocol.WorkspaceStatusData{Workspace: protocol.WorkspaceInfo{WorkspaceID: "ws-x"}})}
	var d protocol.WorkspaceStatusData
	decodeData(t, mergeHolder(h, []gathered{nf("n1"), nf("n3"), held}, nil), &d)
	if d.Workspace.WorkspaceID != "ws-x" {
		t.Fatalf("holder's answer %+v", d)
	}

	// jobs.show says the node holding the job.
	shown := gathered{node: "n3", rec: protocol.NewResponse("g", protocol.TypeJobsShow, protocol.OpJob{JobID: "job-1", Runs: []protocol.OpRun{}})}
	var job protocol.OpJob
	decodeData(t, mergeHolder(protocol.Header{ID: "c1", Type: protocol.TypeJobsShow}, []gathered{nf("n1"), shown}, nil), &job)
	if job.JobID != "job-1" || job.Node != "n3" {
		t.Fatalf("jobs.show through the holder: %+v", job)
	}

	conflict := gathered{node: "n2", rec: protocol.NewErrorResponse("g", h.Type, protocol.Errorf(protocol.CodeConflict, "busy"))}
	if rec := mergeHolder(h, []gathered{nf("n1"), conflict}, nil); !responseIs(rec, protocol.CodeConflict) {
		t.Fatalf("the holder's refusal is not the answer: %s", rec)
	}

	rec := mergeHolder(h, []gathered{nf("n1"), {node: "n2", err: nodeUnavailable("n2", "lost")}}, []string{"n3"})
	var r struct {
		ID    string `json:"id"`
		Error struct {
			Code protocol.ErrorCode  `json:"code"`
			Data map[string][]string `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatal(err)
	}
	if r.ID != "c1" || r.Error.Code != protocol.CodeNotFound || fmt.Sprint(r.Error.Data["unavailable_nodes"]) != "[n2 n3]" {
		t.Fatalf("not found: %s", rec)
	}
}

// FuzzGatherMerge: whatever another node answers, the merges never panic
// and always answer the client one response under its own id.
func FuzzGatherMerge(f *testing.F) {
	f.Add([]byte(`{"type":"response","id":"g","command":"jobs.list","success":true,"data":{"jobs":[{"job_id":"job-1"}],"next_cursor":"x"}}`))
	f.Add([]byte(`{"type":"response","id":"g","command":"workspace.list","success":true,"data":{"workspaces":[{"workspace_id":"ws-1"}]}}`))
	f.Add([]byte(`{"type":"response","id":"g","success":false,"error":{"code":"NOT_FOUND","message":"x"}}`))
	f.Add([]byte(`{"success":false}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		local := gathered{node: "n1", rec: protocol.NewResponse("c1", protocol.TypeJobsList, protocol.JobsListData{Jobs: []protocol.OpJob{}})}
		other := gathered{node: "n2", rec: rec}
		for _, out := range [][]byte{
			mergeList(gatherJobs, protocol.Header{ID: "c1", Type: protocol.TypeJobsList}, 1, []gathered{local, other}, nil),
			mergeList(gatherWorkspaces, protocol.Header{ID: "c1", Type: protocol.TypeWorkspaceList}, 0, []gathered{local, other}, nil),
			mergeHolder(protocol.Header{ID: "c1", Type: protocol.TypeJobsShow}, []gathered{{node: "n1", rec: protocol.NewErrorResponse("c1", protocol.TypeJobsShow, protocol.Errorf(protocol.CodeNotFound, "no"))}, other}, nil),
		} {
			var r struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(out, &r); err != nil || r.ID != "c1" {
				t.Fatalf("merged %s (%v)", out, err)
			}
		}
	})
}
