package daemon_test

import (
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
)

// TestToolSubprocessesDieWithTheirRuntime: the bash tool runs its command
// in a session of its own, so a runtime that crashes takes only the shell
// with it (Pdeathsig), not what the shell started. When the runtime is gone
// the daemon kills every process still carrying the agent's SHARD_AGENT_ID.
// (Found by the fault suite, package faults.)
func TestToolSubprocessesDieWithTheirRuntime(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, `sim: tool bash {"command":"sleep 1000; true"}`)
	ev := waitFor(t, c, isType(protocol.TypePermissionRequest, id))
	req := ev.Msg.(*protocol.PermissionRequest)
	if _, err := c.Request(ctx(t), &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: id},
		RequestID: req.RequestID, Decision: protocol.DecisionAllow}); err != nil {
		t.Fatal(err)
	}
	// The runtime, the tool's shell and its sleep.
	eventually(t, "tool subprocess running", func() bool { return len(runtimePIDs(t, id)) == 3 })
	rt := 0
	for _, pid := range runtimePIDs(t, id) {
		if parentOf(pid) == os.Getpid() { // the in-process daemon's child
			rt = pid
		}
	}
	if rt == 0 {
		t.Fatal("no runtime process among the agent's")
	}
	killPID(rt)
	waitFor(t, c, isAgentEvent(protocol.TypeAgentExited, id))
	eventually(t, "no process of the crashed runtime left", func() bool { return len(runtimePIDs(t, id)) == 0 })
}

// parentOf returns the parent pid of pid (0 if unknown).
func parentOf(pid int) int {
	st, err := procstat.Read(pid)
	if err != nil {
		return 0
	}
	return st.PPID
}
