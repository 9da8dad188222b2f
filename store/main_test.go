package store

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind, such as
// bbolt's checker when Check stops reading its channel early.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
