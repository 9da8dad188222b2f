package wire

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFieldTables pins every type's fields to the dialect's tables
// (docs/agentcraft.md §3-§5), written out here apart from the struct tags:
// a field added, dropped, renamed or turned from required to optional (or
// back) fails here, where the shape tests, which read the tags, would not
// notice. DiffStats, inline in the dialect, is {files, additions, deletions}.
func TestFieldTables(t *testing.T) {
	cases := []struct {
		v        any
		required string
		optional string
	}{
		{Agent{}, "id name role color skin state activity station paused active", "title accent taskId repoId worktree"},
		{LogEntry{}, "ts kind text", ""},
		{Task{}, "id title status deps priority ci createdBy createdAt updatedAt", "description assignee repoId goalId branch worktree blockedReason summary"},
		{Decision{}, "id agentId kind question options status createdAt", "context answer taskId repoId worktree tool"},
		{DecisionAnswer{}, "ts", "option text"},
		{Repo{}, "id name path branch dirty worktrees ci", "head"},
		{Worktree{}, "id agentId branch base path status ahead files additions deletions", "taskId"},
		{MemoryEntry{}, "id scope title body updated", "author"},
		{Goal{}, "id text progress status createdAt updatedAt", "repoId"},
		{FeedItem{}, "ts kind text", "agentId to"},
		{ForemanStatus{}, "version backend auth", "message account speed showcase costUsd userName"},
		{AgentLogs{}, "agentId entries", ""},
		{DiffFile{}, "path status binary additions deletions hunks", "oldPath"},
		{DiffHunk{}, "header oldStart oldLines newStart newLines lines", ""},
		{DiffLine{}, "kind text", "oldNo newNo"},
		{Snapshot{}, "foreman agents tasks decisions repos memory goals feed logs", "id goal"},
		{AgentUpsert{}, "agent", "id"},
		{AgentLog{}, "agentId entries", "id"},
		{AgentSay{}, "agentId text ts", "id to"},
		{TaskUpsert{}, "task", "id"},
		{DecisionUpsert{}, "decision", "id"},
		{RepoUpsert{}, "repo", "id"},
		{MemoryUpsert{}, "entry", "id"},
		{GoalUpsert{}, "goal", "id"},
		{FeedAdd{}, "item", "id"},
		{Diff{}, "requestId repoId worktree files stats truncated", "id base branch error"},
		{Notify{}, "level text ts", "id decisionId"},
		{ForemanStatusMsg{}, "status", "id"},
		{Ack{}, "re ok", "id error result"},
		{Error{}, "message", "id re"},
		{Hello{}, "modVersion protocol", "id client"},
		{GoalSubmit{}, "text", "id repoId"},
		{UserMessage{}, "to text", "id"},
		{DecisionAnswerMsg{}, "decisionId", "id option text"},
		{TaskActionMsg{}, "taskId action", "id arg"},
		{AgentActionMsg{}, "agentId action", "id arg"},
		{DiffRequest{}, "requestId repoId worktree", "id"},
		{RepoAdd{}, "path", "id"}, {DiffStats{}, "files additions deletions", ""},
	}
	if len(cases) != 39 { // 15 entities, DiffStats, 15 server and 8 client messages
		t.Errorf("%d types in the table, want 39", len(cases))
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.v)
		var req, opt []string
		for i := range typ.NumField() {
			name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if strings.Contains(opts, "omitempty") {
				opt = append(opt, name)
			} else {
				req = append(req, name)
			}
		}
		wantReq, wantOpt := strings.Fields(c.required), strings.Fields(c.optional)
		for _, s := range [][]string{req, opt, wantReq, wantOpt} {
			slices.Sort(s)
		}
		if !slices.Equal(req, wantReq) {
			t.Errorf("%v required %v, want %v", typ, req, wantReq)
		}
		if !slices.Equal(opt, wantOpt) {
			t.Errorf("%v optional %v, want %v", typ, opt, wantOpt)
		}
	}
}

// TestOptionalFieldsRoundTrip covers, with frames written here, the
// optional fields none of the dialect's examples sets, so that their JSON
// types are checked too: each frame decodes and re-encodes to itself.
func TestOptionalFieldsRoundTrip(t *testing.T) {
	frames := []string{
		`{"v":1,"type":"foreman.status","status":{"version":"0.1.0","backend":"sim","auth":"unknown","speed":2.5,"showcase":true,"costUsd":0,"userName":"Ada"}}`,
		`{"v":1,"type":"task.upsert","task":{"id":"t3","title":"x","status":"blocked","deps":[],"priority":-1,"ci":"unknown","blockedReason":"waiting on t2","summary":"done half","createdBy":"user","createdAt":1,"updatedAt":2}}`,
		`{"v":1,"type":"decision.upsert","decision":{"id":"d5","agentId":"kit","kind":"permission","question":"Run npm test?","options":["Allow once","Always allow for this agent","Deny"],"context":"\"Always allow for this agent\" covers: npm test","status":"answered","answer":{"option":"Allow once","text":"ok","ts":3},"tool":"Bash","createdAt":1}}`,
		`{"v":1,"type":"decision.upsert","decision":{"id":"d6","agentId":"marlow","kind":"question","question":"Which name?","options":[],"status":"cancelled","createdAt":1}}`,
		`{"v":1,"type":"diff","id":"x","requestId":"r8","repoId":"demo-app","worktree":"kit-t9","files":[{"path":"b.ts","oldPath":"a.ts","status":"renamed","binary":false,"additions":0,"deletions":0,"hunks":[]}],"stats":{"files":1,"additions":0,"deletions":0},"truncated":true,"error":"partial"}`,
		`{"v":1,"type":"ack","re":"c13","ok":false,"error":"no agent named \"kitt\""}`,
		`{"v":1,"type":"snapshot","foreman":{"version":"1","backend":"sim","auth":"checking"},"agents":[],"tasks":[],"decisions":[],"repos":[],"memory":[],"goals":[],"feed":[{"ts":1,"kind":"message","text":"hi","agentId":"kit","to":"all"}],"logs":[]}`,
		`{"v":1,"type":"agent.say","agentId":"kit","text":"hi","ts":1}`,
	}
	for _, f := range frames {
		m, err := DecodeServer([]byte(f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, []string{string(b)}, []string{f})
	}
}
