package records_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/records/internal/natstest"
	"github.com/shard-dev/shard/protocol"
)

// bundle is what a cluster test works with: the servers and one Records
// per server, each over a connection to that server alone.
type bundle struct {
	c   *natstest.Cluster
	js  []jetstream.JetStream
	rec []*records.Records
}

// setup starts n servers and opens the records through each. Opening
// through every server at once also shows that nodes opening together
// bind one set of buckets.
func setup(t *testing.T, n int, opts records.Options) *bundle {
	t.Helper()
	b := &bundle{c: natstest.Start(t, n)}
	if n == 1 {
		opts.Replicas = 1
	}
	errs := make(chan error, n)
	b.rec = make([]*records.Records, n)
	for i := range n {
		_, js := b.c.Connect(i)
		b.js = append(b.js, js)
	}
	for i := range n {
		go func() {
			var err error
			b.rec[i], err = records.Open(t.Context(), b.js[i], opts)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("open: %v", err)
		}
	}
	return b
}

func ctx(t *testing.T) context.Context { return t.Context() }

func run(job, id string) records.RunRecord {
	return records.RunRecord{RunID: id, JobID: job, AgentID: "agent-" + id, Task: "task of " + id, State: protocol.RunQueued, Anywhere: true, QueuedAt: 1}
}

func job(id string, runs ...string) records.JobRecord {
	return records.JobRecord{JobID: id, ParentAgentID: "agent-p", ParentNode: "n1", Strategy: protocol.StrategyParallel, RunIDs: runs}
}

func runID(i int) string { return fmt.Sprintf("run-%03d", i) }
