//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/internal/buildlock"
	"github.com/shard-dev/shard/internal/testhost"
)

// smokeSizes shrink each scenario below --quick for the test, which checks
// that the scenario runs to the end, not what it measures: under -race on a
// loaded 2-core machine the --quick sizes (50 runtimes for scale, 10 000
// run records with fsync for jobs, …) took the package past go test's
// default 10 minute limit. Scale's idle timeout is what its
// reaping phase waits out at real time, so it is short here (runtimes are
// reaped early on a slow machine; scale then notes it, and the test still
// checks that it ran). fsync is off (--no-sync) for every scenario.
var smokeSizes = map[string][]string{
	// Under -race this driver reads far slower than the daemon writes: a
	// flood past the outbox caps (docs/protocol.md §13, P2) would get it
	// dropped as a slow consumer, as it should.
	"relay":  {"--n", "2000"},
	"fanout": {"--n", "500", "--clients", "1,4"},
	"jobs":   {"--creates", "20", "--parents", "1,2", "--wait-samples", "6", "--runs", "100,400"},
	"resync": {"--windows", "10,40", "--samples", "10"},
	"scale":  {"--agents", "4,8", "--idle-timeout", "2s"},
	// history fills stores of 50 and 200 jobs: the filler, the daemon on
	// it, the lists and the plot, at a size that takes seconds.
	"history": {"--history", "50,200", "--live", "1", "--samples", "5"},
}

// TestQuickScenarios is the CI smoke run of the driver: every scenario in
// --quick mode, at the smokeSizes, against a freshly built shardd. It checks that each one runs
// to the end and writes a result file with results in it; it asserts no
// timing (these machines are shared and noisy). The tables go to stdout
// (go test -v shows them).
func TestQuickScenarios(t *testing.T) {
	if testing.Short() {
		testhost.Skip(t, "-short: starts real daemons")
	}
	shardd := testShardd(t)
	for _, sc := range scenarios {
		if sc.name == "cluster" {
			continue // TestClusterScenario runs it and checks what it measured
		}
		t.Run(sc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bench-"+sc.name+".json")
			args := append([]string{sc.name, "--quick", "--shardd", shardd, "--out", out, "--plots", t.TempDir(), "--no-sync"},
				smokeSizes[sc.name]...)
			if code := realMain(args); code != 0 {
				t.Fatalf("bench %v exited %d", args, code)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Scenario string          `json:"scenario"`
				Quick    bool            `json:"quick"`
				Results  json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("result file: %v\n%s", err, b)
			}
			if res.Scenario != sc.name || !res.Quick || len(res.Results) < 3 || string(res.Results) == "null" {
				t.Errorf("result file says scenario %q quick %v results %s", res.Scenario, res.Quick, res.Results)
			}
		})
	}
}

// testShardd builds shardd for a test.
func testShardd(t *testing.T) string {
	t.Helper()
	shardd := filepath.Join(t.TempDir(), "shardd")
	build := exec.Command("go", "build", "-o", shardd, "github.com/shard-dev/shard/cmd/shardd")
	unlock := buildlock.Lock() // one build at a time across test processes
	out, err := build.CombinedOutput()
	unlock()
	if err != nil {
		t.Fatalf("build shardd: %v\n%s", err, out)
	}
	return shardd
}

// TestMain lets the test binary be the fan-out's bare relay too: fanout
// starts it as its own executable (floor.go).
func TestMain(m *testing.M) {
	if os.Getenv(floorEnv) != "" {
		os.Exit(runFloorRelay())
	}
	os.Exit(testhost.WithHome(m).Run()) // no test reads the developer's home
}
