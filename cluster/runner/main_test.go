package runner_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain fails the package if a test leaves a goroutine behind: an
// executor, a watch or a server not shut down. The two nats-server
// goroutines let through are the embedded server's own (see
// cluster/records' TestMain).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testhost.WithHome(m),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}
