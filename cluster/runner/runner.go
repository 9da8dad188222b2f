package runner

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
)

// Host hosts a claimed run's child agent on this node and leases it the
// run's task. internal/daemon implements it over the registry and the
// agent actors' lease.
type Host interface {
	// Start hosts the child described by run.Child with cwd as its
	// working directory and leases it run.Task. An error means the run
	// cannot start here (it ends failed with it).
	Start(ctx context.Context, run records.RunRecord, cwd string) (Lease, error)
}

// Lease is one child's lease of a run, as Host.Start made it. Its
// methods are safe for concurrent use.
type Lease interface {
	// Started is closed once the child accepted the task.
	Started() <-chan struct{}
	// Ended delivers how the lease ended, once.
	Ended() <-chan Outcome
	// Stopping delivers each escalation stage a stop of the leased turn
	// enters ("abort", "term", "kill") while the run is still live, so the
	// record shows a stop that is stuck; nil when the host tells none.
	Stopping() <-chan string
	// Stop stops the leased turn (abort, then the escalation); Ended
	// follows with Cancelled set. Calling it again is harmless.
	Stop()
}

// Outcome is how a lease ended: the agent's LeaseEnded, as the executor
// needs it.
type Outcome struct {
	Completed bool // the turn ended normally
	Cancelled bool // the turn ended by Stop or a client's abort
	FinalText string
	Usage     protocol.RunUsage
	Error     string // why a run that did not complete ended
	StopStage string // the last escalation stage used, if any
}

// Defaults of Options.
const (
	// DefaultRetry is the first wait after a claim failed (no quorum),
	// doubled up to DefaultMaxRetry.
	DefaultRetry    = time.Second
	DefaultMaxRetry = 30 * time.Second
)

// Options configures a Runner.
type Options struct {
	// Records is the cluster's record layer; required.
	Records *records.Records
	// Node is this node's name; Incarnation its current incarnation
	// (it grows when the others declare this node dead while it runs).
	// Required.
	Node        string
	Incarnation func() string
	// Capacity is how many runs this node may hold at once
	// (jobs.max_active); required, at least 1.
	Capacity func() int
	// Host hosts the children; Git makes their worktrees and pushes
	// them. Required.
	Host Host
	Git  *Git
	// Lease is how long a run's claim holds before it is renewed (the
	// records' Options.Lease; default records.DefaultLease). The runner
	// renews every third of it and claims at least once per Lease.
	Lease  time.Duration
	Logger *slog.Logger
	// Retry and MaxRetry bound the waits after a failed claim (defaults
	// DefaultRetry, DefaultMaxRetry).
	Retry, MaxRetry time.Duration
	// Now is the clock of the records it writes (default time.Now).
	Now func() time.Time
	// CacheIdle is how long a cache repository no run used is kept
	// (default DefaultCacheIdle); the runner prunes older ones
	// (Git.Prune) when it starts and every PruneEvery.
	CacheIdle time.Duration
}

// PruneEvery is how often a runner looks for cache repositories to prune.
const PruneEvery = time.Hour

// Runner claims runs for this node and executes them. Run it with Run;
// Running is safe to call from any goroutine.
type Runner struct {
	o    Options
	log  *slog.Logger
	wake chan struct{}

	mu sync.Mutex // protects running
	// running are the runs this node holds now, by key, from their claim
	// to their terminal write (or to being given up).
	running map[string]bool
	wg      sync.WaitGroup
}

// New checks o and returns a Runner.
func New(o Options) (*Runner, error) {
	if o.Records == nil || o.Node == "" || o.Incarnation == nil || o.Capacity == nil || o.Host == nil || o.Git == nil {
		return nil, errors.New("runner: Records, Node, Incarnation, Capacity, Host and Git are required")
	}
	o.Lease = cmp.Or(o.Lease, records.DefaultLease)
	o.Retry = cmp.Or(o.Retry, DefaultRetry)
	o.MaxRetry = cmp.Or(o.MaxRetry, DefaultMaxRetry)
	o.CacheIdle = cmp.Or(o.CacheIdle, DefaultCacheIdle)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{o: o, log: o.Logger, wake: make(chan struct{}, 1), running: map[string]bool{}}, nil
}

// Capacity is how many runs this node may hold at once now.
func (r *Runner) Capacity() int { return r.o.Capacity() }

