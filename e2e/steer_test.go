//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestShardctlJobsSteer: `shardctl jobs steer` into a run's turn in flight
// answers once the message reached the child's model, the run records the
// steer, and a steer of an ended run exits 1 with CONFLICT. The child's
// turn is held at two read tool calls on named pipes, so the steer is
// queued in the runtime before the turn can reach a provider boundary.
func TestShardctlJobsSteer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d)
	cwd := shortTemp(t)
	for _, f := range []string{"f1", "f2"} {
		if err := syscall.Mkfifo(filepath.Join(cwd, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var cr protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &cr)
	var job protocol.SubagentCreateData
	call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: cr.AgentID, Name: "held",
		Task: "sim: tool read {\"path\":\"f1\"}\nsim: tool read {\"path\":\"f2\"}\nsim: say base"}, &job)
	run := job.Runs[0]
	show := func() protocol.OpJob {
		var j protocol.OpJob
		decode(t, d.mustCtl("", "jobs", "show", run.RunID, "-o", "json"), &j)
		return j
	}
	eventually(t, 20*time.Second, "run active", func() bool { return show().Runs[0].State == protocol.RunActive })

	steer := startProc(t, d.ctlCmd("jobs", "steer", run.Alias, "sim:", "say", "steered"))
	t.Cleanup(steer.kill)
	logPath := filepath.Join(d.logDir(), "shardd.log")
	eventually(t, 20*time.Second, "steer sent to the child", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "parent steer sent into a leased run")
	})
	for _, f := range []string{"f1", "f2"} { // each open waits for the tool's
		w, err := os.OpenFile(filepath.Join(cwd, f), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	if st := steer.waitExit(t, 20*time.Second); st.ExitCode() != 0 || !strings.HasPrefix(steer.stdout.String(), "Injected into turn ") {
		t.Fatalf("jobs steer exited %d\nstdout: %s\nstderr: %s", st.ExitCode(), steer.stdout.String(), steer.stderr.String())
	}
	d.ctlCode(0, "jobs", "wait", run.RunID, "--timeout", "20")
	j := show()
	if s := j.Runs[0].Steers; j.Runs[0].State != protocol.RunCompleted || len(s) != 1 || s[0].Source != protocol.SteerSourceParent ||
		s[0].Status != protocol.SteerInjected || s[0].TurnID == "" {
		b, _ := json.Marshal(j.Runs[0])
		t.Fatalf("run after the steer: %s", b)
	}

	// The run has ended: nothing to steer, and the message is not kept.
	r := d.ctlCode(1, "jobs", "steer", run.Alias, "too", "late")
	if !strings.HasPrefix(r.stderr, "shardctl: CONFLICT: ") {
		t.Fatalf("steer of an ended run: stderr %q", r.stderr)
	}
}
