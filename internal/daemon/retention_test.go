package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func pruneJobs(t *testing.T, c *client.Conn, olderThan time.Duration, dry bool) protocol.JobsPruneData {
	t.Helper()
	var data protocol.JobsPruneData
	if err := c.Call(ctx(t), &protocol.JobsPrune{Header: hdr(protocol.TypeJobsPrune), OlderThanMs: olderThan.Milliseconds(), DryRun: dry}, &data); err != nil {
		t.Fatalf("jobs.prune: %v", err)
	}
	return data
}

func jobShown(t *testing.T, c *client.Conn, id string) bool {
	t.Helper()
	_, err := c.Request(ctx(t), &protocol.JobsShow{Header: hdr(protocol.TypeJobsShow), Handle: id})
	if err != nil && protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("jobs.show %s: %v", id, err)
	}
	return err == nil
}

// finishedJob runs one task to completion under parent (attached by c),
// waits for its report to reach the parent, and stops the child's runtime.
func finishedJob(t *testing.T, c *client.Conn, parent, name string, stop bool) protocol.SubagentCreateData {
	t.Helper()
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: name, Task: "sim: say " + name})
	if res := waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "", nil); res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("wait = %+v", res)
	}
	waitFor(t, c, func(e client.Event) bool {
		m, ok := e.Msg.(*protocol.MessageComplete)
		return ok && m.AgentID == parent && strings.Contains(textOf(m.Message), "[subagent report]") && strings.Contains(textOf(m.Message), name)
	})
	if stop {
		child := job.Runs[0].AgentID
		if _, err := c.Request(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: child}}); err != nil {
			t.Fatalf("terminate child: %v", err)
		}
		eventually(t, "the child's runtime stopped", func() bool {
			return agentsByID(t, c)[child].RuntimeState == protocol.RuntimeStopped
		})
	}
	return job
}

// jobs.prune removes a finished job whose report was delivered, with its
// stopped child and the child's session directory; it keeps a job whose
// child still runs and an unfinished one; its dry run changes nothing.
func TestJobsPruneRemovesFinished(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	done := finishedJob(t, c, parent, "alpha", true)
	liveChild := finishedJob(t, c, parent, "beta", false) // its runtime idles on
	open := slowChain(t, c, parent)
	child := done.Runs[0].AgentID
	before := sessionDirs(t, h.cfg.SessionsDir())

	// The report is deleted just after its delivery: until then the job
	// is kept, which the dry run shows as nothing to remove.
	var dry protocol.JobsPruneData
	eventually(t, "the finished job prunable", func() bool {
		dry = pruneJobs(t, c, 0, true)
		return len(dry.JobIDs) > 0
	})
	if !dry.DryRun || !slices.Equal(dry.JobIDs, []string{done.JobID}) || !slices.Equal(dry.AgentIDs, []string{child}) {
		t.Fatalf("dry run = %+v; want only %s and its child %s", dry, done.JobID, child)
	}
	if !jobShown(t, c, done.JobID) {
		t.Fatal("the dry run removed the job")
	}
	if _, ok := agentsByID(t, c)[child]; !ok {
		t.Fatal("the dry run removed the child")
	}
	if got := sessionDirs(t, h.cfg.SessionsDir()); len(got) != len(before) {
		t.Fatalf("the dry run changed the session directories: %v, before %v", got, before)
	}
	// Nothing ended an hour ago.
	if got := pruneJobs(t, c, time.Hour, false); len(got.JobIDs) != 0 || len(got.AgentIDs) != 0 {
		t.Fatalf("prune older than 1h = %+v; want nothing", got)
	}

	got := pruneJobs(t, c, 0, false)
	if got.DryRun || !slices.Equal(got.JobIDs, []string{done.JobID}) || !slices.Equal(got.AgentIDs, []string{child}) {
		t.Fatalf("prune = %+v; want %s and %s", got, done.JobID, child)
	}
	ev := waitFor(t, c, isType(protocol.TypeAgentRemoved, child)).Msg.(*protocol.AgentRemoved)
	if ev.SessionID == "" || !before[ev.SessionID] {
		t.Fatalf("agent_removed = %+v; session dirs before = %v", ev, before)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.SessionsDir(), ev.SessionID)); !os.IsNotExist(err) {
		t.Fatalf("session directory after prune: %v", err)
	}
	if jobShown(t, c, done.JobID) {
		t.Fatal("jobs.show still finds the pruned job")
	}
	if _, ok := agentsByID(t, c)[child]; ok {
		t.Fatal("agent.list still has the pruned child")
	}
	for _, id := range []string{liveChild.JobID, open.JobID} {
		if !jobShown(t, c, id) {
			t.Fatalf("job %s was removed", id)
		}
	}
	ids := agentsByID(t, c)
	for _, id := range []string{parent, liveChild.Runs[0].AgentID, open.Runs[0].AgentID, open.Runs[1].AgentID} {
		if _, ok := ids[id]; !ok {
			t.Fatalf("agent %s was removed", id)
		}
	}

	// Gone for good: a restart finds neither.
	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	if jobShown(t, c2, done.JobID) {
		t.Fatal("the pruned job came back after a restart")
	}
	if !jobShown(t, c2, liveChild.JobID) {
		t.Fatal("the kept job is gone after a restart")
	}
}

// jobs.retention is off by default: a finished job stays across starts.
// Set, the sweep at start removes the finished jobs older than it, with
// their stopped children.
func TestJobsRetentionSweep(t *testing.T) {
	h := start(t, nil)
	if h.cfg.Jobs.Retention != 0 {
		t.Fatalf("jobs.retention defaults to %v; want 0 (off)", h.cfg.Jobs.Retention)
	}
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	done := finishedJob(t, c, parent, "gamma", true)
	child := done.Runs[0].AgentID
	eventually(t, "the finished job prunable", func() bool {
		return len(pruneJobs(t, c, 0, true).JobIDs) == 1
	})

	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	if !jobShown(t, c2, done.JobID) {
		t.Fatal("a finished job was removed with retention off")
	}
	if got := pruneJobs(t, c2, 0, true); !slices.Equal(got.JobIDs, []string{done.JobID}) {
		t.Fatalf("dry run after a restart with retention off = %+v; want the job still there", got)
	}

	h2.d.Shutdown(false)
	cfg := *h.cfg
	cfg.Jobs.Retention = time.Millisecond
	h3 := startWith(t, &cfg)
	c3 := h3.dial()
	eventually(t, "the sweep removed the job", func() bool { return !jobShown(t, c3, done.JobID) })
	eventually(t, "the sweep removed the child", func() bool {
		_, ok := agentsByID(t, c3)[child]
		return !ok
	})
	if _, ok := agentsByID(t, c3)[parent]; !ok {
		t.Fatal("the sweep removed the parent")
	}
}
