package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// sampleDiff is a structured diff with a modified, an added (untracked), a
// deleted, a renamed and a binary file.
var sampleDiff = []protocol.DiffFile{
	{Path: "main.go", Status: protocol.DiffModified, Additions: 2, Deletions: 1, Hunks: []protocol.DiffHunk{{
		Header: "@@ -1,3 +1,4 @@ package main", OldStart: 1, OldLines: 3, NewStart: 1, NewLines: 4,
		Lines: []protocol.DiffLine{
			{Kind: protocol.LineCtx, Text: "import \"fmt\"", OldNo: 1, NewNo: 1},
			{Kind: protocol.LineDel, Text: "func old() {}", OldNo: 2},
			{Kind: protocol.LineAdd, Text: "func a() {}", NewNo: 2},
			{Kind: protocol.LineAdd, Text: "func b() {}", NewNo: 3},
			{Kind: protocol.LineCtx, Text: "", OldNo: 3, NewNo: 4},
		},
	}}},
	{Path: "notes.txt", Status: protocol.DiffAdded, Untracked: true, NewMode: "100644", Additions: 1, Hunks: []protocol.DiffHunk{{
		OldStart: 0, OldLines: 0, NewStart: 1, NewLines: 1,
		Lines: []protocol.DiffLine{{Kind: protocol.LineAdd, Text: "hello", NewNo: 1, NoNewline: true}},
	}}},
	{Path: "gone.txt", Status: protocol.DiffDeleted, Deletions: 1, Hunks: []protocol.DiffHunk{{
		Header: "@@ -1 +0,0 @@", OldStart: 1, OldLines: 1,
		Lines: []protocol.DiffLine{{Kind: protocol.LineDel, Text: "bye", OldNo: 1}},
	}}},
	{Path: "new/name.go", OldPath: "old/name.go", Status: protocol.DiffRenamed, OldMode: "100644", NewMode: "100755", Hunks: []protocol.DiffHunk{}},
	{Path: "logo.png", Status: protocol.DiffModified, Binary: true, Hunks: []protocol.DiffHunk{}},
}

var sampleStats = protocol.DiffStats{Files: 5, Additions: 3, Deletions: 2}

const wantUnified = `diff --git a/main.go b/main.go
--- a/main.go
+++ b/main.go
@@ -1,3 +1,4 @@ package main
 import "fmt"
-func old() {}
+func a() {}
+func b() {}
 
diff --git a/notes.txt b/notes.txt
new file mode 100644
--- /dev/null
+++ b/notes.txt
@@ -0,0 +1 @@
+hello
\ No newline at end of file
diff --git a/gone.txt b/gone.txt
deleted file
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/old/name.go b/new/name.go
rename from old/name.go
rename to new/name.go
old mode 100644
new mode 100755
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
`

func TestUnifiedDiffPlain(t *testing.T) {
	var b bytes.Buffer
	writeUnifiedDiff(&b, sampleDiff, palette{})
	if b.String() != wantUnified {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), wantUnified)
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Fatal("plain output has escape codes")
	}
}

func TestUnifiedDiffColor(t *testing.T) {
	var b bytes.Buffer
	writeUnifiedDiff(&b, sampleDiff, palette{enabled: true})
	out := b.String()
	for _, want := range []string{
		sgrGreen + "+func a() {}" + sgrReset + "\n",
		sgrRed + "-func old() {}" + sgrReset + "\n",
		sgrCyan + "@@ -1,3 +1,4 @@ package main" + sgrReset + "\n",
		sgrCyan + "@@ -0,0 +1 @@" + sgrReset + "\n",
		sgrBold + "diff --git a/main.go b/main.go" + sgrReset + "\n",
		"\n import \"fmt\"\n", // context lines stay plain
	} {
		if !strings.Contains(out, want) {
			t.Errorf("colored diff lacks %q:\n%q", want, out)
		}
	}
	// Stripping the codes gives the plain diff back.
	for _, sgr := range []string{sgrGreen, sgrRed, sgrCyan, sgrBold, sgrReset} {
		out = strings.ReplaceAll(out, sgr, "")
	}
	if out != wantUnified {
		t.Fatalf("colored diff without codes differs:\n%s", out)
	}
}

