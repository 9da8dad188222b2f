//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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

	args := []string{"build"}
	if os.Getenv(raceEnv) == "1" {
		args = append(args, "-race")
	}
	// With -o naming a directory, one go build writes both executables.
	args = append(args, "-o", dir+string(filepath.Separator),
		"github.com/shard-dev/shard/cmd/shardd",
		"github.com/shard-dev/shard/cmd/shardctl")
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build shardd and shardctl:", err)
		return 1
	}
	sharddBin = filepath.Join(dir, "shardd")
	shardctlBin = filepath.Join(dir, "shardctl")
	return m.Run()
}
