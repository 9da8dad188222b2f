package records_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/protocol"
)

// TestTableCAS drives every operation of a table through two servers and
// checks each refusal's sentinel and protocol code.
func TestTableCAS(t *testing.T) {
	b := setup(t, 3, records.Options{})
	a, c := b.rec[0].Jobs, b.rec[1].Jobs

	rev, err := a.Create(ctx(t), "job-1", job("job-1", "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx(t), "job-1", job("job-1")); !errors.Is(err, records.ErrExists) || protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("second create: %v (code %s), want ErrExists/CONFLICT", err, protocol.CodeOf(err))
	}
	e, err := c.Get(ctx(t), "job-1")
	if err != nil || e.Revision != rev || !slices.Equal(e.Value.RunIDs, []string{"run-1"}) {
		t.Fatalf("get through another server: %+v %v, want revision %d", e, err, rev)
	}
	v := e.Value
	v.HaltedBy = "run-1"
	rev2, err := c.Update(ctx(t), "job-1", v, e.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Update(ctx(t), "job-1", v, rev); !errors.Is(err, records.ErrConflict) || protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("stale update: %v, want ErrConflict/CONFLICT", err)
	}
	if err := a.Delete(ctx(t), "job-1", rev); !errors.Is(err, records.ErrConflict) {
		t.Fatalf("stale delete: %v, want ErrConflict", err)
	}
	if err := a.Delete(ctx(t), "job-1", rev2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx(t), "job-1"); !errors.Is(err, records.ErrNotFound) || protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("get deleted: %v, want ErrNotFound/NOT_FOUND", err)
	}
	if _, err := c.Update(ctx(t), "job-1", v, rev2); !errors.Is(err, records.ErrConflict) {
		t.Fatalf("update of deleted: %v, want ErrConflict", err)
	}
	if _, err := c.Create(ctx(t), "job-1", job("job-1", "run-9")); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	if _, err := a.Create(ctx(t), "bad key", job("job-2")); !errors.Is(err, records.ErrInvalid) || protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("bad key: %v", err)
	}

	// Prefixes: the runs of one job.
	for _, k := range [][2]string{{"job-a", "run-1"}, {"job-a", "run-2"}, {"job-b", "run-3"}} {
		if _, err := b.rec[2].Runs.Create(ctx(t), records.RunKey(k[0], k[1]), run(k[0], k[1])); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := a.Keys(ctx(t), "")
	if err != nil || !slices.Equal(keys, []string{"job-1"}) {
		t.Fatalf("keys: %v %v", keys, err)
	}
	list, err := b.rec[0].Runs.List(ctx(t), "job-a")
	if err != nil || len(list) != 2 || list[0].Value.JobID != "job-a" || list[1].Value.JobID != "job-a" {
		t.Fatalf("runs of job-a: %+v %v", list, err)
	}
	rk, err := b.rec[1].Runs.Keys(ctx(t), "job-b")
	if err != nil || !slices.Equal(rk, []string{"job-b.run-3"}) {
		t.Fatalf("keys of job-b: %v %v", rk, err)
	}
}

// TestConcurrentWritersTwoServers races two writers, each on its own
// server's connection, over one key: in every round both read the same
// revision and both update it, and exactly one wins. Then both increment
// a counter with read-modify-CAS loops: no increment is lost.
func TestConcurrentWritersTwoServers(t *testing.T) {
	b := setup(t, 3, records.Options{})
	tables := []*records.Table[records.JobRecord]{b.rec[0].Jobs, b.rec[1].Jobs}
	if _, err := tables[0].Create(ctx(t), "job-x", job("job-x")); err != nil {
		t.Fatal(err)
	}
	const rounds = 20
	for round := range rounds {
		e, err := tables[0].Get(ctx(t), "job-x")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]error, 2)
		for w := range 2 {
			wg.Go(func() {
				v := e.Value
				v.HaltedBy = []string{"w0", "w1"}[w]
				<-start
				_, results[w] = tables[w].Update(ctx(t), "job-x", v, e.Revision)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for w, err := range results {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, records.ErrConflict):
				t.Fatalf("round %d writer %d: %v", round, w, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers won revision %d, want exactly 1", round, won, e.Revision)
		}
	}

	// Increments: StoppedAt is the counter.
	const each = 25
	var wg sync.WaitGroup
	revs := make([][]uint64, 2)
	for w := range 2 {
		wg.Go(func() {
			for done := 0; done < each; {
				e, err := tables[w].Get(ctx(t), "job-x")
				if err != nil {
					t.Error(err)
					return
				}
				v := e.Value
				v.StoppedAt++
				rev, err := tables[w].Update(ctx(t), "job-x", v, e.Revision)
				if errors.Is(err, records.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				revs[w] = append(revs[w], rev)
				done++
			}
		})
	}
	wg.Wait()
	e, err := tables[1].Get(ctx(t), "job-x")
	if err != nil {
		t.Fatal(err)
	}
	if e.Value.StoppedAt != 2*each {
		t.Fatalf("counter %d after %d increments", e.Value.StoppedAt, 2*each)
	}
	all := append(append([]uint64{}, revs[0]...), revs[1]...)
	slices.Sort(all)
	if len(slices.Compact(all)) != 2*each {
		t.Fatalf("two writers were acknowledged the same revision: %v", revs)
	}
}
