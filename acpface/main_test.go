package acpface

import (
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain runs the tests under a home of their own.
func TestMain(m *testing.M) { os.Exit(testhost.WithHome(m).Run()) }
