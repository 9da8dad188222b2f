package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/sparep"
	"github.com/shard-dev/shard/protocol"
)

// gate, once armed, makes the store's next write transaction wait in
// BeforeCommit until release is closed, so that the writes issued meanwhile queue up
// and form the next transaction: batching without any timing.
type gate struct {
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
	first   bool // armed: hold the next transaction
	// fail, when set, is what BeforeCommit returns for a transaction of
	// more than one write.
	fail    error
	batches []int // writes per attempted commit, in order
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.first = true
	g.batches = nil
}

func (g *gate) beforeCommit(writes int) error {
	g.mu.Lock()
	first := g.first
	g.first = false
	g.batches = append(g.batches, writes)
	fail := g.fail
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	if writes > 1 && fail != nil {
		return fail
	}
	return nil
}

func (g *gate) attempts() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.batches...)
}

// queued is how many writes wait for the writer goroutine.
func (s *Store) queued() int {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return len(s.commits.queue)
}

// waitBriefly yields while a test polls for a condition.
func waitBriefly() { time.Sleep(time.Millisecond) }

// holdFirstCommit arms the gate and starts one write (which it holds), then starts
// the writes of run concurrently and returns once they are all queued
// behind it; release lets everything go. first reports the first write's
// outcome.
func holdFirstCommit(t *testing.T, s *Store, g *gate, firstWrite func() error, n int, run func(i int)) (first <-chan error, wait func()) {
	t.Helper()
	out := make(chan error, 1)
	g.arm()
	go func() { out <- firstWrite() }()
	<-g.entered
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i)
		}()
	}
	for s.queued() < n {
		// Spin until every write is queued; no timing is asserted.
		waitBriefly()
	}
	close(g.release)
	return out, wg.Wait
}

func testJob(id, parent string, runs ...protocol.RunState) Job {
	j := Job{JobID: id, ParentAgentID: parent, Strategy: protocol.StrategyParallel, CreatedAt: 1}
	for i, st := range runs {
		j.Runs = append(j.Runs, Run{RunID: fmt.Sprintf("run-%s-%d", id, i), Index: i, AgentID: fmt.Sprintf("agent-%s-%d", id, i), State: st})
	}
	return j
}

func childAgent(id, parent string) Agent {
	return Agent{AgentID: id, SessionID: "sess-" + id, Cwd: "/w", ParentAgentID: parent, Depth: 1}
}

