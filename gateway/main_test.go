package gateway

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/actortest"
)

// TestMain checks for leaked goroutines once the tests passed, allowing
// only protoactor's own that end by themselves (actortest.LeakOptions):
// the tests' registry is a probe actor.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, actortest.LeakOptions()...) }
