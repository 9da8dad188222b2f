//go:build linux

package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// shardctl jobs prune against the real shardd: the dry run lists the
// finished job and its stopped subagent and changes nothing; the prune
// removes both; an unfinished job stays throughout.
func TestShardctlJobsPrune(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d)
	var cr protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &cr)
	parent := cr.AgentID
	var done, open protocol.SubagentCreateData
	call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Name: "kid", Task: "sim: say hi"}, &done)
	call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Name: "slow", Task: "sim: sleep 60000"}, &open)
	child := done.Runs[0].AgentID
	d.ctlCode(0, "jobs", "wait", done.JobID, "--timeout", "20")
	eventually(t, 10*time.Second, "child runtime up", func() bool { return len(runtimePIDs(t, child)) > 0 })
	d.mustCtl("", "agents", "terminate", child)
	eventually(t, 15*time.Second, "terminated runtime gone", func() bool { return len(runtimePIDs(t, child)) == 0 })

	d.ctlCode(2, "jobs", "prune") // --older-than is required
	var dry protocol.JobsPruneData
	// The report is forgotten just after the parent took it: until then
	// the job is kept.
	eventually(t, 15*time.Second, "the finished job prunable", func() bool {
		decode(t, d.mustCtl("", "jobs", "prune", "--older-than", "0s", "--dry-run", "-o", "json"), &dry)
		return len(dry.JobIDs) > 0
	})
	if !dry.DryRun || !slices.Equal(dry.JobIDs, []string{done.JobID}) || !slices.Equal(dry.AgentIDs, []string{child}) {
		t.Fatalf("dry run = %+v; want %s and %s", dry, done.JobID, child)
	}
	d.ctlCode(0, "jobs", "show", done.JobID)
	if r := d.mustCtl("", "jobs", "prune", "--older-than", "1h"); !strings.Contains(r.stderr, "Nothing to prune.") {
		t.Errorf("prune --older-than 1h: %q", r.stderr)
	}

	r := d.mustCtl("", "jobs", "prune", "--older-than", "0s")
	for _, want := range []string{"job", done.JobID, "agent", child} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("prune table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, open.JobID) {
		t.Errorf("prune removed the unfinished job:\n%s", r.stdout)
	}
	d.ctlCode(1, "jobs", "show", done.JobID)
	d.ctlCode(0, "jobs", "show", open.JobID)
	var ls protocol.AgentListData
	decode(t, d.mustCtl("", "agents", "ls", "--parent", parent, "-o", "json"), &ls)
	if len(ls.Agents) != 1 || ls.Agents[0].AgentID != open.Runs[0].AgentID {
		t.Errorf("agents after prune = %+v; want only the unfinished job's", ls.Agents)
	}
}