// Concurrent creates queued behind a commit in flight share the next
// transaction; every one is acknowledged and durable after a reopen.
func TestGroupCommitBatchesConcurrentCreates(t *testing.T) {
	const n = 100
	path := filepath.Join(t.TempDir(), "shard.db")
	g := newGate()
	s, err := Open(path, Options{BeforeCommit: g.beforeCommit})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	first, wait := holdFirstCommit(t, s, g, func() error { return s.CreateAgent(agent("agent-parent", 1)) }, n, func(i int) {
		child := fmt.Sprintf("agent-c%03d", i)
		_, errs[i] = s.CreateJob(testJob(fmt.Sprintf("job-%03d", i), "agent-parent", protocol.RunQueued),
			[]Agent{childAgent(child, "agent-parent")}, map[string]string{fmt.Sprintf("alias-%03d", i): child})
	})
	wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if got := g.attempts(); len(got) != 2 || got[0] != 1 || got[1] != n {
		t.Fatalf("transactions (writes each) = %v, want [1 %d]", got, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	all, err := s.Jobs()
	if err != nil || len(all) != n {
		t.Fatalf("after reopen: %d jobs, %v; want %d", len(all), err, n)
	}
	for i := range n {
		child := fmt.Sprintf("agent-c%03d", i)
		if _, err := s.GetAgent(child); err != nil {
			t.Errorf("agent %s: %v", child, err)
		}
		if id, ok, err := s.Alias("agent-parent", fmt.Sprintf("alias-%03d", i)); err != nil || !ok || id != child {
			t.Errorf("alias %d = %q %v %v", i, id, ok, err)
		}
	}
}

// A failed commit fails every write of its transaction and stores none.
func TestGroupCommitFailureFailsTheWholeBatch(t *testing.T) {
	const n = 20
	path := filepath.Join(t.TempDir(), "shard.db")
	injected := errors.New("injected commit failure")
	g := newGate()
	g.fail = injected
	s, err := Open(path, Options{BeforeCommit: g.beforeCommit})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	first, wait := holdFirstCommit(t, s, g, func() error {
		_, err := s.CreateJob(testJob("job-first", "agent-parent", protocol.RunQueued), nil, nil)
		return err
	}, n, func(i int) {
		_, errs[i] = s.CreateJob(testJob(fmt.Sprintf("job-%03d", i), "agent-parent", protocol.RunQueued), nil, nil)
	})
	wait()
	if err := <-first; err != nil {
		t.Fatalf("the write alone in its transaction: %v", err)
	}
	for i, err := range errs {
		if !errors.Is(err, injected) {
			t.Errorf("create %d: %v, want the injected failure", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	all, err := s.Jobs()
	if err != nil || len(all) != 1 || all[0].JobID != "job-first" {
		t.Fatalf("after reopen: %+v, %v; want only job-first", all, err)
	}
}

// A write that fails (a compare-and-set conflict, a repeated request id,
// a panic) is answered from a transaction of its own, after the rest of
// its batch committed; the others are unaffected. Writes in one batch see
// the writes before them.
func TestGroupCommitFailedWriteLeavesTheBatch(t *testing.T) {
	const n = 30
	g := newGate()
	s, err := Open(filepath.Join(t.TempDir(), "shard.db"), Options{BeforeCommit: g.beforeCommit})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := s.CreateJob(testJob("job-counter", "agent-parent", protocol.RunQueued), nil, nil); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		err      error
		existing string
		panicked any
	}
	out := make([]outcome, n)
	dup := func(id string) Job {
		j := testJob(id, "agent-parent", protocol.RunQueued)
		j.RequestID = "req-1"
		return j
	}
	first, wait := holdFirstCommit(t, s, g, func() error {
		_, err := s.UpdateJob("job-counter", func(j *Job) ([]Report, error) { j.StoppedAt = 1000; return nil, nil })
		return err
	}, n, func(i int) {
		switch {
		case i == 0 || i == 1:
			// The same request id twice: one stores its job, the other
			// gets ErrExists naming it.
			out[i].existing, out[i].err = s.CreateJob(dup(fmt.Sprintf("job-dup-%d", i)), nil, nil)
		case i == 2:
			_, out[i].err = s.UpdateJob("job-counter", func(*Job) ([]Report, error) {
				return nil, fmt.Errorf("%w: not the state I expected", ErrConflict)
			})
		case i == 3:
			defer func() { out[i].panicked = recover() }()
			_, _ = s.UpdateJob("job-counter", func(*Job) ([]Report, error) { panic("boom") })
		default:
			// Each increment sees the ones committed before it, in the
			// same transaction or not.
			_, out[i].err = s.UpdateJob("job-counter", func(j *Job) ([]Report, error) {
				j.StoppedAt++
				return nil, nil
			})
		}
	})
	wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	stored := ""
	for i := range 2 {
		switch {
		case out[i].err == nil:
			if stored != "" {
				t.Fatal("both creates with one request id succeeded")
			}
			stored = fmt.Sprintf("job-dup-%d", i)
		case !errors.Is(out[i].err, ErrExists):
			t.Fatalf("repeated request id: %v, want ErrExists", out[i].err)
		}
	}
	for i := range 2 {
		if out[i].err != nil && out[i].existing != stored {
			t.Fatalf("repeated request id names %q, want %q", out[i].existing, stored)
		}
	}
	if !errors.Is(out[2].err, ErrConflict) {
		t.Fatalf("conflicting update: %v, want ErrConflict", out[2].err)
	}
	if out[3].panicked != "boom" {
		t.Fatalf("a panicking update: recovered %v in the caller, want boom", out[3].panicked)
	}
	for i := 4; i < n; i++ {
		if out[i].err != nil {
			t.Fatalf("increment %d: %v", i, out[i].err)
		}
	}
	j, err := s.GetJob("job-counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1000 + n - 4); j.StoppedAt != want {
		t.Fatalf("counter = %d, want %d", j.StoppedAt, want)
	}
	if _, err := s.GetJob(stored); err != nil {
		t.Fatalf("the stored duplicate: %v", err)
	}
	// The batch was retried without the three failed writes, which then
	// failed again alone (a failed transaction never reaches BeforeCommit).
	if got, want := g.attempts(), []int{1, n - 3}; !slices.Equal(got, want) {
		t.Fatalf("committed transactions (writes each) = %v, want %v", got, want)
	}
}

// TestGroupCommitTouchesItsSpareBurst: a group commit turns the store's
// spare-P burst on (package sparep: its fdatasyncs park the writer's P).
func TestGroupCommitTouchesItsSpareBurst(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	spare := (&sparep.Lender{}).Burst()
	t.Cleanup(spare.Stop)
	s, err := Open(filepath.Join(t.TempDir(), "shard.db"), Options{Spare: spare})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if spare.On() {
		t.Fatal("burst on before any group commit")
	}
	if _, err := s.CreateJob(testJob("job-spare", "agent-parent", protocol.RunQueued), nil, nil); err != nil {
		t.Fatal(err)
	}
	if !spare.On() {
		t.Fatal("a group commit did not turn the store's spare burst on")
	}
}

// Writes queued without waiting (CreateJobWorkspacesThen) share the next
// transaction like the others; the writer answers each once it committed,
// never before, and a write that fails gets its own answer (here a repeated
// request id, with the existing job's id) while the rest commit.
func TestCreateJobThenAnswersFromTheWriter(t *testing.T) {
	const n = 20
	path := filepath.Join(t.TempDir(), "shard.db")
	g := newGate()
	s, err := Open(path, Options{BeforeCommit: g.beforeCommit})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAgent(agent("agent-parent", 1)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		i        int
		existing string
		err      error
	}
	answers := make(chan answer, n+2)
	first := testJob("job-first", "agent-parent", protocol.RunQueued)
	first.RequestID = "req-1"
	g.arm()
	firstDone := make(chan error, 1)
	go func() { _, err := s.CreateJob(first, nil, nil); firstDone <- err }()
	<-g.entered
	for i := range n {
		s.CreateJobWorkspacesThen(testJob(fmt.Sprintf("job-%03d", i), "agent-parent", protocol.RunQueued), nil, nil, nil,
			func(existing string, err error) { answers <- answer{i, existing, err} })
	}
	again := testJob("job-again", "agent-parent", protocol.RunQueued)
	again.RequestID = "req-1"
	s.CreateJobWorkspacesThen(again, nil, nil, nil, func(existing string, err error) { answers <- answer{n, existing, err} })
	// Invalid: answered at once, on this goroutine.
	s.CreateJobWorkspacesThen(Job{JobID: "job-bad"}, nil, nil, nil, func(existing string, err error) { answers <- answer{n + 1, existing, err} })
	if a := <-answers; a.i != n+1 || !errors.Is(a.err, ErrInvalid) {
		t.Fatalf("first answer = %+v, want the invalid job's ErrInvalid", a)
	}
	select {
	case a := <-answers:
		t.Fatalf("answered %+v while its transaction was held", a)
	default:
	}
	close(g.release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	for range n + 1 {
		a := <-answers
		switch {
		case a.i == n && (!errors.Is(a.err, ErrExists) || a.existing != "job-first"):
			t.Fatalf("repeated request: %+v, want ErrExists naming job-first", a)
		case a.i < n && a.err != nil:
			t.Fatalf("create %d: %v", a.i, a.err)
		}
	}
	// The failed attempts never reach BeforeCommit: the batch committed
	// once, without the repeated request.
	if got := g.attempts(); !slices.Equal(got, []int{1, n}) {
		t.Fatalf("transactions (writes each) = %v, want [1 %d]", got, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	all, err := s.Jobs()
	if err != nil || len(all) != n+1 {
		t.Fatalf("after reopen: %d jobs, %v; want %d", len(all), err, n+1)
	}
}
