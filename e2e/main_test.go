//go:build linux

package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
)

// Paths of the binaries under test, built once by TestMain.
var (
	sharddBin   string
	shardctlBin string
)

// raceEnv, set to 1, builds the binaries with -race too, so that a data
// race in the real daemon fails the exit-status checks (the race detector
// exits with 66). It is off by default: -race on the test binary does not
// reach its subprocesses, and race-instrumented daemons make the package
// several times slower; package daemon runs the same code in-process under
// -race already.
const raceEnv = "SHARD_E2E_RACE"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "shard-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	var flags []string
	if os.Getenv(raceEnv) == "1" {
		flags = append(flags, "-race")
	}
	bins, err := shardtest.Build(dir, flags, os.Stderr, "shardd", "shardctl")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build shardd and shardctl:", err)
		return 1
	}
	sharddBin, shardctlBin = bins[0], bins[1]
	return testhost.WithHome(m).Run() // no test reads the developer's home
}
