//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/recordstest"
	"github.com/shard-dev/shard/protocol"
)

// The scan phase: what a look for one node's runs costs as the runs
// bucket grows. records.InterruptNodeRuns (a node declared dead, or a
// restarted node's previous incarnation), records.Requeue and a restarted
// node's runner.HeldBy each list the whole runs bucket (shard_runs is
// keyed <job_id>.<run_id>, and no index by node is kept: docs/cluster.md
// "Known limits"), so their time follows the run records kept, not the
// node's own. On three fresh nodes, the driver writes run records through
// n1's client port as history (completed runs of a node "nz") up to each
// size, plus scanActive runs of one more incarnation of "nz" still
// active, and times: the listing alone, InterruptNodeRuns of that
// incarnation (it changes scanActive runs), the same again (it changes
// none) and Requeue (nothing to put back).

// scanActive is how many runs the dead incarnation held at each size.
const scanActive = 10

// scanWriters is how many record writes are in flight at once.
const scanWriters = 32

// clusterScan is one size of the scan phase.
type clusterScan struct {
	Runs        int     `json:"runs"`
	WriteSec    float64 `json:"write_s"`        // writing the records added for this size
	ListMs      float64 `json:"list_ms"`        // Runs.List of the whole bucket (runner.HeldBy's cost)
	InterruptMs float64 `json:"interrupt_ms"`   // InterruptNodeRuns, scanActive runs changed
	Interrupted int     `json:"interrupted"`    // how many it changed
	AgainMs     float64 `json:"interrupt_0_ms"` // InterruptNodeRuns again: nothing to change
	RequeueMs   float64 `json:"requeue_ms"`     // Requeue: nothing to put back
	PerRunUs    float64 `json:"interrupt_us_per_record"`
}

// freeLoopback is a free loopback address.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// scanRun is the scan phase on three fresh nodes, for each size (run
// records in the bucket, ascending).
func scanRun(o *options, sizes []int) ([]clusterScan, error) {
	cl, err := startNodesOpts(o, 3, nil, true)
	if err != nil {
		return nil, err
	}
	rec := recordstest.Dial(benchTB{}, cl.natsURL, cl.token, records.Options{Replicas: 3, Timeout: time.Minute})
	ctx := context.Background()
	var out []clusterScan
	written := 0
	for si, n := range sizes {
		ph := clusterScan{Runs: n}
		// History up to n - scanActive records, then this size's active
		// runs of incarnation si+1.
		want := n - scanActive
		t0 := time.Now()
		if err := writeRuns(ctx, rec, written, want, func(i int) records.RunRecord {
			return records.RunRecord{RunID: fmt.Sprintf("run-%06d", i), JobID: fmt.Sprintf("job-scan-%05d", i/4), AgentID: fmt.Sprintf("agent-%06d", i),
				Task: "history", State: protocol.RunCompleted, Anywhere: true, Node: "nz", Incarnation: "0", QueuedAt: 1, StartedAt: 2, EndedAt: 3}
		}); err != nil {
			return out, err
		}
		if want > written {
			written = want
		}
		inc := fmt.Sprint(si + 1)
		if err := writeRuns(ctx, rec, 0, scanActive, func(i int) records.RunRecord {
			return records.RunRecord{RunID: fmt.Sprintf("run-%s-%02d", inc, i), JobID: "job-active-" + inc, AgentID: fmt.Sprintf("agent-%s-%02d", inc, i),
				Task: "active", State: protocol.RunActive, Anywhere: true, Node: "nz", Incarnation: inc, QueuedAt: 1, StartedAt: 2}
		}); err != nil {
			return out, err
		}
		ph.WriteSec = time.Since(t0).Seconds()
		t0 = time.Now()
		all, err := rec.Runs.List(ctx, "")
		if err != nil {
			return out, err
		}
		ph.ListMs = ms(time.Since(t0))
		ph.Runs = len(all)
		t0 = time.Now()
		got, err := rec.InterruptNodeRuns(ctx, "nz", inc)
		if err != nil {
			return out, err
		}
		ph.InterruptMs, ph.Interrupted = ms(time.Since(t0)), len(got)
		t0 = time.Now()
		if again, err := rec.InterruptNodeRuns(ctx, "nz", inc); err != nil || len(again) != 0 {
			return out, fmt.Errorf("interrupt again: %d runs, %v", len(again), err)
		}
		ph.AgainMs = ms(time.Since(t0))
		t0 = time.Now()
		if put, err := rec.Requeue(ctx); err != nil || put != 0 {
			return out, fmt.Errorf("requeue: %d runs, %v", put, err)
		}
		ph.RequeueMs = ms(time.Since(t0))
		ph.PerRunUs = ph.AgainMs * 1000 / float64(ph.Runs)
		out = append(out, ph)
	}
	return out, nil
}

// writeRuns creates the run records of(i) for i in [from, to),
// scanWriters at once.
func writeRuns(ctx context.Context, rec *records.Records, from, to int, of func(int) records.RunRecord) error {
	next := make(chan int)
	errs := make([]error, scanWriters)
	var wg sync.WaitGroup
	for w := range scanWriters {
		wg.Go(func() {
			for i := range next {
				r := of(i)
				if _, err := rec.Runs.Create(ctx, records.RunKey(r.JobID, r.RunID), r); err != nil && errs[w] == nil {
					errs[w] = err
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// scanRows adds the scan phase's rows to rep.
func scanRows(rep *report, scans []clusterScan) {
	for _, sc := range scans {
		rep.Rows = append(rep.Rows, []string{"scan: InterruptNodeRuns", "3", fmt.Sprint(sc.Runs), "", f2(sc.InterruptMs), "", "",
			fmt.Sprintf("%d interrupted; again (none to change) %s ms = %s µs per record; the listing alone (runner.HeldBy) %s ms; Requeue %s ms; writing %s s",
				sc.Interrupted, f2(sc.AgainMs), f2(sc.PerRunUs), f2(sc.ListMs), f2(sc.RequeueMs), f2(sc.WriteSec))})
	}
}

// scanNote says what the scan phase did at sizes.
func scanNote(sizes []int) string {
	return fmt.Sprintf("scan: on three fresh nodes, run records written through n1's NATS client port (completed runs of a node, %d in flight) up to each of %v records, plus %d active runs of one more incarnation; then timed once each: InterruptNodeRuns of that incarnation (it changes the %d), again (it changes none), the whole listing (what runner.HeldBy reads) and Requeue; each lists the whole runs bucket, so its time follows the records kept", scanWriters, sizes, scanActive, scanActive)
}
