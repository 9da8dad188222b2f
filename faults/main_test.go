//go:build linux

package faults

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
)

// Flags of the long modes. The defaults are the bounded suite that runs in
// `go test ./...`.
var (
	roundsFlag = flag.Int("rounds", 3, "SIGKILL rounds of TestKillDaemonUnderLoad (and runtime kills of TestRuntimeCrashes ×2)")
	soakFlag   = flag.Duration("soak", 0, "run TestSoak for this long (0 skips it), e.g. -soak 2h")
	seedFlag   = flag.Int64("seed", 0, "random seed of the scenarios (0: from the clock; the seed is logged)")
)

// Paths of the binaries under test, built once by TestMain, and of the
// test binary itself, which doubles as a helper (see helpers_test.go).
var (
	sharddBin   string
	shardctlBin string
	selfBin     string
)

// raceEnv, set to 1, builds the binaries with -race too (see package e2e);
// buildFlagsEnv adds go build flags (e.g. -overlay, to run the suite against
// a variant of the daemon without touching the tree).
const (
	raceEnv       = "SHARD_FAULTS_RACE"
	buildFlagsEnv = "SHARD_FAULTS_BUILD_FLAGS"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		os.Exit(runHelper(os.Args[2:]))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "shard-faults-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	var flags []string
	if os.Getenv(raceEnv) == "1" {
		flags = append(flags, "-race")
	}
	flags = append(flags, strings.Fields(os.Getenv(buildFlagsEnv))...)
	bins, err := shardtest.Build(dir, flags, os.Stderr, "shardd", "shardctl")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: build shardd and shardctl:", err)
		return 1
	}
	sharddBin, shardctlBin = bins[0], bins[1]
	if selfBin, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	return testhost.WithHome(m).Run() // no test reads the developer's home
}

// seed returns the random seed for one test and logs it, so that a failing
// run can be repeated with -seed.
func seed(t *testing.T) int64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (repeat with -seed %d)", s, s)
	return s
}
