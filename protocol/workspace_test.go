package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// sampleWorkspace is a projection with every field set (checked by
// TestWorkspaceInfoFullyPopulated), so that a field added later is covered
// by the path tests below.
func sampleWorkspace() protocol.WorkspaceInfo {
	ahead, behind, dirty := 3, 1, true
	return protocol.WorkspaceInfo{
		WorkspaceID:       "workspace-01j9zzz",
		Label:             "parser rewrite",
		Cwd:               "/home/u/.shard/worktrees/proj/workspace-01j9zzz",
		RepositoryCwd:     "/home/u/src/proj",
		Ownership:         protocol.OwnershipManaged,
		State:             protocol.WorkspaceStateConflict,
		Branch:            "shard/parser-rewrite",
		BaseRef:           "main",
		BaseSHA:           "1111111111111111111111111111111111111111",
		IntegrationTarget: "main",
		HeadSHA:           "2222222222222222222222222222222222222222",
		CreatedAt:         1700000000000,
		UpdatedAt:         1700000005000,
		RetiredAt:         1700000009000,
		AgentCount:        2,
		AgentIDs:          []string{"agent-1", "agent-2"},
		Ahead:             &ahead,
		Behind:            &behind,
		Dirty:             &dirty,
		ConflictReason:    "worktree is on branch other, not shard/parser-rewrite",
		Tombstone:         &protocol.WorkspaceTombstone{Branch: "shard/parser-rewrite", HeadSHA: "2222222222222222222222222222222222222222", Deleted: true},
		Node:              "n2",
	}
}

// retiredWorkspace is a retired summary, as workspace_retired carries it.
func retiredWorkspace() protocol.WorkspaceInfo {
	w := sampleWorkspace().Summary()
	w.State, w.AgentCount, w.Ahead, w.Behind, w.Dirty, w.ConflictReason = protocol.WorkspaceStateRetired, 0, nil, nil, nil, ""
	return w
}

// sampleDiff is a diff with every field set.
func sampleDiff() protocol.WorkspaceDiffData {
	return protocol.WorkspaceDiffData{
		WorkspaceID: "workspace-01j9zzz", Branch: "shard/parser-rewrite", IntegrationTarget: "main",
		BaseSHA: "1111111111111111111111111111111111111111", HeadSHA: "2222222222222222222222222222222222222222",
		Files: []protocol.DiffFile{
			{Path: "src/tags.go", OldPath: "src/tag.go", Status: protocol.DiffRenamed, Additions: 2, Deletions: 1, Untracked: true, Truncated: true,
				Hunks: []protocol.DiffHunk{{Header: "@@ -1,2 +1,3 @@ func parse()", OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 3, Lines: []protocol.DiffLine{
					{Kind: protocol.LineCtx, Text: "package tags", OldNo: 1, NewNo: 1},
					{Kind: protocol.LineDel, Text: "var x = 1", OldNo: 2},
					{Kind: protocol.LineAdd, Text: "var x = 2", NewNo: 2},
					{Kind: protocol.LineAdd, Text: "var y = 3\u2028<&>", NewNo: 3},
				}}}},
			{Path: "logo.png", Status: protocol.DiffAdded, Binary: true, Hunks: []protocol.DiffHunk{}},
		},
		Stats:     protocol.DiffStats{Files: 2, Additions: 2, Deletions: 1},
		Truncated: true,
	}
}

// allSet reports the first zero field reachable from v (a path like
// "Tombstone.Deleted"), or "".
func allSet(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return path
		}
		return allSet(v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "Header" {
				continue
			}
			if p := allSet(v.Field(i), strings.TrimPrefix(path+"."+f.Name, ".")); p != "" {
				return p
			}
		}
		return ""
	case reflect.Slice:
		if v.Len() == 0 {
			return path
		}
		for i := range v.Len() {
			if p := allSet(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	}
	if v.IsZero() {
		return path
	}
	return ""
}

