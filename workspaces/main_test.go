package workspaces_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/actortest"
)

// TestMain checks for leaked goroutines once the tests passed, allowing
// only protoactor's own that end by themselves (actortest.LeakOptions).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, actortest.LeakOptions()...) }
