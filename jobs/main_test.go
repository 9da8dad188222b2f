package jobs

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// taskMarker stands for private task text: it must never reach a
// projection, a report or a log.
const taskMarker = "PRIVATE-TASK-7f3a9c: rm -rf the secret plans"
