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