func TestDiffStat(t *testing.T) {
	var b bytes.Buffer
	writeDiffStat(&b, sampleDiff, sampleStats, palette{})
	// The name column is as wide as the widest name; a file without
	// counted lines (a pure rename) gets no bar.
	want := "" +
		" main.go                    | 3 ++-\n" +
		" notes.txt (untracked)      | 1 +\n" +
		" gone.txt                   | 1 -\n" +
		" old/name.go => new/name.go | 0\n" +
		" logo.png                   | Bin\n" +
		" 5 files changed, 3 insertions(+), 2 deletions(-)\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeDiffStat(&b, sampleDiff[:1], protocol.DiffStats{Files: 1, Additions: 2, Deletions: 1}, palette{enabled: true})
	if !strings.Contains(b.String(), sgrGreen+"++"+sgrReset+sgrRed+"-"+sgrReset) {
		t.Fatalf("colored stat = %q", b.String())
	}
	if !strings.Contains(b.String(), "1 file changed, 2 insertions(+), 1 deletion(-)") {
		t.Fatalf("total = %q", b.String())
	}
}

func TestDiffStatScalesBars(t *testing.T) {
	var b bytes.Buffer
	files := []protocol.DiffFile{{Path: "big", Additions: 400, Deletions: 400}, {Path: "small", Additions: 1}}
	writeDiffStat(&b, files, protocol.DiffStats{Files: 2, Additions: 401, Deletions: 400}, palette{})
	lines := strings.Split(b.String(), "\n")
	if !strings.HasSuffix(lines[0], "800 "+strings.Repeat("+", 20)+strings.Repeat("-", 20)) {
		t.Errorf("big = %q", lines[0])
	}
	if !strings.HasSuffix(lines[1], "  1 +") {
		t.Errorf("small keeps one mark: %q", lines[1])
	}
}

func TestPrintRefusalAndExitCodes(t *testing.T) {
	r := protocol.WorkspaceRefusal{
		Kind: protocol.RefusalDirty, WorkspaceID: "workspace-abc", Reason: "the worktree has uncommitted changes",
		Paths: []string{"a.go", "b/c.txt"}, PathsTruncated: true,
	}
	var b bytes.Buffer
	err := refusalError(&b, r.Err(), nil)
	want := "shardctl: refused: dirty: the worktree has uncommitted changes\n  a.go\n  b/c.txt\n  … (more paths not listed)\n"
	if b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitRefused || !ee.printed {
		t.Fatalf("err = %#v", err)
	}

	// A refusal decoded from the wire (data as a JSON object) is one too.
	wire := &protocol.Error{Code: protocol.CodeConflict, Message: "x", Data: map[string]any{"kind": "merge_conflict", "reason": "conflicts", "paths": []any{"f"}}}
	b.Reset()
	if err := refusalError(&b, wire, nil); !errors.As(err, &ee) || ee.code != exitRefused {
		t.Fatalf("wire refusal: %v", err)
	}
	if b.String() != "shardctl: refused: merge_conflict: conflicts\n  f\n" {
		t.Fatalf("wire refusal printed %q", b.String())
	}

	b.Reset()
	err = refusalError(&b, protocol.Errorf(protocol.CodeNotFound, "no workspace x"), nil)
	if !errors.As(err, &ee) || ee.code != exitNotFound || ee.printed || b.Len() != 0 {
		t.Fatalf("not found: %#v, printed %q", err, b.String())
	}
	// CONFLICT without typed data is an ordinary failure.
	err = refusalError(&b, protocol.Errorf(protocol.CodeConflict, "busy"), nil)
	if errors.As(err, &ee) {
		t.Fatalf("untyped conflict classified: %#v", err)
	}
}

