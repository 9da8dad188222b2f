package records

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// Watch that outlived its context, a server or connection not shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
