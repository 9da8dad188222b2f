//go:build linux

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestClusterRefusesNodeWithoutRoutes: a node given no route to another
// node cannot form a cluster (NATS clusters JetStream only with routes):
// shardd exits at once naming cluster.routes, rather than after the
// node's ready timeout, and before it makes its home.
func TestClusterRefusesNodeWithoutRoutes(t *testing.T) {
	home := newHome(t)
	cmd := exec.Command(sharddBin, "--web-port", "0", "--cluster.node", "n1", "--cluster.listen", "127.0.0.1:0")
	cmd.Env = sharddEnv(home)
	r := runCmd(t, cmd, "")
	if r.code == 0 || !strings.Contains(r.stderr, "cluster.routes: a cluster node needs the routes of at least one other node") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused shardd made its home: %v", err)
	}
}
