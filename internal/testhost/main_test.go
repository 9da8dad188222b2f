package testhost

import (
	"os"
	"testing"
)

// TestMain runs this package's own tests under a home of their own too:
// the go command they run reads nothing of the user's home.
func TestMain(m *testing.M) { os.Exit(WithHome(m).Run()) }
