package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps shardctl a protocol client (house style 4): it must not
// link the daemon's actors, gateway, job coordinator or supervisor, nor the
// actor system. jobs/view (pure projections of job records) is the one
// package under jobs/ it uses, for --offline.
//
// Two daemon packages are allowed on purpose, for what shardctl does while
// the daemon is down:
//   - store (and so bbolt): --offline opens shard.db read-only for crash
//     forensics, and doctor checks its consistency;
//   - config (and so viper, which config uses internally): doctor loads
//     the configuration exactly as shardd does to report config problems.
//     Nothing else in shardctl reads configuration.
func TestDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, banned := range []string{
			"github.com/shard-dev/shard/actors",
			"github.com/shard-dev/shard/runtime/refagent",
			"github.com/shard-dev/shard/internal/daemon",
			"github.com/shard-dev/shard/gateway",
			"github.com/shard-dev/shard/jobs",
			"github.com/shard-dev/shard/supervisor",
			"github.com/asynkron/protoactor-go",
		} {
			if dep == "github.com/shard-dev/shard/jobs/view" {
				continue // pure projections, no actors (offline views)
			}
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("shardctl depends on %s", dep)
			}
		}
	}
	// viper only through config (doctor).
	for _, dep := range deps {
		if dep == "github.com/spf13/viper" {
			direct, err := exec.Command(gobin, "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			if strings.Contains(string(direct), "github.com/spf13/viper") {
				t.Errorf("shardctl imports viper directly; only config (for doctor) may")
			}
		}
	}
}
