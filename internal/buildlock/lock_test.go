//go:build unix

package buildlock

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestLockExcludesOtherProcesses: while this process holds the lock,
// another open file description cannot take it; after unlock it can.
func TestLockExcludesOtherProcesses(t *testing.T) {
	testhost.Tool(t, "flock")
	unlock := Lock()
	path := filepath.Join(os.TempDir(), file)
	// flock -n fails at once (exit 1) when the lock is held elsewhere.
	if err := exec.Command("flock", "-n", path, "true").Run(); err == nil {
		unlock()
		t.Fatal("another process took the lock while it was held")
	}
	unlock()
	if err := exec.Command("flock", "-n", path, "true").Run(); err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
}