func TestShortWorkspaceID(t *testing.T) {
	for in, want := range map[string]string{
		"workspace-0123456789abcdef": "workspace-01234567",
		"workspace-0123":             "workspace-0123",
		"other":                      "other",
	} {
		if got := shortWorkspaceID(in); got != want {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
}

// ---- Commands against a fake daemon ----

const (
	wsActive  = "workspace-aaaaaaaa11111111"
	wsRetired = "workspace-bbbbbbbb22222222"
)

func intp(n int) *int    { return &n }
func boolp(b bool) *bool { return &b }

var sampleWorkspaces = []protocol.WorkspaceInfo{
	{
		WorkspaceID: wsActive, Label: "feature x", Cwd: "/wt/feature-x", RepositoryCwd: "/src/app",
		Ownership: protocol.OwnershipManaged, State: protocol.WorkspaceStateActive, Branch: "shard/feature-x",
		BaseRef: "main", BaseSHA: "1111111111111111111111111111111111111111", IntegrationTarget: "main",
		HeadSHA: "2222222222222222222222222222222222222222", CreatedAt: 1_700_000_000_000, UpdatedAt: 1_700_000_100_000,
		AgentCount: 1,
	},
	{
		WorkspaceID: wsRetired, Cwd: "/wt/old", RepositoryCwd: "/src/app", Ownership: protocol.OwnershipManaged,
		State: protocol.WorkspaceStateRetired, Branch: "shard/old", IntegrationTarget: "main",
		HeadSHA: "3333333333333333333333333333333333333333", CreatedAt: 1_700_000_000_000, RetiredAt: 1_700_000_200_000,
		Tombstone: &protocol.WorkspaceTombstone{Branch: "shard/old", HeadSHA: "3333333333333333333333333333333333333333", Deleted: true},
	},
}

func refuse(c *daemonConn, h protocol.Header, r protocol.WorkspaceRefusal) {
	c.sendRaw(protocol.NewErrorResponse(h.ID, h.Type, r.Err()))
}

func workspaceDaemon(t *testing.T) *fakeDaemon {
	find := func(id string) (protocol.WorkspaceInfo, bool) {
		for _, w := range sampleWorkspaces {
			if w.WorkspaceID == id {
				return w, true
			}
		}
		return protocol.WorkspaceInfo{}, false
	}
	return newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		var probe struct {
			WorkspaceID string `json:"workspace_id"`
		}
		_ = json.Unmarshal(rec, &probe)
		ws, known := find(probe.WorkspaceID)
		if !known && h.Type != protocol.TypeWorkspaceList && h.Type != protocol.TypeWorkspaceCreate {
			c.respondError(h, protocol.CodeNotFound, "no workspace "+probe.WorkspaceID)
			return
		}
		switch h.Type {
		case protocol.TypeWorkspaceList:
			var m protocol.WorkspaceList
			_ = json.Unmarshal(rec, &m)
			var out []protocol.WorkspaceInfo
			for _, w := range sampleWorkspaces {
				if m.IncludeRetired || w.State != protocol.WorkspaceStateRetired {
					out = append(out, w.Summary())
				}
			}
			c.respond(h, protocol.WorkspaceListData{Workspaces: out})
		case protocol.TypeWorkspaceStatus:
			ws.AgentIDs = []string{"agent-01"}
			if ws.State == protocol.WorkspaceStateActive {
				ws.Ahead, ws.Behind, ws.Dirty = intp(2), intp(0), boolp(true)
			}
			c.respond(h, protocol.WorkspaceStatusData{Workspace: ws})
		case protocol.TypeWorkspaceCreate:
			var m protocol.WorkspaceCreate
			_ = json.Unmarshal(rec, &m)
			if m.Branch == "taken" {
				refuse(c, h, protocol.WorkspaceRefusal{Kind: protocol.RefusalBranchExists, Reason: "branch taken exists", Branch: "taken"})
				return
			}
			c.respond(h, protocol.WorkspaceCreateData{AgentID: "agent-new", SessionID: "session-1", Workspace: sampleWorkspaces[0]})
		case protocol.TypeWorkspaceAttach:
			c.respond(h, protocol.WorkspaceAttachData{AgentID: "agent-two", SessionID: "session-2", Workspace: ws})
		case protocol.TypeWorkspaceDiff:
			c.respond(h, protocol.WorkspaceDiffData{WorkspaceID: ws.WorkspaceID, Branch: ws.Branch, IntegrationTarget: "main",
				BaseSHA: ws.BaseSHA, Files: sampleDiff, Stats: sampleStats, Truncated: true})
		case protocol.TypeWorkspaceMerge:
			var m protocol.WorkspaceMerge
			_ = json.Unmarshal(rec, &m)
			if m.Strategy == protocol.MergeRebase {
				refuse(c, h, protocol.WorkspaceRefusal{Kind: protocol.RefusalMergeConflict, WorkspaceID: ws.WorkspaceID,
					Reason: "the rebase would conflict", Paths: []string{"main.go"}})
				return
			}
			c.respond(h, protocol.WorkspaceMergeData{Workspace: ws, Strategy: m.Strategy, IntegrationTarget: "main",
				PreviousSHA: "4444444444444444444444444444444444444444", MergedSHA: "5555555555555555555555555555555555555555", Stats: sampleStats})
		case protocol.TypeWorkspaceRetire:
			var m protocol.WorkspaceRetire
			_ = json.Unmarshal(rec, &m)
			switch m.Disposition() {
			case protocol.DispositionDeleteIfMerged:
				refuse(c, h, protocol.WorkspaceRefusal{Kind: protocol.RefusalConfirmationRequired, WorkspaceID: ws.WorkspaceID,
					Reason: "shard/feature-x has 2 commits not on main", ConfirmationDisposition: protocol.DispositionDeleteConfirmed})
			case protocol.DispositionKeep:
				ws.State = protocol.WorkspaceStateRetired
				ws.Tombstone = &protocol.WorkspaceTombstone{Branch: ws.Branch, HeadSHA: ws.HeadSHA}
				c.respond(h, protocol.WorkspaceRetireData{Workspace: ws})
			case protocol.DispositionDeleteConfirmed:
				ws.State = protocol.WorkspaceStateRetired
				ws.Tombstone = &protocol.WorkspaceTombstone{Branch: ws.Branch, HeadSHA: ws.HeadSHA, Deleted: true}
				c.respond(h, protocol.WorkspaceRetireData{Workspace: ws, BranchDeleted: true, Proof: protocol.ProofConfirmed})
			}
		}
	})
}

