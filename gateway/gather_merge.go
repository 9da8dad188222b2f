package gateway

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// The merge of a gather's answers (gather.go; docs/protocol.md §13 "Jobs
// and workspaces of other nodes"). Pure: the answers in, the client's one
// response out. answers[0] is always this node's.

// nodeResponse is a response record as far as a merge reads it.
type nodeResponse struct {
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data"`
	Error   *protocol.Error `json:"error"`
}

// decodeAnswer reads g's response; a node that did not answer, or whose
// answer cannot be read, is an error.
func decodeAnswer(g gathered) (nodeResponse, *protocol.Error) {
	if g.rec == nil {
		if g.err != nil {
			return nodeResponse{}, g.err
		}
		return nodeResponse{}, nodeUnavailable(g.node, "it did not answer")
	}
	var r nodeResponse
	if err := json.Unmarshal(g.rec, &r); err != nil {
		return nodeResponse{}, nodeUnavailable(g.node, "its answer could not be read")
	}
	if !r.Success {
		if r.Error == nil {
			return r, protocol.Errorf(protocol.CodeInternal, "node %s answered an error without one", g.node)
		}
		return r, r.Error
	}
	return r, nil
}

// responseIs reports whether rec is an error response with code.
func responseIs(rec []byte, code protocol.ErrorCode) bool {
	if rec == nil {
		return false
	}
	_, err := decodeAnswer(gathered{rec: rec})
	return err != nil && err.Code == code
}

// mergeList merges the answers to a jobs.list (kind gatherJobs, paged by
// limit) or a workspace.list (gatherWorkspaces). This node's error is the
// answer (the command is refused everywhere alike: a bad cursor, a bad
// filter); another node that answers an error, does not answer, or is in
// down is left out and named in unavailable_nodes. Each item says its
// node.
//
// Paging: every node answers the same command, so the same cursor (a job
// id: the cursor names a sort key, never a position, and job ids order
// the cluster's jobs as one node's) and the same limit; each answers its
// first limit jobs after the cursor. The cluster's first limit jobs after
// the cursor are among those, so the merged page is the first limit of
// their union in the list's order, and a next_cursor names its last job
// when the union was longer, or any node had more.
func mergeList(kind gatherKind, h protocol.Header, limit int, answers []gathered, down []string) []byte {
	var jobs []protocol.OpJob
	workspaces := []protocol.WorkspaceInfo{}
	more := false
	for i, g := range answers {
		r, err := decodeAnswer(g)
		if err != nil {
			if i == 0 {
				return protocol.NewErrorResponse(h.ID, h.Type, err)
			}
			down = append(down, g.node)
			continue
		}
		switch kind {
		case gatherJobs:
			var d protocol.JobsListData
			if json.Unmarshal(r.Data, &d) != nil {
				down = append(down, g.node)
				continue
			}
			for _, j := range d.Jobs {
				j.Node = cmp.Or(j.Node, g.node)
				jobs = append(jobs, j)
			}
			more = more || d.NextCursor != ""
		case gatherWorkspaces:
			var d protocol.WorkspaceListData
			if json.Unmarshal(r.Data, &d) != nil {
				down = append(down, g.node)
				continue
			}
			for _, w := range d.Workspaces {
				w.Node = cmp.Or(w.Node, g.node)
				workspaces = append(workspaces, w)
			}
		}
	}
	slices.Sort(down)
	down = slices.Compact(down)
	if kind == gatherWorkspaces {
		slices.SortStableFunc(workspaces, func(a, b protocol.WorkspaceInfo) int {
			return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.WorkspaceID, b.WorkspaceID))
		})
		return protocol.NewResponse(h.ID, h.Type, protocol.WorkspaceListData{Workspaces: workspaces, UnavailableNodes: down})
	}
	// Newest first: job_id descending, as one node orders them.
	slices.SortStableFunc(jobs, func(a, b protocol.OpJob) int { return strings.Compare(b.JobID, a.JobID) })
	jobs = slices.CompactFunc(jobs, func(a, b protocol.OpJob) bool { return a.JobID == b.JobID })
	d := protocol.JobsListData{Jobs: jobs, UnavailableNodes: down}
	if d.Jobs == nil {
		d.Jobs = []protocol.OpJob{}
	}
	if limit > 0 && (len(jobs) > limit || more && len(jobs) == limit) {
		d.Jobs = jobs[:limit]
		d.NextCursor = protocol.Cursor{Kind: protocol.CursorJobs, ID: jobs[limit-1].JobID}.Encode()
	}
	return protocol.NewResponse(h.ID, h.Type, d)
}

// mergeHolder answers a command naming one job or workspace from its
// holder's answer: the first answer that is not NOT_FOUND (this node's
// first), under the client's id. When every node that answered said
// NOT_FOUND it is NOT_FOUND; when some node could not answer (down), the
// id may be that node's, and the NOT_FOUND names them in its message and
// in data.unavailable_nodes.
func mergeHolder(h protocol.Header, answers []gathered, down []string) []byte {
	var notFound *protocol.Error
	for i, g := range answers {
		_, err := decodeAnswer(g)
		switch {
		case err == nil && h.Type == protocol.TypeJobsShow:
			return withJobNode(h, g)
		case err == nil || g.rec != nil && err.Code != protocol.CodeNotFound && (i == 0 || err.Code != protocol.CodeNodeUnavailable):
			rec, werr := withID(g.rec, h.ID)
			if werr != nil {
				return protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(protocol.CodeInternal, "%w", werr))
			}
			return rec
		case g.rec != nil && err.Code == protocol.CodeNotFound:
			if notFound == nil {
				notFound = err
			}
		default:
			down = append(down, g.node)
		}
	}
	if notFound == nil {
		notFound = protocol.Errorf(protocol.CodeNotFound, "%s: not found", h.Type)
	}
	slices.Sort(down)
	down = slices.Compact(down)
	if len(down) > 0 {
		e := *notFound
		e.Message = fmt.Sprintf("%s (nodes %s did not answer: it may be theirs)", e.Message, strings.Join(down, ", "))
		e.Data = map[string][]string{"unavailable_nodes": down}
		notFound = &e
	}
	return protocol.NewErrorResponse(h.ID, h.Type, notFound)
}

// withJobNode is a jobs.show answer under the client's id, its job saying
// the node that holds it (OpJob.node), every other member kept as that
// node wrote it.
func withJobNode(h protocol.Header, g gathered) []byte {
	r, _ := decodeAnswer(g) // a success: decoded before
	var job map[string]json.RawMessage
	if json.Unmarshal(r.Data, &job) != nil || job == nil {
		return protocol.NewErrorResponse(h.ID, h.Type, nodeUnavailable(g.node, "its answer could not be read"))
	}
	if _, ok := job["node"]; !ok {
		job["node"], _ = json.Marshal(g.node) // a string
	}
	return protocol.NewResponse(h.ID, h.Type, job)
}
