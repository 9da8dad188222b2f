package daemon_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// TestStopVersusCompletionEndsInOneTerminalState races stops against runs
// that finish at once: every run ends in exactly one terminal state —
// completed when its end committed first, cancelled otherwise — and stays
// there.
func TestStopVersusCompletionEndsInOneTerminalState(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	const n = 30
	var wg sync.WaitGroup
	runs := make([]string, n)
	for i := 0; i < n; i++ {
		job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: fmt.Sprint("r", i), Task: "sim: say quick"})
		runs[i] = job.Runs[0].RunID
		wg.Add(1)
		go func(handle string) {
			defer wg.Done()
			// A stop may race the create's first transitions or the end.
			_, _ = c.Request(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: handle})
		}(job.JobID)
	}
	wg.Wait()
	res := waitRuns(t, c, parent, runs, "all", nil)
	first := map[string]protocol.RunState{}
	for _, r := range res.Runs {
		if r.State != protocol.RunCompleted && r.State != protocol.RunCancelled {
			t.Errorf("run %s ended %s", r.RunID, r.State)
		}
		first[r.RunID] = r.State
	}
	// Terminal is final: a second look (and a second stop) changes nothing.
	for _, id := range runs {
		_, _ = c.Request(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: id})
	}
	again := waitRuns(t, c, parent, runs, "all", secs(0))
	for _, r := range again.Runs {
		if first[r.RunID] != r.State {
			t.Errorf("run %s changed from %s to %s after being terminal", r.RunID, first[r.RunID], r.State)
		}
	}
}

func TestGlobalCapBoundsActiveRuns(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Jobs.MaxActive = 2 })
	c := h.dial()
	p1, p2 := h.create(c, nil), h.create(c, nil)
	var runs []string
	for _, p := range []string{p1, p2} {
		job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: p, Strategy: protocol.StrategyParallel,
			Tasks: []protocol.TaskSpec{{Name: "a", Task: "sim: sleep 300\nsim: say a"}, {Name: "b", Task: "sim: sleep 300\nsim: say b"}}})
		for _, r := range job.Runs {
			runs = append(runs, r.RunID)
		}
	}
	// Count live runs on every transition: never more than the cap.
	active, maxActive, done := 0, 0, 0
	waitFor(t, c, func(e client.Event) bool {
		ev, ok := e.Msg.(*protocol.SubagentRunChanged)
		if !ok {
			return false
		}
		switch {
		case ev.State == protocol.RunStarting:
			active++
		case ev.State.Terminal() && ev.PreviousState != protocol.RunQueued:
			active--
			done++
		}
		if active > maxActive {
			maxActive = active
		}
		return done == 4
	})
	if maxActive != 2 {
		t.Fatalf("at most %d runs were live at once, want the cap 2", maxActive)
	}
}

// TestTaskTextNeverLeavesThePrivateRecord searches every byte the daemon
// sent to a watching client and every log file for a task marker.
func TestTaskTextNeverLeavesThePrivateRecord(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	watcher := h.dial() // sees every broadcast
	parent := h.create(c, nil)
	attach(t, watcher, parent, protocol.RoleObserver)
	const marker = "PRIVATE-TASK-9c27"
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyChain,
		Tasks: []protocol.TaskSpec{{Name: "one", Task: "sim: say fine\n" + marker}, {Name: "two", Task: "sim: fail oops\n" + marker}, {Name: "three", Task: "sim: say x\n" + marker}}})
	waitRuns(t, c, parent, []string{job.JobID}, "all", nil)
	resp, err := c.Request(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: parent})
	if err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	seen.Write(resp.Data)
	var list protocol.JobsListData
	if err := c.Call(ctx(t), &protocol.JobsList{Header: hdr(protocol.TypeJobsList)}, &list); err != nil {
		t.Fatal(err)
	}
	// Drain what the watcher got, up to the parent's report turn.
	waitFor(t, watcher, func(e client.Event) bool {
		seen.Write(e.Raw)
		m, ok := e.Msg.(*protocol.TurnEnd)
		return ok && m.AgentID == parent
	})
	if bytes.Contains(seen.Bytes(), []byte(marker)) {
		t.Fatal("task text reached a client")
	}
	if strings.Contains(fmt.Sprint(list), marker) {
		t.Fatal("task text in jobs.list")
	}
	_ = filepath.WalkDir(h.cfg.LogDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(marker)) {
				t.Errorf("task text in log %s", p)
			}
		}
		return nil
	})
	if strings.Contains(h.log.String(), marker) {
		t.Error("task text in the daemon log")
	}
}