// Running is how many runs this node holds now (its load).
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// Wake asks the claimer to look at the queue again.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run claims and executes runs until ctx ends, then waits for its
// executors, which stop without writing: a stopping daemon's runs are
// interrupted by whoever declares it dead, or by its next incarnation.
func (r *Runner) Run(ctx context.Context) {
	defer r.wg.Wait()
	r.wg.Go(func() { r.followQueue(ctx) })
	r.wg.Go(func() { r.pruneCaches(ctx) })
	wait := r.o.Retry
	safety := time.NewTimer(r.o.Lease)
	defer safety.Stop()
	r.Wake()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-safety.C:
		}
		safety.Reset(r.o.Lease)
		if err := r.claim(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("cluster: claim failed; retrying", "retry_in", wait.String(), "err", err)
			safety.Reset(wait)
			wait = min(2*wait, r.o.MaxRetry)
			continue
		}
		wait = r.o.Retry
	}
}

// claim takes what this node has room for and starts an executor for
// each run it got. Never more than the room: the free count is taken
// before the claim and every claimed run counts at once.
func (r *Runner) claim(ctx context.Context) error {
	free := r.o.Capacity() - r.Running()
	if free <= 0 {
		return nil
	}
	got, err := r.o.Records.Claim(ctx, r.o.Node, r.o.Incarnation(), free)
	for _, e := range got {
		// Claimed runs are this node's even when Claim failed later on.
		r.mu.Lock()
		r.running[e.Key] = true
		r.mu.Unlock()
		r.wg.Go(func() {
			defer r.ended(e.Key)
			newExec(r, e).run(ctx)
		})
	}
	if err == nil && len(got) == free {
		r.Wake() // there may be more; look again once these are counted
	}
	return err
}

// ended forgets a run and wakes the claimer: there is room again.
func (r *Runner) ended(key string) {
	r.mu.Lock()
	delete(r.running, key)
	r.mu.Unlock()
	r.Wake()
}

// followQueue wakes the claimer on every change of the claim queue. A
// watch that closes (the connection went away) is opened again.
func (r *Runner) followQueue(ctx context.Context) {
	wait := r.o.Retry
	for ctx.Err() == nil {
		ch, err := r.o.Records.Claims.Watch(ctx, "")
		if err != nil {
			r.log.Warn("cluster: claim queue not followed; retrying", "retry_in", wait.String(), "err", err)
			if !clock.Sleep(ctx, wait) {
				return
			}
			wait = min(2*wait, r.o.MaxRetry)
			continue
		}
		wait = r.o.Retry
		for c := range ch {
			if !c.Deleted {
				r.Wake()
			}
		}
	}
}

// pruneCaches removes the cache repositories no run used for CacheIdle
// (Git.Prune), now and every PruneEvery, until ctx ends.
func (r *Runner) pruneCaches(ctx context.Context) {
	t := time.NewTicker(PruneEvery)
	defer t.Stop()
	for {
		removed, err := r.o.Git.Prune(ctx, r.o.CacheIdle, time.Now())
		for _, c := range removed {
			r.log.Info("cluster: removed a repository cache no run used for "+r.o.CacheIdle.String(), "cache", c)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("cluster: repository caches not pruned", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// InterruptPrevious interrupts the runs this node held in a previous
// incarnation (it restarted, or the others declared it dead while it ran)
// and returns them: the same compare-and-set a survivor's declaration
// does, so each run is interrupted once across the cluster whoever gets
// there first. It retries while the cluster has no quorum, until ctx ends.
func (r *Runner) InterruptPrevious(ctx context.Context, previous string) ([]records.Entry[records.RunRecord], error) {
	wait := r.o.Retry
	var all []records.Entry[records.RunRecord]
	for {
		got, err := r.o.Records.InterruptNodeRuns(ctx, r.o.Node, previous)
		all = append(all, got...)
		if err == nil || !errors.Is(err, records.ErrUnavailable) {
			return all, err
		}
		if !clock.Sleep(ctx, wait) {
			return all, err
		}
		wait = min(2*wait, r.o.MaxRetry)
	}
}

// HeldBy lists the runs this node held in incarnation inc, in any state
// (a restarted node retires the worktrees of those that were
// interrupted). It lists the whole runs bucket (docs/cluster.md, known
// limits).
func (r *Runner) HeldBy(ctx context.Context, inc string) ([]records.Entry[records.RunRecord], error) {
	all, err := r.o.Records.Runs.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []records.Entry[records.RunRecord]
	for _, e := range all {
		if e.Value.Node == r.o.Node && e.Value.Incarnation == inc {
			out = append(out, e)
		}
	}
	return out, nil
}
