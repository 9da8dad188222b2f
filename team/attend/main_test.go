//go:build linux

package attend_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
)

// sharddBin is the daemon under test, built once by TestMain.
var sharddBin string

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(builder{testhost.WithHome(m)})
}

// builder builds shardd before the tests run, and removes it after.
type builder struct{ m testhost.Runner }

func (b builder) Run() int {
	dir, err := os.MkdirTemp("", "shard-attend-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "attend:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins, err := shardtest.Build(dir, nil, os.Stderr, "shardd")
	if err != nil {
		fmt.Fprintln(os.Stderr, "attend: build shardd:", err)
		return 1
	}
	sharddBin = bins[0]
	return b.m.Run()
}
