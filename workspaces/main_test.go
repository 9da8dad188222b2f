package workspaces_test

import (
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain runs the tests under a home of their own: the actor's git reads
// no ~/.gitconfig, so each repository a test makes carries its identity.
func TestMain(m *testing.M) { os.Exit(testhost.WithHome(m).Run()) }
