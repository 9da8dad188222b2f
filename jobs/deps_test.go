package jobs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestJobsKnowNoRuntimeKind: a job runs children on any runtime profile
// by name (subagent.create runtime); nothing under jobs/ knows
// the kinds of runtime, their config or their adapters.
func TestJobsKnowNoRuntimeKind(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range []string{"github.com/shard-dev/shard/config", "github.com/shard-dev/shard/runtime/refagent"} {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("jobs/... depends on %s", dep)
			}
		}
	}
}
