//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func call(t *testing.T, c *client.Conn, msg protocol.Typed, data any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Call(ctx, msg, data); err != nil {
		t.Fatalf("%s: %v", msg.Head().Type, err)
	}
}

func dialRaw(t *testing.T, d *daemon) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		for range c.Events() {
		}
	}()
	return c
}

func waitAll(t *testing.T, c *client.Conn, parent string, handles []string) protocol.SubagentWaitData {
	t.Helper()
	zero := 0.0
	var data protocol.SubagentWaitData
	call(t, c, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parent, Handles: handles, Timeout: &zero}, &data)
	return data
}

// TestSIGKILLWithActiveRunsReconciles kills shardd with 1, 8 and 32 active
// runs and a chain at its second step, round after round, and checks the
// restart rules (docs/protocol.md §10.3): nothing left starting/active, later
// chain steps never prompted, no record lost, each ended run reported once.
func TestSIGKILLWithActiveRunsReconciles(t *testing.T) {
	home := newHome(t)
	flags := []string{"--jobs.max-active", "64", "--jobs.max-active-per-parent", "64", "--jobs.max-tasks", "64"}
	var parent, parentSession string
	var allJobs []string
	reported := map[string]int{} // run id → report count seen in the parent's transcript
	for round, n := range []int{1, 8, 32} {
		d := startDaemonAt(t, home, flags...)
		c := dialRaw(t, d)
		if parent == "" {
			var cr protocol.AgentCreateData
			call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &cr)
			parent = cr.AgentID
		}
		tasks := make([]protocol.TaskSpec, n)
		for i := range tasks {
			tasks[i] = protocol.TaskSpec{Name: fmt.Sprintf("p%d", i), Task: "sim: sleep 60000"}
		}
		var par, chain protocol.SubagentCreateData
		call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Strategy: protocol.StrategyParallel, Tasks: tasks}, &par)
		call(t, c, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent, Strategy: protocol.StrategyChain,
			Tasks: []protocol.TaskSpec{{Name: "one", Task: "sim: say one"}, {Name: "two", Task: "sim: sleep 60000"}, {Name: "three", Task: "sim: say never"}}}, &chain)
		allJobs = append(allJobs, par.JobID, chain.JobID)

		// Everything that can run is active: n parallel runs and chain step 2.
		eventually(t, 30*time.Second, fmt.Sprintf("round %d: runs active", round), func() bool {
			p := waitAll(t, c, parent, []string{par.JobID})
			ch := waitAll(t, c, parent, []string{chain.JobID})
			for _, r := range p.Runs {
				if r.State != protocol.RunActive {
					return false
				}
			}
			return ch.Runs[0].State == protocol.RunCompleted && ch.Runs[1].State == protocol.RunActive
		})
		var children []string
		for _, r := range append(par.Runs, chain.Runs...) {
			children = append(children, r.AgentID)
		}
		if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		d.waitExit(t, 10*time.Second)
		eventually(t, 10*time.Second, "children died with the daemon", func() bool {
			for _, id := range children {
				if len(runtimePIDs(t, id)) > 0 {
					return false
				}
			}
			return true
		})

		d2 := startDaemonAt(t, home, flags...)
		c2 := dialRaw(t, d2)
		p := waitAll(t, c2, parent, []string{par.JobID})
		for _, r := range p.Runs {
			if r.State != protocol.RunInterrupted || r.EndedAt == 0 {
				t.Fatalf("round %d: parallel run after restart = %+v", round, r)
			}
		}
		ch := waitAll(t, c2, parent, []string{chain.JobID})
		if ch.Runs[0].State != protocol.RunCompleted || ch.Runs[1].State != protocol.RunInterrupted || ch.Runs[2].State != protocol.RunCancelled {
			t.Fatalf("round %d: chain after restart = %+v", round, ch.Runs)
		}
		// The step after the break was never prompted: its runtime never
		// even started (it would have left a stderr log).
		if _, err := os.Stat(filepath.Join(home, "logs", "agents", chain.Runs[2].AgentID+".log")); !os.IsNotExist(err) {
			t.Fatalf("round %d: chain step 3 was started (%v)", round, err)
		}
		// No record lost.
		var st protocol.SubagentStatusData
		call(t, c2, &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}, &st)
		if len(st.Jobs) != len(allJobs) {
			t.Fatalf("round %d: %d jobs after restart, want %d", round, len(st.Jobs), len(allJobs))
		}
		for _, j := range st.Jobs {
			for _, r := range j.Runs {
				if r.State == protocol.RunStarting || r.State == protocol.RunActive {
					t.Fatalf("round %d: run %s left %s", round, r.RunID, r.State)
				}
			}
		}
		// Each run ended by the restart is reported to the parent once.
		ended := []string{chain.Runs[1].RunID, chain.Runs[2].RunID}
		for _, r := range par.Runs {
			ended = append(ended, r.RunID)
		}
		if parentSession == "" {
			parentSession = sessionOf(t, home, parent)
		}
		eventually(t, 60*time.Second, fmt.Sprintf("round %d: reports delivered", round), func() bool {
			counts := reportCounts(t, home, parentSession)
			for _, id := range ended {
				if counts[id] == 0 {
					return false
				}
			}
			return true
		})
		counts := reportCounts(t, home, parentSession)
		for _, id := range ended {
			if counts[id] != 1 {
				t.Fatalf("round %d: run %s reported %d times", round, id, counts[id])
			}
			reported[id] = counts[id]
		}
		for id, was := range reported {
			if counts[id] != was {
				t.Fatalf("round %d: run %s of an earlier round reported again (%d → %d)", round, id, was, counts[id])
			}
		}
		d2.kill()
	}
}

