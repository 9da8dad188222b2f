//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestShardctlAgentsPruneAndRm prunes a finished subagent through the real
// shardd and refuses the live parent.
func TestShardctlAgentsPruneAndRm(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d)
	var cr protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &cr)
	parent := cr.AgentID
	var job protocol.SubagentCreateData
	call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Name: "kid", Task: "sim: say hi"}, &job)
	child := job.Runs[0].AgentID
	d.ctlCode(0, "jobs", "wait", job.JobID, "--timeout", "20")

	// The finished child's runtime idles: not finished for prune until stopped.
	eventually(t, 10*time.Second, "child runtime up", func() bool { return len(runtimePIDs(t, child)) > 0 })
	var dry struct {
		Agents []protocol.AgentInfo `json:"agents"`
	}
	decode(t, d.mustCtl("", "agents", "prune", "--finished", "--older-than", "0s", "--dry-run", "-o", "json"), &dry)
	if len(dry.Agents) != 0 {
		t.Fatalf("prune candidates with the child's runtime up: %+v", dry.Agents)
	}
	d.mustCtl("", "agents", "terminate", child)
	eventually(t, 15*time.Second, "terminated runtime gone", func() bool { return len(runtimePIDs(t, child)) == 0 })
	sessions := filepath.Join(d.home, "sessions")
	before, err := os.ReadDir(sessions)
	if err != nil {
		t.Fatal(err)
	}

	// Until the parent accepted the completion report, the daemon refuses
	// (report_pending, exit 1); then prune removes the child.
	var res protocol.AgentRemoveData
	eventually(t, 15*time.Second, "child pruned", func() bool {
		r := d.ctl("", "agents", "prune", "--finished", "--older-than", "0s", "-o", "json")
		decode(t, r, &res)
		return r.code == 0 && len(res.Results) == 1
	})
	if res.Results[0].AgentID != child || !res.Results[0].Removed {
		t.Fatalf("prune = %+v", res)
	}
	after, err := os.ReadDir(sessions)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)-1 {
		t.Errorf("session directories: %d before, %d after", len(before), len(after))
	}
	var ls protocol.AgentListData
	decode(t, d.mustCtl("", "agents", "ls", "-o", "json"), &ls)
	if len(ls.Agents) != 1 || ls.Agents[0].AgentID != parent {
		t.Errorf("agents after prune = %+v", ls.Agents)
	}
	// The parent's runtime runs: rm refuses it, exit 1, and it stays.
	eventually(t, 15*time.Second, "parent runtime up", func() bool { return len(runtimePIDs(t, parent)) > 0 })
	r := d.ctlCode(1, "agents", "rm", parent, "-o", "json")
	decode(t, r, &res)
	if len(res.Results) != 1 || res.Results[0].Removed || res.Results[0].Kind != protocol.RemoveRunning {
		t.Errorf("rm of the running parent = %+v", res)
	}
}
