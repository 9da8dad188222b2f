package daemon_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
)

// statOf reads a stat file (/proc/self/stat, /proc/<pid>/task/<tid>/stat).
func statOf(t *testing.T, statPath string) procstat.Stat {
	t.Helper()
	st, err := procstat.ReadFile(statPath)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// niceOf is the niceness in a stat file.
func niceOf(t *testing.T, statPath string) int { return statOf(t, statPath).Nice }

// policyOf is the scheduling policy in a stat file.
func policyOf(t *testing.T, statPath string) int { return statOf(t, statPath).Policy }

const schedIdle = 5 // SCHED_IDLE

// runtimeThreads is the stat file of every thread of agent id's one
// runtime process.
func runtimeThreads(t *testing.T, id string) []string {
	t.Helper()
	pids := runtimePIDs(t, id)
	if len(pids) != 1 {
		t.Fatalf("runtime processes of %s: %v, want one", id, pids)
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pids[0]))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads of the runtime: %v, %v (a Go runtime has several)", tasks, err)
	}
	return tasks
}

// TestSubagentRuntimesRunNiced: by default (jobs.nice 10, jobs.sched_idle
// true) every thread of a subagent child's real runtime runs that much
// nicer than the daemon and under SCHED_IDLE, while its parent (an agent a
// client created) runs at the daemon's own priority and policy, and so does
// the daemon; each setting turns its part off alone.
func TestSubagentRuntimesRunNiced(t *testing.T) {
	own := niceOf(t, "/proc/self/stat")
	ownPolicy := policyOf(t, "/proc/self/stat")
	for _, tc := range []struct {
		name     string
		nice     int   // -1: the default
		idle     *bool // nil: the default
		want     int
		wantIdle bool
	}{
		{"default", -1, nil, min(19, own+10), true},
		{"nice only", -1, new(false), min(19, own+10), false},
		{"off", 0, new(false), own, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(c *config.Config) {
				if tc.nice >= 0 {
					c.Jobs.Nice = tc.nice
				}
				if tc.idle != nil {
					c.Jobs.SchedIdle = *tc.idle
				}
			})
			c := h.dial()
			parent := h.create(c, nil)
			attach(t, c, parent, "")
			prompt(t, c, parent, "sim: say ok")
			waitFor(t, c, isType(protocol.TypeTurnEnd, parent))
			job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "bg", Task: "sim: say done"})
			res := waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "", nil)
			if len(res.Runs) != 1 || res.Runs[0].State != protocol.RunCompleted {
				t.Fatalf("wait = %+v", res)
			}
			// Both runtimes stay up (idle) until the idle timeout.
			for _, task := range runtimeThreads(t, parent) {
				if n, p := niceOf(t, task), policyOf(t, task); n != own || p != ownPolicy {
					t.Errorf("a thread of the parent's runtime runs at nice %d, policy %d, want the daemon's %d, %d", n, p, own, ownPolicy)
				}
			}
			for _, task := range runtimeThreads(t, job.Runs[0].AgentID) {
				if n := niceOf(t, task); n != tc.want {
					t.Errorf("a thread of the child's runtime runs at nice %d, want %d", n, tc.want)
				}
				if idle := policyOf(t, task) == schedIdle; idle != tc.wantIdle {
					t.Errorf("a thread of the child's runtime: SCHED_IDLE %v, want %v", idle, tc.wantIdle)
				}
			}
			if n, p := niceOf(t, "/proc/self/stat"), policyOf(t, "/proc/self/stat"); n != own || p != ownPolicy {
				t.Errorf("the daemon's niceness or policy changed to %d, %d from %d, %d", n, p, own, ownPolicy)
			}
		})
	}
}
