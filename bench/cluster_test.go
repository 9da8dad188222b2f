//go:build linux

package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
)

// TestClusterScenario runs the cluster scenario at a small size against
// real shardd binaries (a single shardd, then clusters of two and three
// nodes on loopback) and checks what it measured: every create and wake-up
// sample counted, each turn's end after its first event, every node
// seeing every node alive and listing every agent on the node that
// created it, the live phase holding exactly the agents it asked for on
// each node, an agent of n3 attached and streamed through n3 and through
// n1 with every delta received, and the plot written. It asserts no
// timing.
func TestClusterScenario(t *testing.T) {
	if testing.Short() {
		testhost.Skip(t, "-short: starts real daemons")
	}
	shardd := testShardd(t)
	const creates, samples, per = 12, 4, 3
	out, plots := filepath.Join(t.TempDir(), "bench-cluster.json"), t.TempDir()
	args := []string{"cluster", "--quick", "--shardd", shardd, "--out", out, "--plots", plots, "--no-sync",
		"--creates", "12", "--wait-samples", "4", "--live-per-node", "3", "--nodes", "1,3", "--live-nodes", "1,2",
		"--samples", "3", "--n", "200", "--phases", "create,wake,live,attach"} // scan and passive: TestClusterScanAndPassivePhases
	var res struct {
		Scenario string        `json:"scenario"`
		Results  clusterResult `json:"results"`
		Plots    []string      `json:"plots"`
	}
	b := runScenario(t, args, out, &res)
	r := res.Results
	if res.Scenario != "cluster" || len(r.Create) != 2 || len(r.Wake) != 2 || len(r.Live) != 2 || len(r.Attach) != 2 {
		t.Fatalf("result file has %q: %d create, %d wake, %d live phases\n%s", res.Scenario, len(r.Create), len(r.Wake), len(r.Live), b)
	}
	names := []string{"n1", "n2", "n3"}
	checkViews := func(what string, k, agents int, views []clusterView) {
		t.Helper()
		if k == 1 {
			return
		}
		if len(views) != k {
			t.Errorf("%s: %d nodes' views, want %d", what, len(views), k)
		}
		for _, v := range views {
			if !slices.Equal(v.Alive, names[:k]) || v.Misplaced != 0 || v.Agents < agents {
				t.Errorf("%s: %s sees %v alive, lists %d agents, %d of %d not on their node", what, v.Node, v.Alive, v.Agents, v.Misplaced, agents)
			}
		}
	}
	for i, c := range r.Create {
		k := []int{1, 3}[i]
		sum := 0
		for _, n := range c.PerNode {
			sum += n
		}
		if c.Nodes != k || c.Creates != creates || sum != creates || len(c.PerNode) != k || c.Ack.N != creates ||
			c.PerSec <= 0 || c.Ack.Min <= 0 || c.Ack.P50 > c.Ack.Max {
			t.Errorf("create on %d nodes: %+v", k, c)
		}
		checkViews("create", k, creates, c.Views)
	}
	for i, w := range r.Wake {
		k := []int{1, 3}[i]
		if w.Nodes != k || w.Samples != samples || w.Ack.N != samples || w.First.N != samples || w.TurnEnd.N != samples || w.First.Min <= 0 {
			t.Errorf("wake on %d nodes: %+v", k, w)
		}
		// Each sample's turn_end comes after its turn_start, so every
		// order statistic does too.
		if w.TurnEnd.Min < w.First.Min || w.TurnEnd.P50 < w.First.P50 || w.TurnEnd.Max < w.First.Max {
			t.Errorf("wake on %d nodes: turn_end before the first event: %+v", k, w)
		}
	}
	for i, l := range r.Live {
		k := i + 1
		if l.Nodes != k || l.Asked != k*per || l.Created != k*per || l.Live != k*per || l.Bound != "" || l.ChildPSSKiB <= 0 || l.DaemonsLiveKiB <= 0 {
			t.Errorf("live on %d nodes: %+v", k, l)
		}
		for j, n := range l.LivePerNode {
			if n != per {
				t.Errorf("live on %d nodes: n%d holds %d live agents, want %d", k, j+1, n, per)
			}
		}
		checkViews("live", k, k*per, l.Views)
	}
	for i, a := range r.Attach {
		want := []struct{ path, via string }{{"same-node", "n3"}, {"cross-node", "n1"}}[i]
		if a.Path != want.path || a.Via != want.via || a.Host != "n3" || a.Attach.N != 3 || a.Reattach.N != 3 || a.ReattachFull.N != 3 || a.FullSyncBytes < 200*64 || a.First.N != 3 || a.Attach.Min <= 0 || a.First.Min <= 0 {
			t.Errorf("attach path %d: %+v", i, a)
		}
		// Every delta of each flood arrived, stamped.
		for _, st := range []streamStats{a.Paced, a.Unpaced} {
			if st.Deltas != 200 || st.Latency.N != 200 || st.EventsPerSec <= 0 || st.Latency.P50 > st.Latency.Max {
				t.Errorf("%s flood: %+v", a.Path, st)
			}
		}
	}
	if len(res.Plots) != 1 || filepath.Base(res.Plots[0]) != "cluster-live.svg" {
		t.Fatalf("plots %q", res.Plots)
	}
	svg, err := os.ReadFile(res.Plots[0])
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		XMLName xml.Name
	}
	if err := xml.Unmarshal(svg, &root); err != nil || root.XMLName.Local != "svg" {
		t.Fatalf("plot is not an SVG: %v, root %q", err, root.XMLName.Local)
	}
}

