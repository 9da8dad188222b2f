//go:build linux

package shardtest

import (
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestMain runs the tests under a home of their own: the shardd they start
// reads nothing of the developer's.
func TestMain(m *testing.M) { os.Exit(testhost.WithHome(m).Run()) }
