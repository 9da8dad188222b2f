package actors_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoArrowOutOfActors enforces the boundary of the actor families: the
// jobs coordinator, the gateway and the composition root use actors/, never
// the other way round (the registry forwards subagent.* to a jobs PID it is
// handed, and the messages it shares with jobs are its own).
func TestNoArrowOutOfActors(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v", err)
	}
	forbidden := []string{
		"github.com/shard-dev/shard/jobs",
		"github.com/shard-dev/shard/gateway",
		"github.com/shard-dev/shard/internal/daemon",
		// Runtime profiles: actors see a command line and an
		// environment, never the kind of runtime nor its adapter.
		"github.com/shard-dev/shard/runtime/adapter",
		"github.com/shard-dev/shard/config",
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("actors/... depends on %s", dep)
			}
		}
	}
}
