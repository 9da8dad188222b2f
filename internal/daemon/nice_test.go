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

// TestRuntimesRunNiced: with runtime.nice (default 10) every thread of a
// real runtime child runs that much nicer than the daemon, which keeps its
// own priority; with 0 the runtime runs at the daemon's.
func TestRuntimesRunNiced(t *testing.T) {
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
					c.Runtime.Nice = tc.nice
				}
			})
			c := h.dial()
			id := h.create(c, nil)
			attach(t, c, id, "")
			prompt(t, c, id, "sim: say ok")
			waitFor(t, c, isType(protocol.TypeTurnEnd, id))
			pids := runtimePIDs(t, id)
			if len(pids) != 1 {
				t.Fatalf("runtime processes %v, want one", pids)
			}
			tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pids[0]))
			if err != nil || len(tasks) < 2 {
				t.Fatalf("threads of the runtime: %v, %v (a Go runtime has several)", tasks, err)
			}
			for _, task := range tasks {
				if got := niceOf(t, task); got != tc.want {
					t.Errorf("%s runs at nice %d, want %d", task, got, tc.want)
				}
			}
			if got := niceOf(t, "/proc/self/stat"); got != own {
				t.Errorf("the daemon's niceness changed to %d from %d", got, own)
			}
		})
	}
}
