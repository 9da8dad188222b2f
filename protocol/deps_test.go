package protocol_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaf enforces that protocol stays a leaf (house style 4): it imports
// nothing from the rest of Shard, protoactor, bbolt or viper.
func TestLeaf(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/shard-dev/shard/protocol":
		case strings.HasPrefix(dep, "github.com/shard-dev/shard/"),
			strings.Contains(dep, "protoactor"),
			strings.Contains(dep, "bbolt"),
			strings.Contains(dep, "viper"):
			t.Errorf("protocol depends on %s", dep)
		}
	}
}