// sessionOf finds the parent's session: the only transcript holding
// completion reports (children never receive any here).
func sessionOf(t *testing.T, home, _ string) string {
	t.Helper()
	var found string
	eventually(t, 30*time.Second, "parent transcript", func() bool {
		entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(home, "sessions", e.Name(), "session.jsonl"))
			if strings.Contains(string(b), "[subagent report]") {
				found = e.Name()
				return true
			}
		}
		return false
	})
	return found
}

// reportCounts counts, per run id, the user messages of a transcript that
// are completion reports.
func reportCounts(t *testing.T, home, session string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "sessions", session, "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		var m protocol.Message
		if json.Unmarshal([]byte(line), &m) != nil || m.Role != "user" {
			continue
		}
		for _, blk := range m.Content {
			const prefix = "[subagent report] run "
			if i := strings.Index(blk.Text, prefix); i >= 0 {
				rest := blk.Text[i+len(prefix):]
				if j := strings.IndexByte(rest, ' '); j > 0 {
					counts[rest[:j]]++
				}
			}
		}
	}
	return counts
}

// TestRestartKillsWhatACrashedDaemonLeft: a runtime's own children (tool
// subprocesses) are in its process group but do not die with the daemon;
// the next daemon kills that group — and only if the recorded process is
// really the one it started.
func TestRestartKillsWhatACrashedDaemonLeft(t *testing.T) {
	home := newHome(t)
	script := filepath.Join(shortTemp(t), "rt.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 1000 &\nexec "+sharddBin+" agent --headless\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--runtime.command", script}
	d := startDaemonAt(t, home, flags...)
	c := dialRaw(t, d)
	var cr protocol.AgentCreateData
	call(t, c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}, &cr)
	eventually(t, 10*time.Second, "runtime and its child", func() bool { return len(runtimePIDs(t, cr.AgentID)) == 2 })

	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 10*time.Second)
	// The runtime died with the daemon; its child did not.
	eventually(t, 10*time.Second, "runtime gone, child left", func() bool { return len(runtimePIDs(t, cr.AgentID)) == 1 })

	startDaemonAt(t, home, flags...)
	eventually(t, 10*time.Second, "leftover child killed by the next daemon", func() bool { return len(runtimePIDs(t, cr.AgentID)) == 0 })
}
