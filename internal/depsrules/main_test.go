package depsrules

import (
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain runs the rules' `go list` under an empty home: it reads nothing
// of the user's (the toolchain's cache locations are kept).
func TestMain(m *testing.M) { os.Exit(testhost.WithHome(m).Run()) }
