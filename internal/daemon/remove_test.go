package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func removeAgents(t *testing.T, c *client.Conn, ids ...string) []protocol.AgentRemoveResult {
	t.Helper()
	var data protocol.AgentRemoveData
	if err := c.Call(ctx(t), &protocol.AgentRemove{Header: hdr(protocol.TypeAgentRemove), AgentIDs: ids}, &data); err != nil {
		t.Fatalf("agent.remove: %v", err)
	}
	if len(data.Results) != len(ids) {
		t.Fatalf("agent.remove results = %+v, want %d", data.Results, len(ids))
	}
	return data.Results
}

func agentsByID(t *testing.T, c *client.Conn) map[string]protocol.AgentInfo {
	t.Helper()
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: hdr(protocol.TypeAgentList)}, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]protocol.AgentInfo{}
	for _, a := range list.Agents {
		out[a.AgentID] = a
	}
	return out
}

func sessionDirs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

func TestAgentRemoveFinishedSubagent(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "done", Task: "sim: say finished"})
	child := job.Runs[0].AgentID
	if res := waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "", nil); res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("wait = %+v", res)
	}
	waitFor(t, c, func(e client.Event) bool {
		m, ok := e.Msg.(*protocol.MessageComplete)
		return ok && m.AgentID == parent && strings.Contains(textOf(m.Message), "[subagent report]")
	})
	// A finished child's runtime idles on: a live one is refused, so stop it.
	if r := removeAgents(t, c, child)[0]; r.Removed || r.Kind != protocol.RemoveRunning {
		t.Fatalf("remove idle-running child = %+v", r)
	}
	if _, err := c.Request(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: child}}); err != nil {
		t.Fatalf("terminate child: %v", err)
	}
	eventually(t, "the child's runtime stopped", func() bool {
		return agentsByID(t, c)[child].RuntimeState == protocol.RuntimeStopped
	})
	before := sessionDirs(t, h.cfg.SessionsDir())
	// Its stderr log, and a rotated file of it, go with it; the parent's
	// log stays.
	childLog, parentLog := h.cfg.AgentLogPath(child), h.cfg.AgentLogPath(parent)
	for _, p := range []string{childLog, parentLog} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("agent log before remove: %v", err)
		}
	}
	if err := os.WriteFile(childLog+".1", []byte("older\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The report is deleted just after its delivery: until then the
	// removal is refused as report_pending, which is also a refusal to test.
	var res protocol.AgentRemoveResult
	eventually(t, "the child removable", func() bool {
		res = removeAgents(t, c, child)[0]
		if !res.Removed && res.Kind != protocol.RemoveReport {
			t.Fatalf("remove finished child = %+v", res)
		}
		return res.Removed
	})
	ev := waitFor(t, c, isType(protocol.TypeAgentRemoved, child)).Msg.(*protocol.AgentRemoved)
	if ev.SessionID == "" || !before[ev.SessionID] {
		t.Fatalf("agent_removed = %+v; session dirs before = %v", ev, before)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.SessionsDir(), ev.SessionID)); !os.IsNotExist(err) {
		t.Fatalf("session directory after remove: %v", err)
	}
	for _, p := range []string{childLog, childLog + ".1"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s after remove: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(parentLog); err != nil {
		t.Fatalf("the parent's log after its child's remove: %v", err)
	}
	if a, ok := agentsByID(t, c)[child]; ok {
		t.Fatalf("agent.list still has the removed child: %+v", a)
	}
	if _, ok := agentsByID(t, c)[parent]; !ok {
		t.Fatal("the parent went with its child")
	}
	// A second removal finds nothing.
	if again := removeAgents(t, c, child)[0]; again.Removed || again.Error != protocol.CodeNotFound {
		t.Fatalf("second remove = %+v", again)
	}

	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	if a, ok := agentsByID(t, c2)[child]; ok {
		t.Fatalf("the removed child came back after a restart: %+v", a)
	}
	if _, ok := agentsByID(t, c2)[parent]; !ok {
		t.Fatal("the parent is gone after a restart")
	}
}

func TestAgentRemoveRefusesLiveAndNeeded(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil) // its runtime runs from agent.create on
	job := slowChain(t, c, parent)
	first, second := job.Runs[0], job.Runs[1]

	got := removeAgents(t, c, parent, first.AgentID, second.AgentID, "agent-nope")
	if r := got[0]; r.Removed || r.Error != protocol.CodeConflict || r.Kind != protocol.RemoveRunning {
		t.Errorf("remove running parent = %+v", r)
	}
	if r := got[1]; r.Removed || r.Error != protocol.CodeConflict || r.Kind != protocol.RemoveRunning {
		t.Errorf("remove active child = %+v", r)
	}
	// The queued step's runtime is stopped, but its job has not ended.
	if r := got[2]; r.Removed || r.Error != protocol.CodeConflict || r.Kind != protocol.RemoveJobOpen || !strings.Contains(r.Reason, job.JobID) {
		t.Errorf("remove queued child of an open job = %+v", r)
	}
	if r := got[3]; r.Removed || r.Error != protocol.CodeNotFound {
		t.Errorf("remove unknown = %+v", r)
	}
	ids := agentsByID(t, c)
	for _, id := range []string{parent, first.AgentID, second.AgentID} {
		if _, ok := ids[id]; !ok {
			t.Errorf("refused agent %s is gone", id)
		}
	}
	// The refused queued step still runs when its turn comes: stop the job
	// and it is cancelled, not lost.
	if _, err := c.Request(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: job.JobID}); err != nil {
		t.Fatal(err)
	}
	if res := waitRuns(t, c, parent, []string{job.JobID}, "all", nil); res.Runs[1].State != protocol.RunCancelled {
		t.Fatalf("after stop = %+v", res)
	}
	// An empty request is refused whole.
	if _, err := c.Request(ctx(t), &protocol.AgentRemove{Header: hdr(protocol.TypeAgentRemove)}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("empty agent.remove: %v", err)
	}
}
