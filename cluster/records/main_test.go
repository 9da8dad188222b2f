package records

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// Watch that outlived its context, a server or connection not shut down.
//
// Two of nats-server's own goroutines are let through. Seen here (about
// one run in twenty of the kill and partition tests): a stream's file
// store, created while its server was being shut down, is never stopped,
// so its state-flush loop stays, and with it the process-wide access-time
// ticker that file stores share. Both belong to the embedded server, not
// to this package, and neither touches a test's files after it ended
// (their first flush is two minutes away).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testhost.WithHome(m), // nothing reads the developer's home
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}
