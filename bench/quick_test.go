//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestQuickScenarios is the CI smoke run of the driver: every scenario in
// --quick mode against a freshly built shardd. It checks that each one runs
// to the end and writes a result file with results in it; it asserts no
// timing (these machines are shared and noisy). The tables go to stdout
// (go test -v shows them).
func TestQuickScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real daemons")
	}
	dir := t.TempDir()
	shardd := filepath.Join(dir, "shardd")
	build := exec.Command("go", "build", "-o", shardd, "github.com/shard-dev/shard/cmd/shardd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build shardd: %v\n%s", err, out)
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bench-"+sc.name+".json")
			args := []string{sc.name, "--quick", "--shardd", shardd, "--out", out, "--plots", t.TempDir()}
			if sc.name == "relay" {
				// Under -race this driver reads far slower than the daemon
				// writes: a flood past the outbox caps (§ backpressure)
				// would get it dropped as a slow consumer, as it should.
				args = append(args, "--n", "2000")
			}
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