// TestClusterScanAndPassivePhases runs the cluster scenario's scan and
// passive phases at small sizes on three real shardd nodes each and
// checks what they measured. Scan: the runs bucket held each size (the
// history and each size's active runs), each InterruptNodeRuns changed
// exactly the dead incarnation's active runs, and every timing was taken.
// Passive: every agent of n3 was passivated (the phase fails otherwise)
// and woken once through n3 and through n1, each sample counted, each
// turn's end after its first event. It asserts no timing.
func TestClusterScanAndPassivePhases(t *testing.T) {
	if testing.Short() {
		testhost.Skip(t, "-short: starts real daemons")
	}
	shardd := testShardd(t)
	out := filepath.Join(t.TempDir(), "bench-cluster.json")
	args := []string{"cluster", "--quick", "--shardd", shardd, "--out", out, "--plots", t.TempDir(), "--no-sync",
		"--phases", "scan,passive", "--runs", "50,120", "--wait-samples", "4"}
	var res struct {
		Results clusterResult `json:"results"`
	}
	runScenario(t, args, out, &res)
	sc := res.Results.Scan
	if len(sc) != 2 || len(res.Results.Create) != 0 || len(res.Results.Wake) != 0 {
		t.Fatalf("scan phase: %+v", res.Results)
	}
	// 40 completed + 10 active; then 110 completed + 10 + 10 active.
	for i, want := range []int{50, 130} {
		s := sc[i]
		if s.Runs != want || s.Interrupted != scanActive || s.InterruptMs <= 0 || s.AgainMs <= 0 || s.ListMs <= 0 || s.RequeueMs <= 0 {
			t.Errorf("size %d: %+v", want, s)
		}
	}
	ps := res.Results.Passive
	if len(ps) != 2 {
		t.Fatalf("passive phase: %+v", ps)
	}
	for i, p := range ps {
		want := []struct{ path, via string }{{"same-node", "n3"}, {"cross-node", "n1"}}[i]
		if p.Path != want.path || p.Via != want.via || p.Host != "n3" || p.Samples != 2 {
			t.Errorf("passive path %d: %+v", i, p)
		}
		for _, d := range []dist{p.Attach, p.Ack, p.First, p.TurnEnd, p.Total} {
			if d.N != 2 || d.Min <= 0 {
				t.Errorf("%s: a measurement of %d samples: %+v", p.Path, p.Samples, d)
			}
		}
		if p.TurnEnd.Min < p.First.Min || p.Total.Min < p.Attach.Min {
			t.Errorf("%s: out of order: %+v", p.Path, p)
		}
	}
}

// runScenario runs the bench with args, which write their result to out,
// decodes the result into res and returns it as read.
func runScenario(t *testing.T, args []string, out string, res any) []byte {
	t.Helper()
	if code := realMain(args); code != 0 {
		t.Fatalf("bench %v exited %d", args, code)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, res); err != nil {
		t.Fatalf("result file: %v\n%s", err, b)
	}
	return b
}