func TestWorkspaceLs(t *testing.T) {
	d := workspaceDaemon(t)
	r := runCtl(t, nil, d.path, "", "ws", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID LABEL STATE BRANCH TARGET AGENTS REPO" {
		t.Fatalf("table:\n%s", r.stdout)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "workspace-aaaaaaaa feature x active shard/feature-x main 1 /src/app" {
		t.Fatalf("row = %q", got)
	}

	r = runCtl(t, nil, d.path, "", "workspace", "ls", "--all", "-o", "wide", "--cwd", "/src/app/sub")
	if r.code != 0 || !strings.Contains(r.stdout, wsActive) || !strings.Contains(r.stdout, wsRetired) {
		t.Fatalf("wide --all: exit %d\n%s", r.code, r.stdout)
	}
	var m protocol.WorkspaceList
	recs := d.records(protocol.TypeWorkspaceList)
	if err := json.Unmarshal(recs[len(recs)-1], &m); err != nil || !m.IncludeRetired || m.Cwd != "/src/app/sub" {
		t.Fatalf("sent %s", recs[len(recs)-1])
	}

	r = runCtl(t, nil, d.path, "", "ws", "ls", "-o", "json")
	var data protocol.WorkspaceListData
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &data) != nil || len(data.Workspaces) != 1 || data.Workspaces[0].WorkspaceID != wsActive {
		t.Fatalf("json: exit %d\n%s", r.code, r.stdout)
	}
	if r := runCtl(t, nil, d.path, "", "ws", "ls", "-o", "bogus"); r.code != exitUsage {
		t.Fatalf("bad -o: exit %d", r.code)
	}
}

