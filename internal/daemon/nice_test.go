package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// niceOf is the niceness in a /proc/.../stat file (field 19; the command
// name in field 2 may hold spaces, so fields are counted after its ")").
func niceOf(t *testing.T, statPath string) int {
	t.Helper()
	b, err := os.ReadFile(statPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// threadNices is the niceness of every thread of agent id's one runtime
// process.
func threadNices(t *testing.T, id string) []int {
	t.Helper()
	pids := runtimePIDs(t, id)
	if len(pids) != 1 {
		t.Fatalf("runtime processes of %s: %v, want one", id, pids)
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pids[0]))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads of the runtime: %v, %v (a Go runtime has several)", tasks, err)
	}
	var out []int
	for _, task := range tasks {
		out = append(out, niceOf(t, task))
	}
	return out
}

// TestSubagentRuntimesRunNiced: with jobs.nice (default 10) every thread
// of a subagent child's real runtime runs that much nicer than the daemon,
// while its parent (an agent a client created) runs at the daemon's own
// priority, and so does the daemon; with 0 the child does too.
func TestSubagentRuntimesRunNiced(t *testing.T) {
	own := niceOf(t, "/proc/self/stat")
	for _, tc := range []struct {
		name string
		nice int
		want int
	}{
		{"default", -1, min(19, own+10)},
		{"off", 0, own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(c *config.Config) {
				if tc.nice >= 0 {
					c.Jobs.Nice = tc.nice
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
			for _, n := range threadNices(t, parent) {
				if n != own {
					t.Errorf("a thread of the parent's runtime runs at nice %d, want the daemon's %d", n, own)
				}
			}
			for _, n := range threadNices(t, job.Runs[0].AgentID) {
				if n != tc.want {
					t.Errorf("a thread of the child's runtime runs at nice %d, want %d", n, tc.want)
				}
			}
			if got := niceOf(t, "/proc/self/stat"); got != own {
				t.Errorf("the daemon's niceness changed to %d from %d", got, own)
			}
		})
	}
}