func TestWorkspaceInfoFullyPopulated(t *testing.T) {
	t.Parallel()
	if p := allSet(reflect.ValueOf(sampleWorkspace()), ""); p != "" {
		t.Fatalf("sampleWorkspace leaves %s unset: set every field, so the path tests cover it", p)
	}
	if p := allSet(reflect.ValueOf(sampleRefusal()), ""); p != "" {
		t.Fatalf("sampleRefusal leaves %s unset", p)
	}
}

// walkJSON calls fn with every object key and string value in a decoded
// JSON document, with the key path leading to it.
func walkJSON(v any, path string, fn func(path, key string, val any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			fn(path, k, e)
			walkJSON(e, path+"."+k, fn)
		}
	case []any:
		for i, e := range x {
			walkJSON(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// TestWorkspaceProjectionHasNoGitDir is the protocol's "common-dir and
// git-dir paths remain omitted" (docs/protocol.md §10.1a): no member of a
// workspace projection, response or event is named after a git dir or common
// dir, and only cwd and repository_cwd carry paths.
func TestWorkspaceProjectionHasNoGitDir(t *testing.T) {
	t.Parallel()
	w := sampleWorkspace()
	msgs := map[string]any{
		"info":     w,
		"create":   protocol.WorkspaceCreateData{AgentID: "agent-1", SessionID: "sess-1", Workspace: w},
		"list":     protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{w.Summary(), retiredWorkspace()}},
		"status":   protocol.WorkspaceStatusData{Workspace: w},
		"retire":   protocol.WorkspaceRetireData{Workspace: retiredWorkspace(), BranchDeleted: true, Proof: protocol.ProofPatchID},
		"merge":    protocol.WorkspaceMergeData{Workspace: w, Strategy: protocol.MergeSquash, IntegrationTarget: "main", PreviousSHA: "a", MergedSHA: "b", Stats: protocol.DiffStats{Files: 1}},
		"diff":     sampleDiff(),
		"refusal":  sampleRefusal(),
		"created":  protocol.WorkspaceCreated{Header: protocol.Header{Type: protocol.TypeWorkspaceCreated}, Workspace: w.Summary()},
		"attached": protocol.WorkspaceAttached{Header: protocol.Header{Type: protocol.TypeWorkspaceAttached, AgentID: "agent-2"}, SessionID: "sess-2", Workspace: w.Summary()},
		"retired":  protocol.WorkspaceRetired{Header: protocol.Header{Type: protocol.TypeWorkspaceRetired}, Workspace: retiredWorkspace()},
		"conflict": protocol.WorkspaceConflict{Header: protocol.Header{Type: protocol.TypeWorkspaceConflict}, Reason: "r", Workspace: w.Summary()},
	}
	pathKeys := map[string]bool{"cwd": true, "repository_cwd": true}
	for name, m := range msgs {
		rec := protocol.MustMarshal(m)
		var doc any
		if err := json.Unmarshal(rec, &doc); err != nil {
			t.Fatal(err)
		}
		walkJSON(doc, name, func(path, key string, val any) {
			k := strings.ToLower(key)
			for _, bad := range []string{"git_dir", "gitdir", "common", "dot_git", "admin"} {
				if strings.Contains(k, bad) {
					t.Errorf("%s: member %s.%s names a git-internal directory", name, path, key)
				}
			}
			s, ok := val.(string)
			if !ok {
				return
			}
			if strings.Contains(s, "/.git") || strings.Contains(s, "/worktrees/proj/.git") {
				t.Errorf("%s: %s.%s = %q is a git directory", name, path, key, s)
			}
			if strings.HasPrefix(s, "/") && !pathKeys[key] {
				t.Errorf("%s: %s.%s = %q carries an absolute path; only cwd and repository_cwd may", name, path, key, s)
			}
		})
	}
}

func TestWorkspaceSummary(t *testing.T) {
	t.Parallel()
	w := sampleWorkspace()
	s := w.Summary()
	if s.AgentIDs != nil || s.AgentCount != 2 || s.WorkspaceID != w.WorkspaceID || s.Tombstone == nil {
		t.Errorf("Summary = %+v", s)
	}
	if len(w.AgentIDs) != 2 {
		t.Errorf("Summary changed its receiver: %v", w.AgentIDs)
	}
	if strings.Contains(string(protocol.MustMarshal(s)), "agent_ids") {
		t.Errorf("summary marshals agent_ids: %s", protocol.MustMarshal(s))
	}
}

func TestWorkspaceCommandsDecode(t *testing.T) {
	t.Parallel()
	one := 1
	n := int64(1 << 20)
	tests := []struct {
		name, rec string
		want      protocol.Command // nil: wantErr
		wantErr   string
	}{
		{name: "create full", rec: `{"id":"c1","type":"workspace.create","version":1,"cwd":"/r","label":"L","branch":"feat/x","base_ref":"v1.2^{commit}","integration_target":"main","title":"T","name":"N","model":"m","provider":"p","mode":"plan"}`,
			want: &protocol.WorkspaceCreate{Header: protocol.Header{Type: "workspace.create", ID: "c1"}, Version: &one, Cwd: "/r", Label: "L", Branch: "feat/x", BaseRef: "v1.2^{commit}", IntegrationTarget: "main", Title: "T", Name: "N", Model: "m", Provider: "p", Mode: "plan"}},
		{name: "create minimal", rec: `{"type":"workspace.create","cwd":"/r"}`, want: &protocol.WorkspaceCreate{Header: protocol.Header{Type: "workspace.create"}, Cwd: "/r"}},
		{name: "create null version is absent", rec: `{"type":"workspace.create","version":null,"cwd":"/r"}`, want: &protocol.WorkspaceCreate{Header: protocol.Header{Type: "workspace.create"}, Cwd: "/r"}},
		// A routing agent_id is ignored, as on every daemon-level command.
		{name: "create with agent_id", rec: `{"type":"workspace.create","agent_id":"agent-9","cwd":"/r"}`, want: &protocol.WorkspaceCreate{Header: protocol.Header{Type: "workspace.create", AgentID: "agent-9"}, Cwd: "/r"}},
		{name: "create without cwd", rec: `{"type":"workspace.create"}`, wantErr: `field "cwd": required`},
		{name: "create relative cwd", rec: `{"type":"workspace.create","cwd":"src/proj"}`, wantErr: `field "cwd": must be an absolute path`},
		{name: "create version 2", rec: `{"type":"workspace.create","version":2,"cwd":"/r"}`, wantErr: `field "version": must be 1`},
		{name: "create version 0", rec: `{"type":"workspace.create","version":0,"cwd":"/r"}`, wantErr: `field "version": must be 1`},
		{name: "create version string", rec: `{"type":"workspace.create","version":"1","cwd":"/r"}`, wantErr: `field "version": expected number, got string`},
		{name: "create version fraction", rec: `{"type":"workspace.create","version":1.5,"cwd":"/r"}`, wantErr: `field "version"`},
		{name: "create option-like branch", rec: `{"type":"workspace.create","cwd":"/r","branch":"--force"}`, wantErr: `field "branch": must not start with '-'`},
		{name: "create option-like base_ref", rec: `{"type":"workspace.create","cwd":"/r","base_ref":"-x"}`, wantErr: `field "base_ref": must not start with '-'`},
		{name: "create control character", rec: `{"type":"workspace.create","cwd":"/r","integration_target":"ma\u0000in"}`, wantErr: `field "integration_target": must not contain control characters`},
		{name: "create branch not a string", rec: `{"type":"workspace.create","cwd":"/r","branch":7}`, wantErr: `field "branch": expected string, got number`},

		{name: "attach", rec: `{"type":"workspace.attach","version":1,"workspace_id":"workspace-1","title":"t","name":"n","model":"m","provider":"p","mode":"plan"}`,
			want: &protocol.WorkspaceAttach{Header: protocol.Header{Type: "workspace.attach"}, Version: &one, WorkspaceID: "workspace-1", Title: "t", Name: "n", Model: "m", Provider: "p", Mode: "plan"}},
		{name: "attach without workspace_id", rec: `{"type":"workspace.attach","cwd":"/r"}`, wantErr: `field "workspace_id": required`},
		{name: "attach version 2", rec: `{"type":"workspace.attach","version":2,"workspace_id":"w"}`, wantErr: `field "version": must be 1`},

		{name: "list all", rec: `{"type":"workspace.list"}`, want: &protocol.WorkspaceList{Header: protocol.Header{Type: "workspace.list"}}},
		{name: "list filtered", rec: `{"type":"workspace.list","cwd":"/r/sub","include_retired":true}`, want: &protocol.WorkspaceList{Header: protocol.Header{Type: "workspace.list"}, Cwd: "/r/sub", IncludeRetired: true}},
		{name: "list relative cwd", rec: `{"type":"workspace.list","cwd":"."}`, wantErr: `field "cwd": must be an absolute path`},
		{name: "list include_retired not a boolean", rec: `{"type":"workspace.list","include_retired":"yes"}`, wantErr: `field "include_retired": expected boolean, got string`},
		{name: "list version 2", rec: `{"type":"workspace.list","version":2}`, wantErr: `field "version": must be 1`},

		{name: "status", rec: `{"type":"workspace.status","workspace_id":"w"}`, want: &protocol.WorkspaceStatus{Header: protocol.Header{Type: "workspace.status"}, WorkspaceID: "w"}},
		{name: "status without workspace_id", rec: `{"type":"workspace.status"}`, wantErr: `field "workspace_id": required`},
		{name: "status version 2", rec: `{"type":"workspace.status","version":2,"workspace_id":"w"}`, wantErr: `field "version": must be 1`},

		{name: "retire default", rec: `{"type":"workspace.retire","workspace_id":"w"}`, want: &protocol.WorkspaceRetire{Header: protocol.Header{Type: "workspace.retire"}, WorkspaceID: "w"}},
		{name: "retire delete_if_merged", rec: `{"type":"workspace.retire","workspace_id":"w","branch_disposition":"delete_if_merged"}`,
			want: &protocol.WorkspaceRetire{Header: protocol.Header{Type: "workspace.retire"}, WorkspaceID: "w", BranchDisposition: protocol.DispositionDeleteIfMerged}},
		{name: "retire delete_confirmed", rec: `{"type":"workspace.retire","workspace_id":"w","branch_disposition":"delete_confirmed"}`,
			want: &protocol.WorkspaceRetire{Header: protocol.Header{Type: "workspace.retire"}, WorkspaceID: "w", BranchDisposition: protocol.DispositionDeleteConfirmed}},
		{name: "retire bad disposition", rec: `{"type":"workspace.retire","workspace_id":"w","branch_disposition":"force"}`, wantErr: `field "branch_disposition": must be one of delete_if_merged, keep, delete_confirmed`},
		{name: "retire without workspace_id", rec: `{"type":"workspace.retire","branch_disposition":"keep"}`, wantErr: `field "workspace_id": required`},
		{name: "retire version 2", rec: `{"type":"workspace.retire","version":2,"workspace_id":"w"}`, wantErr: `field "version": must be 1`},

		{name: "diff", rec: `{"type":"workspace.diff","workspace_id":"w","max_bytes":1048576}`, want: &protocol.WorkspaceDiff{Header: protocol.Header{Type: "workspace.diff"}, WorkspaceID: "w", MaxBytes: &n}},
		{name: "diff default cap", rec: `{"type":"workspace.diff","version":1,"workspace_id":"w"}`, want: &protocol.WorkspaceDiff{Header: protocol.Header{Type: "workspace.diff"}, Version: &one, WorkspaceID: "w"}},
		{name: "diff without workspace_id", rec: `{"type":"workspace.diff"}`, wantErr: `field "workspace_id": required`},
		{name: "diff zero cap", rec: `{"type":"workspace.diff","workspace_id":"w","max_bytes":0}`, wantErr: `field "max_bytes": must be a positive integer`},
		{name: "diff negative cap", rec: `{"type":"workspace.diff","workspace_id":"w","max_bytes":-5}`, wantErr: `field "max_bytes": must be a positive integer`},
		{name: "diff cap not a number", rec: `{"type":"workspace.diff","workspace_id":"w","max_bytes":"1k"}`, wantErr: `field "max_bytes": expected number, got string`},
		{name: "diff version 2", rec: `{"type":"workspace.diff","version":2,"workspace_id":"w"}`, wantErr: `field "version": must be 1`},

		{name: "merge", rec: `{"type":"workspace.merge","workspace_id":"w","strategy":"merge","message":"Merge it"}`,
			want: &protocol.WorkspaceMerge{Header: protocol.Header{Type: "workspace.merge"}, WorkspaceID: "w", Strategy: protocol.MergeMerge, Message: "Merge it"}},
		{name: "merge rebase", rec: `{"type":"workspace.merge","workspace_id":"w","strategy":"rebase"}`,
			want: &protocol.WorkspaceMerge{Header: protocol.Header{Type: "workspace.merge"}, WorkspaceID: "w", Strategy: protocol.MergeRebase}},
		{name: "merge without strategy", rec: `{"type":"workspace.merge","workspace_id":"w"}`, wantErr: `field "strategy": required`},
		{name: "merge bad strategy", rec: `{"type":"workspace.merge","workspace_id":"w","strategy":"octopus"}`, wantErr: `field "strategy": must be one of merge, squash, rebase`},
		{name: "merge without workspace_id", rec: `{"type":"workspace.merge","strategy":"squash"}`, wantErr: `field "workspace_id": required`},
		{name: "merge rebase with message", rec: `{"type":"workspace.merge","workspace_id":"w","strategy":"rebase","message":"x"}`, wantErr: `field "message": strategy rebase makes no commit`},
		{name: "merge version 2", rec: `{"type":"workspace.merge","version":2,"workspace_id":"w","strategy":"merge"}`, wantErr: `field "version": must be 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd, h, err := protocol.DecodeCommand([]byte(tt.rec))
			if tt.want == nil {
				if cmd != nil {
					t.Errorf("command = %#v, want nil", cmd)
				}
				checkErr(t, err, tt.wantErr)
				if h.Type == "" {
					t.Errorf("header lost its type on error: %+v", h)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
			if !reflect.DeepEqual(cmd, tt.want) {
				t.Errorf("command = %#v\nwant      %#v", cmd, tt.want)
			}
			if protocol.CommandScope(h.Type) != protocol.ScopeOrchestrator {
				t.Errorf("CommandScope(%q) is not orchestrator", h.Type)
			}
			again, _, err := protocol.DecodeCommand(protocol.MustMarshal(cmd))
			if err != nil || !reflect.DeepEqual(again, tt.want) {
				t.Errorf("re-decode = %#v, %v", again, err)
			}
		})
	}
}

func TestWorkspaceRetireDisposition(t *testing.T) {
	t.Parallel()
	for in, want := range map[protocol.BranchDisposition]protocol.BranchDisposition{
		"":                                  protocol.DispositionDeleteIfMerged,
		protocol.DispositionKeep:            protocol.DispositionKeep,
		protocol.DispositionDeleteIfMerged:  protocol.DispositionDeleteIfMerged,
		protocol.DispositionDeleteConfirmed: protocol.DispositionDeleteConfirmed,
	} {
		c := protocol.WorkspaceRetire{BranchDisposition: in}
		if got := c.Disposition(); got != want {
			t.Errorf("Disposition(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWorkspaceStates(t *testing.T) {
	t.Parallel()
	want := []protocol.WorkspaceState{"creating", "active", "missing", "conflict", "retiring", "retired"}
	if got := protocol.WorkspaceStates(); !reflect.DeepEqual(got, want) {
		t.Errorf("WorkspaceStates = %v, want %v", got, want)
	}
	for _, s := range want {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	if protocol.WorkspaceState("gone").Valid() || protocol.WorkspaceState("").Valid() {
		t.Error("an unregistered state is valid")
	}
}

// TestWorkspaceResponsesRoundTrip sends every response data type through
// NewResponse and DecodeEvent and gets it back unchanged.
func TestWorkspaceResponsesRoundTrip(t *testing.T) {
	t.Parallel()
	w := sampleWorkspace()
	tests := []struct {
		command string
		data    any
		into    func() any
	}{
		{protocol.TypeWorkspaceCreate, protocol.WorkspaceCreateData{AgentID: "agent-1", SessionID: "sess-1", Workspace: w}, func() any { return new(protocol.WorkspaceCreateData) }},
		{protocol.TypeWorkspaceAttach, protocol.WorkspaceAttachData{AgentID: "agent-2", SessionID: "sess-2", Workspace: w}, func() any { return new(protocol.WorkspaceAttachData) }},
		{protocol.TypeWorkspaceList, protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{w.Summary(), retiredWorkspace()}}, func() any { return new(protocol.WorkspaceListData) }},
		{protocol.TypeWorkspaceList, protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{}}, func() any { return new(protocol.WorkspaceListData) }},
		{protocol.TypeWorkspaceStatus, protocol.WorkspaceStatusData{Workspace: w}, func() any { return new(protocol.WorkspaceStatusData) }},
		{protocol.TypeWorkspaceRetire, protocol.WorkspaceRetireData{Workspace: retiredWorkspace(), BranchDeleted: true, Proof: protocol.ProofMergeTree}, func() any { return new(protocol.WorkspaceRetireData) }},
		{protocol.TypeWorkspaceRetire, protocol.WorkspaceRetireData{Workspace: retiredWorkspace()}, func() any { return new(protocol.WorkspaceRetireData) }},
		{protocol.TypeWorkspaceDiff, sampleDiff(), func() any { return new(protocol.WorkspaceDiffData) }},
		{protocol.TypeWorkspaceMerge, protocol.WorkspaceMergeData{Workspace: w, Strategy: protocol.MergeRebase, IntegrationTarget: "main", PreviousSHA: "a1", MergedSHA: "b2", Stats: protocol.DiffStats{Files: 3, Additions: 10, Deletions: 4}}, func() any { return new(protocol.WorkspaceMergeData) }},
	}
	for _, tt := range tests {
		rec := protocol.NewResponse("r1", tt.command, tt.data)
		assertNoRawSeparators(t, rec)
		ev, err := protocol.DecodeEvent(rec)
		if err != nil {
			t.Fatalf("%s: %v", tt.command, err)
		}
		resp, ok := ev.(*protocol.Response)
		if !ok || !resp.Success || resp.Command != tt.command || resp.ID != "r1" {
			t.Fatalf("%s: decoded %#v", tt.command, ev)
		}
		got := tt.into()
		if err := json.Unmarshal(resp.Data, got); err != nil {
			t.Fatalf("%s: data %s: %v", tt.command, resp.Data, err)
		}
		if g := reflect.ValueOf(got).Elem().Interface(); !reflect.DeepEqual(g, tt.data) {
			t.Errorf("%s: round trip changed the data:\n got %+v\nwant %+v", tt.command, g, tt.data)
		}
	}
}

// TestWorkspaceDiffWireNames pins the snake_case names of the AgentCraft
// diff shapes.
func TestWorkspaceDiffWireNames(t *testing.T) {
	t.Parallel()
	got := decodeJSONObject(t, protocol.MustMarshal(sampleDiff()))
	file := got["files"].([]any)[0].(map[string]any)
	hunk := file["hunks"].([]any)[0].(map[string]any)
	line := hunk["lines"].([]any)[0].(map[string]any)
	for _, c := range []struct {
		obj  map[string]any
		keys []string
	}{
		{got, []string{"workspace_id", "branch", "integration_target", "base_sha", "head_sha", "files", "stats", "truncated"}},
		{file, []string{"path", "old_path", "status", "binary", "additions", "deletions", "hunks", "untracked", "truncated"}},
		{hunk, []string{"header", "old_start", "old_lines", "new_start", "new_lines", "lines"}},
		{line, []string{"kind", "text", "old_no", "new_no"}},
		{got["stats"].(map[string]any), []string{"files", "additions", "deletions"}},
	} {
		var keys []string
		for k := range c.obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Clone(c.keys)
		slices.Sort(want)
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("keys = %v, want %v", keys, want)
		}
	}
	// A del line has no new_no; an add line no old_no.
	del := hunk["lines"].([]any)[1].(map[string]any)
	if _, ok := del["new_no"]; ok {
		t.Errorf("del line has new_no: %v", del)
	}
}

func sampleRefusal() protocol.WorkspaceRefusal {
	return protocol.WorkspaceRefusal{
		Kind: protocol.RefusalMergeConflict, WorkspaceID: "workspace-1", Reason: "merging shard/x into main conflicts in 2 files",
		ConfirmationDisposition: protocol.DispositionDeleteConfirmed, Paths: []string{"src/a.go", "README.md"}, PathsTruncated: true,
		Branch: "feature", IntegrationTarget: "main", AgentIDs: []string{"agent-1"},
	}
}

func TestWorkspaceRefusalKinds(t *testing.T) {
	t.Parallel()
	want := map[protocol.WorkspaceRefusalKind]protocol.ErrorCode{
		"not_a_repository": protocol.CodeInvalidRequest, "branch_exists": protocol.CodeConflict,
		"base_ref_unknown": protocol.CodeInvalidRequest, "path_taken": protocol.CodeConflict,
		"repository_busy": protocol.CodeConflict, "confirmation_required": protocol.CodeConflict,
		"live": protocol.CodeConflict, "busy": protocol.CodeConflict, "dirty": protocol.CodeConflict,
		"locked": protocol.CodeConflict, "submodules": protocol.CodeConflict,
		"missing_authority": protocol.CodeConflict, "unsafe": protocol.CodePermissionDenied,
		"retired":    protocol.CodeConflict,
		"main_dirty": protocol.CodeConflict, "wrong_branch": protocol.CodeConflict, "merge_conflict": protocol.CodeConflict,
	}
	kinds := protocol.WorkspaceRefusalKinds()
	if len(kinds) != len(want) {
		t.Fatalf("WorkspaceRefusalKinds has %d kinds, want %d", len(kinds), len(want))
	}
	for _, k := range kinds {
		code, ok := want[k]
		if !ok {
			t.Errorf("unexpected kind %q", k)
			continue
		}
		if got := k.Code(); got != code || !k.Valid() {
			t.Errorf("%q: Code = %q (valid %v), want %q", k, got, k.Valid(), code)
		}
		if !slices.Contains(protocol.Codes(), k.Code()) {
			t.Errorf("%q maps to unregistered code %q", k, k.Code())
		}
	}
	if protocol.WorkspaceRefusalKind("nope").Valid() {
		t.Error("an unregistered kind is valid")
	}
}

// TestWorkspaceRefusalOnTheWire checks that a refusal travels in the error
// object's data member and comes back typed, from a Go error chain and
// from a decoded response.
func TestWorkspaceRefusalOnTheWire(t *testing.T) {
	t.Parallel()
	r := protocol.WorkspaceRefusal{
		Kind: protocol.RefusalConfirmationRequired, WorkspaceID: "workspace-1",
		Reason:                  "branch shard/x has 2 commits not on main",
		ConfirmationDisposition: protocol.DispositionDeleteConfirmed,
	}
	err := r.Err()
	if err.Code != protocol.CodeConflict || err.Message != r.Reason {
		t.Fatalf("Err = %+v", err)
	}
	wrapped := fmt.Errorf("retire %s: %w", r.WorkspaceID, err)
	if got, ok := protocol.WorkspaceRefusalOf(wrapped); !ok || !reflect.DeepEqual(got, r) {
		t.Fatalf("WorkspaceRefusalOf(wrapped) = %+v, %v", got, ok)
	}
	if protocol.CodeOf(wrapped) != protocol.CodeConflict {
		t.Errorf("CodeOf = %s", protocol.CodeOf(wrapped))
	}

	rec := protocol.NewErrorResponse("r1", protocol.TypeWorkspaceRetire, wrapped)
	want := map[string]any{"type": "response", "id": "r1", "command": "workspace.retire", "success": false,
		"error": map[string]any{"code": "CONFLICT", "message": r.Reason, "data": map[string]any{
			"kind": "confirmation_required", "workspace_id": "workspace-1", "reason": r.Reason,
			"confirmation_disposition": "delete_confirmed",
		}}}
	if got := decodeJSONObject(t, rec); !reflect.DeepEqual(got, want) {
		t.Fatalf("response = %v\nwant       %v", got, want)
	}
	ev, derr := protocol.DecodeEvent(rec)
	if derr != nil {
		t.Fatal(derr)
	}
	resp := ev.(*protocol.Response)
	if got, ok := protocol.WorkspaceRefusalOf(resp.Error); !ok || !reflect.DeepEqual(got, r) {
		t.Fatalf("WorkspaceRefusalOf(decoded) = %+v, %v", got, ok)
	}

	full := sampleRefusal()
	back, ok := protocol.WorkspaceRefusalOf(&protocol.Error{Code: protocol.CodeConflict, Data: json.RawMessage(protocol.MustMarshal(full))})
	if !ok || !reflect.DeepEqual(back, full) {
		t.Errorf("from raw data = %+v, %v", back, ok)
	}
	if got, ok := protocol.WorkspaceRefusalOf(&protocol.Error{Code: protocol.CodeConflict, Data: &full}); !ok || !reflect.DeepEqual(got, full) {
		t.Errorf("from a pointer = %+v, %v", got, ok)
	}

	for name, e := range map[string]error{
		"nil":           nil,
		"plain":         errors.New("boom"),
		"no data":       protocol.Errorf(protocol.CodeConflict, "busy"),
		"other data":    &protocol.Error{Code: protocol.CodeConflict, Data: map[string]any{"turn_id": "t1"}},
		"unknown kind":  &protocol.Error{Code: protocol.CodeConflict, Data: map[string]any{"kind": "mystery", "reason": "x"}},
		"not an object": &protocol.Error{Code: protocol.CodeConflict, Data: "text"},
		"nil pointer":   &protocol.Error{Code: protocol.CodeConflict, Data: (*protocol.WorkspaceRefusal)(nil)},
	} {
		if got, ok := protocol.WorkspaceRefusalOf(e); ok {
			t.Errorf("%s: WorkspaceRefusalOf = %+v, true", name, got)
		}
	}
}

// TestWorkspaceEventsHaveNoID checks the events decode typed and carry no
// correlation id; workspace_attached names its agent in agent_id.
func TestWorkspaceEventsHaveNoID(t *testing.T) {
	t.Parallel()
	rec := protocol.MustMarshal(protocol.WorkspaceAttached{Header: protocol.Header{Type: protocol.TypeWorkspaceAttached, AgentID: "agent-2"}, SessionID: "sess-2", Workspace: sampleWorkspace().Summary()})
	got := decodeJSONObject(t, rec)
	if _, ok := got["id"]; ok {
		t.Errorf("event has an id: %s", rec)
	}
	if got["agent_id"] != "agent-2" || got["session_id"] != "sess-2" {
		t.Errorf("workspace_attached = %s", rec)
	}
	ev, err := protocol.DecodeEvent(rec)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := ev.(*protocol.WorkspaceAttached); !ok || a.AgentID != "agent-2" || a.Workspace.WorkspaceID != "workspace-01j9zzz" {
		t.Errorf("decoded %#v", ev)
	}
	for _, typ := range []string{protocol.TypeWorkspaceCreated, protocol.TypeWorkspaceAttached, protocol.TypeWorkspaceRetired, protocol.TypeWorkspaceConflict} {
		if protocol.CommandScope(typ) != protocol.ScopeUnknown {
			t.Errorf("event %q is a command", typ)
		}
	}
}
