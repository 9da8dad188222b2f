package agent_test

import (
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// busyLoop is a runtime that never writes hello and always wants the CPU.
const busyLoop = "while :; do :; done"

// hogCPUs keeps every core busy at the test's own priority until the
// returned stop is called (or the test ends).
func hogCPUs(t *testing.T) (stop func()) {
	t.Helper()
	var hogs []*exec.Cmd
	stop = func() {
		for _, h := range hogs {
			_ = h.Process.Kill()
			_ = h.Wait()
		}
		hogs = nil
	}
	t.Cleanup(stop)
	for range runtime.NumCPU() {
		h := exec.Command("sh", "-c", busyLoop)
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		hogs = append(hogs, h)
	}
	return stop
}

// TestActorLevelStarvedStartGetsAnotherBound: a subagent runtime under
// SCHED_IDLE that is not ready by its readiness bound because other work
// kept every core busy is starved, not broken: it gets another bound
// instead of being killed (before, its run failed "runtime failed to
// start: signal: killed" whenever the machine was busy for the bound).
// Once it no longer waits for a CPU (here: stopped) and is still not
// ready, the next bound kills it as before.
func TestActorLevelStarvedStartGetsAnotherBound(t *testing.T) {
	sh := testhost.Tool(t, "sh") // stands in for a busy runtime
	stopHogs := hogCPUs(t)
	clk := newManualClock(t)
	f := newAgent(t, withClock(clk), func(d *agent.Deps, m *store.Agent) {
		m.ParentAgentID = "agent-parent" // a subagent child: SCHED_IDLE
		d.Runtime.ChildIdle = true
		d.Runtime.Path, d.Runtime.Args = sh, []string{"-c", busyLoop}
	})
	c := f.conn("unix")
	f.send(c, &protocol.AgentCreate{Header: f.header(protocol.TypeAgentCreate, "create-1"), Cwd: f.m.Cwd})
	f.statusChanged(protocol.RuntimeStarting)
	clk.wait(1)
	var pid int
	actortest.Eventually(t, "the busy runtime started", func() bool {
		pids := actortest.RuntimePIDs(t, f.m.AgentID)
		if len(pids) == 1 {
			pid = pids[0]
		}
		return pid != 0
	})
	actortest.Eventually(t, "the runtime waited for a CPU", func() bool {
		w, err := procs.RunQueueWait(pid)
		return err == nil && w >= 200*time.Millisecond
	})

	clk.Advance(actortest.Timeout) // the readiness bound, starved
	actortest.Eventually(t, "the bound started again", func() bool {
		return f.log.Contains("waiting for a CPU")
	})
	if f.log.Contains("runtime stop stage") {
		t.Fatalf("a starved runtime was stopped:\n%s", f.log.String())
	}
	clk.wait(1) // the readiness bound, armed again

	// No longer starved: stopped, it waits for no CPU. A bound or two
	// later (the first may still count the wait before the stop) it is
	// killed as not ready, and the create fails.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopHogs()
	for range 5 {
		clk.Advance(actortest.Timeout)
		actortest.Eventually(t, "the bound was handled", func() bool {
			return f.log.Contains("stop stage") || clk.Pending() == 1
		})
		if f.log.Contains("stop stage") {
			break
		}
	}
	rec := c.Take(t, actortest.ResponseTo("create-1"))
	if resp := rec.Response(t); resp.Success || resp.Error.Code != protocol.CodeRuntimeStartFailed ||
		!strings.Contains(resp.Error.Message, "not ready") {
		t.Fatalf("create = %s, want RUNTIME_START_FAILED, not ready", rec.Raw)
	}
}
