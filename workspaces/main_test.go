package workspaces_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain runs the tests under a home of their own: the actor's git reads
// no ~/.gitconfig, so each repository a test makes carries its identity.
// Once they passed it checks for leaked goroutines, allowing only
// protoactor's own that end by themselves (actortest.LeakOptions).
func TestMain(m *testing.M) { goleak.VerifyTestMain(testhost.WithHome(m), actortest.LeakOptions()...) }
