package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps shardctl a pure protocol client: it must not link the
// daemon's store, actors or config (house style 4).
func TestDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/shard-dev/shard/store",
			"github.com/shard-dev/shard/actors",
			"github.com/shard-dev/shard/gateway",
			"github.com/shard-dev/shard/jobs",
			"github.com/shard-dev/shard/supervisor",
			"github.com/shard-dev/shard/config",
			"go.etcd.io/bbolt",
			"github.com/asynkron/protoactor-go",
			"github.com/spf13/viper",
		} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("shardctl depends on %s", dep)
			}
		}
	}
}