func TestWorkspaceShow(t *testing.T) {
	d := workspaceDaemon(t)
	// A unique prefix, as the table shows it.
	r := runCtl(t, nil, d.path, "", "ws", "show", "workspace-aaaaaaaa")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{wsActive, "feature x", "/wt/feature-x", "shard/feature-x", "main 111111111111", "2 ahead, 0 behind", "Dirty:", "yes", "agent-01"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCtl(t, nil, d.path, "", "ws", "show", wsRetired)
	if r.code != 0 || !strings.Contains(r.stdout, "/wt/old (removed)") || !strings.Contains(r.stdout, "branch shard/old at 3333333333333333333333333333333333333333 (deleted)") ||
		!strings.Contains(r.stdout, "git branch shard/old 3333333333333333333333333333333333333333") {
		t.Fatalf("tombstone: exit %d\n%s", r.code, r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "ws", "show", "workspace-nope")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Fatalf("not found: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "ws", "show", "workspace-", "-o", "json")
	if r.code != exitUsage || !strings.Contains(r.stderr, "ambiguous") {
		t.Fatalf("ambiguous: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestWorkspaceCreateAndAttach(t *testing.T) {
	d := workspaceDaemon(t)
	dir := t.TempDir()
	t.Chdir(dir)
	r := runCtl(t, nil, d.path, "", "ws", "create", "--label", "L", "--branch", "b1", "--base", "v1", "--target", "main",
		"--name", "n", "--model", "sim", "--mode", "build")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"workspace:  " + wsActive, "agent:      agent-new", "worktree:   /wt/feature-x"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("create lacks %q:\n%s", want, r.stdout)
		}
	}
	var m protocol.WorkspaceCreate
	if err := json.Unmarshal(d.records(protocol.TypeWorkspaceCreate)[0], &m); err != nil {
		t.Fatal(err)
	}
	if m.Cwd != dir || m.Label != "L" || m.Branch != "b1" || m.BaseRef != "v1" || m.IntegrationTarget != "main" ||
		m.Name != "n" || m.Model != "sim" || m.Mode != "build" {
		t.Fatalf("sent %+v", m)
	}
	r = runCtl(t, nil, d.path, "", "ws", "create", "--branch", "taken")
	if r.code != exitRefused || r.stderr != "shardctl: refused: branch_exists: branch taken exists\n" {
		t.Fatalf("refused create: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "ws", "create", "--branch", "-x")
	if r.code != exitUsage || len(d.records(protocol.TypeWorkspaceCreate)) != 2 {
		t.Fatalf("bad branch: exit %d", r.code)
	}

	r = runCtl(t, nil, d.path, "", "ws", "attach", wsActive, "--name", "second")
	if r.code != 0 || r.stdout != "agent-two\n" {
		t.Fatalf("attach: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	var a protocol.WorkspaceAttach
	_ = json.Unmarshal(d.records(protocol.TypeWorkspaceAttach)[0], &a)
	if a.WorkspaceID != wsActive || a.Name != "second" {
		t.Fatalf("attach sent %+v", a)
	}
}

func TestWorkspaceDiffCommand(t *testing.T) {
	d := workspaceDaemon(t)
	r := runCtl(t, nil, d.path, "", "ws", "diff", wsActive, "--max-bytes", "100")
	if r.code != 0 || r.stdout != wantUnified || !strings.Contains(r.stderr, "truncated") {
		t.Fatalf("exit %d stdout:\n%s\nstderr %q", r.code, r.stdout, r.stderr)
	}
	var m protocol.WorkspaceDiff
	_ = json.Unmarshal(d.records(protocol.TypeWorkspaceDiff)[0], &m)
	if m.MaxBytes == nil || *m.MaxBytes != 100 {
		t.Fatalf("sent %+v", m)
	}
	r = runCtl(t, nil, d.path, "", "ws", "diff", wsActive, "--stat")
	if r.code != 0 || !strings.HasSuffix(r.stdout, " 5 files changed, 3 insertions(+), 2 deletions(-)\n") || r.stderr != "" {
		t.Fatalf("stat: exit %d\n%s", r.code, r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "ws", "diff", wsActive, "-o", "json")
	var data protocol.WorkspaceDiffData
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &data) != nil || len(data.Files) != 5 || !data.Truncated {
		t.Fatalf("json: exit %d\n%s", r.code, r.stdout)
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Fatal("json has escape codes")
	}
	if r := runCtl(t, nil, d.path, "", "ws", "diff", wsActive, "--max-bytes", "0"); r.code != exitUsage {
		t.Fatalf("--max-bytes 0: exit %d", r.code)
	}
}

func TestWorkspaceMergeCommand(t *testing.T) {
	d := workspaceDaemon(t)
	r := runCtl(t, nil, d.path, "", "ws", "merge", wsActive)
	if r.code != 0 || r.stdout != "5555555555555555555555555555555555555555\n" || !strings.Contains(r.stderr, "squash into main") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	var m protocol.WorkspaceMerge
	_ = json.Unmarshal(d.records(protocol.TypeWorkspaceMerge)[0], &m)
	if m.Strategy != protocol.MergeSquash {
		t.Fatalf("default strategy sent %q", m.Strategy)
	}
	r = runCtl(t, nil, d.path, "", "ws", "merge", wsActive, "--strategy", "rebase")
	if r.code != exitRefused || r.stderr != "shardctl: refused: merge_conflict: the rebase would conflict\n  main.go\n" {
		t.Fatalf("conflict: exit %d stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"--strategy", "octopus"}, {"--strategy", "rebase", "-m", "msg"}} {
		if r := runCtl(t, nil, d.path, "", append([]string{"ws", "merge", wsActive}, args...)...); r.code != exitUsage {
			t.Errorf("%v: exit %d", args, r.code)
		}
	}
	if n := len(d.records(protocol.TypeWorkspaceMerge)); n != 2 {
		t.Fatalf("invalid merges reached the daemon: %d", n)
	}
}

func TestWorkspaceRetireCommand(t *testing.T) {
	d := workspaceDaemon(t)
	r := runCtl(t, nil, d.path, "", "ws", "retire", wsActive)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "shardctl: refused: confirmation_required: shard/feature-x has 2 commits not on main\n") ||
		!strings.Contains(r.stderr, "shardctl ws retire "+wsActive+" --force-delete") {
		t.Fatalf("default: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "ws", "retire", wsActive, "--force-delete")
	if r.code != 0 || !strings.Contains(r.stdout, "branch shard/feature-x deleted (confirmed)") ||
		!strings.Contains(r.stdout, "undo: git branch shard/feature-x 2222222222222222222222222222222222222222") {
		t.Fatalf("force: exit %d stdout %q", r.code, r.stdout)
	}
	r = runCtl(t, nil, d.path, "", "ws", "retire", wsActive, "--keep")
	if r.code != 0 || !strings.Contains(r.stdout, "branch shard/feature-x kept") {
		t.Fatalf("keep: exit %d stdout %q", r.code, r.stdout)
	}
	var got []protocol.BranchDisposition
	for _, rec := range d.records(protocol.TypeWorkspaceRetire) {
		var m protocol.WorkspaceRetire
		_ = json.Unmarshal(rec, &m)
		got = append(got, m.BranchDisposition)
	}
	if len(got) != 3 || got[0] != protocol.DispositionDeleteIfMerged || got[1] != protocol.DispositionDeleteConfirmed || got[2] != protocol.DispositionKeep {
		t.Fatalf("dispositions sent %v", got)
	}
	if r := runCtl(t, nil, d.path, "", "ws", "retire", wsActive, "--keep", "--force-delete"); r.code != exitUsage {
		t.Fatalf("exclusive flags: exit %d", r.code)
	}
	if r := runCtl(t, nil, d.path, "", "ws", "retire", "workspace-zzz"); r.code != exitNotFound {
		t.Fatalf("unknown: exit %d", r.code)
	}
}

func TestWorkspaceHelpDocumentsExitCodes(t *testing.T) {
	for _, sub := range []string{"ls", "show", "create", "attach", "diff", "merge", "retire"} {
		r := runCtl(t, nil, "", "", "ws", sub, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "8    refused") || !strings.Contains(r.stdout, "9    not found") {
			t.Errorf("%s --help: exit %d", sub, r.code)
		}
	}
}

// TestWorkspaceLsCluster: a cluster's workspaces (each with its node) get
// a NODE column, and the nodes whose workspaces are missing are named on
// stderr; a single shardd's have neither (TestWorkspaceLs).
func TestWorkspaceLsCluster(t *testing.T) {
	o := &workspaceLsOptions{g: &globalOptions{noColor: true}}
	var stdout, stderr strings.Builder
	err := o.print(&stdout, &stderr, protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{
		{WorkspaceID: "workspace-aaaaaaaa", Label: "here", State: protocol.WorkspaceStateActive, Branch: "b", Node: "n1"},
		{WorkspaceID: "workspace-bbbbbbbb", Label: "there", State: protocol.WorkspaceStateActive, Branch: "c", Node: "n2"},
	}, UnavailableNodes: []string{"n3"}})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID LABEL NODE STATE BRANCH TARGET AGENTS REPO" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "workspace-bbbbbbbb there n2 active c") {
		t.Fatalf("table:\n%s", stdout.String())
	}
	if stderr.String() != "(nodes unavailable, their workspaces not listed: n3)\n" {
		t.Fatalf("stderr %q", stderr.String())
	}
}
