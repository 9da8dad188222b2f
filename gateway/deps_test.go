package gateway_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoStore enforces the boundary: no gateway file imports the store or
// bbolt, and nothing the gateway depends on does either, except through
// the actor packages it forwards commands to. (Those reach the store
// themselves; once they no longer do, this test holds the gateway's whole
// dependency graph to it.)
func TestNoStore(t *testing.T) {
	t.Parallel()
	// forbidden are the packages the gateway must not reach on its own: it
	// sees principals, sessions and tokens through gateway.Credentials,
	// which the daemon implements over the store.
	forbidden := []string{"github.com/shard-dev/shard/store", "go.etcd.io/bbolt"}
	// allowedVia are the packages the gateway imports for the commands it
	// forwards (conn.go); whatever they depend on is theirs.
	allowedVia := []string{"github.com/shard-dev/shard/actors/registry", "github.com/shard-dev/shard/actors/agent"}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	list := func(args ...string) map[string]bool {
		t.Helper()
		out, err := exec.Command(goBin, append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		set := make(map[string]bool)
		for _, p := range strings.Fields(string(out)) {
			set[p] = true
		}
		return set
	}
	isForbidden := func(p string) bool {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				return true
			}
		}
		return false
	}

	for p := range list("-f", `{{join .Imports "\n"}}`, ".") {
		if isForbidden(p) {
			t.Errorf("gateway imports %s", p)
		}
	}
	via := list(append([]string{"-deps"}, allowedVia...)...)
	for p := range list("-deps", ".") {
		if isForbidden(p) && !via[p] {
			t.Errorf("gateway depends on %s, and not only through %v", p, allowedVia)
		}
	}
}
