package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestJobsShowRunWorkspaces: jobs show lists the workspaces of isolated
// runs (with their diff stat once measured), and nothing for jobs without.
func TestJobsShowRunWorkspaces(t *testing.T) {
	j := jobQueued
	j.Runs = []protocol.OpRun{j.Runs[0], j.Runs[1]}
	j.Runs[0].Workspace = &protocol.RunWorkspace{WorkspaceID: "workspace-a", Branch: "shard/lint-1", Cwd: "/wt/a",
		DiffStat: &protocol.DiffStats{Files: 1, Additions: 2, Deletions: 3}}
	j.Runs[1].Workspace = &protocol.RunWorkspace{WorkspaceID: "workspace-b", Branch: "shard/test-2", Cwd: "/wt/b"}
	var b bytes.Buffer
	if err := writeJobDetail(&b, j, nil, testClock, palette{}, 200); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"WORKSPACE", "workspace-a  shard/lint-1  /wt/a  1 file(s) +2 -3", "workspace-b  shard/test-2  /wt/b  -"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := writeJobDetail(&b, jobQueued, nil, testClock, palette{}, 200); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "WORKSPACE") {
		t.Errorf("a job without workspaces lists some:\n%s", b.String())
	}
}

// TestJobsShowRunNodes: in a cluster, jobs show says on which node each
// run ran (a NODE column after AGENT_ID); a single shardd's runs have no
// node, and the table has no such column.
func TestJobsShowRunNodes(t *testing.T) {
	j := jobQueued
	j.Runs = []protocol.OpRun{j.Runs[0], j.Runs[1]}
	j.Runs[0].Node, j.Runs[1].Node = "n3", "n1"
	var b bytes.Buffer
	if err := writeJobDetail(&b, j, nil, testClock, palette{}, 200); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var head, first string
	for i, l := range lines {
		if strings.HasPrefix(l, "#  NAME") {
			head, first = l, lines[i+1]
			break
		}
	}
	col := strings.Index(head, "NODE")
	if col < 0 || strings.Index(head, "AGENT_ID") > col || !strings.HasPrefix(first[col:], "n3 ") {
		t.Fatalf("jobs show of runs on nodes:\n%s", b.String())
	}
	b.Reset()
	if err := writeJobDetail(&b, jobQueued, nil, testClock, palette{}, 200); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "NODE") {
		t.Errorf("a single shardd's job shows a NODE column:\n%s", b.String())
	}
}
