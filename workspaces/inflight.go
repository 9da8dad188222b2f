package workspaces

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
)

// errShutdown is the cause of the context of the actor's work once the
// actor stops (the daemon shuts down).
var errShutdown = errors.New("workspaces: the daemon is shutting down")

// inflight is the actor's work off the mailbox. Every goroutine the actor
// starts runs in the daemon's group under a context of the actor's
// lifetime, bounded by Deps.Timeout. When the actor stops, halt cancels
// that context, which kills the git and setup processes of the commands
// in flight instead of awaiting them, waits only for those goroutines to
// return, and hands back the results the stopping mailbox would drop.
type inflight struct {
	group   *xsync.Group
	timeout time.Duration
	life    context.Context
	stop    context.CancelCauseFunc
	// running counts the goroutines; Go adds to it and halt waits for it,
	// both on the mailbox.
	running sync.WaitGroup

	mu      sync.Mutex // protects results
	results []*done    // sent to the mailbox and not handled yet
}

func newInflight(group *xsync.Group, timeout time.Duration) *inflight {
	life, stop := context.WithCancelCause(context.Background())
	return &inflight{group: group, timeout: timeout, life: life, stop: stop}
}

// Go runs f in the group. It reports false, and runs nothing, when the
// group refused (the daemon is stopping). Called on the mailbox only.
func (in *inflight) Go(f func(ctx context.Context)) bool {
	in.running.Add(1)
	ok := in.group.Go(func() {
		defer in.running.Done() // also when a failpoint ends the goroutine
		ctx, cancel := context.WithTimeout(in.life, in.timeout)
		defer cancel()
		f(ctx)
	})
	if !ok {
		in.running.Done()
	}
	return ok
}

// deliver sends a command's result to the actor, and keeps it until the
// actor takes it.
func (in *inflight) deliver(sys *actor.ActorSystem, self *actor.PID, d *done) {
	in.mu.Lock()
	in.results = append(in.results, d)
	in.mu.Unlock()
	sys.Root.Send(self, d)
}

// take reports whether d was not handled yet, and forgets it.
func (in *inflight) take(d *done) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, r := range in.results {
		if r == d {
			in.results = append(in.results[:i], in.results[i+1:]...)
			return true
		}
	}
	return false
}

// halt cancels the work in flight, waits for its goroutines to return
// and hands back the results not handled yet, in the order they came.
// Called on the mailbox, when the actor stops.
func (in *inflight) halt() []*done {
	in.stop(errShutdown)
	in.running.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.results
	in.results = nil
	return out
}

// interrupted reports whether ctx ended because the actor stopped: the
// command's processes were killed, and what it left on disk is for startup
// reconciliation, as after a crash, never rolled back or retired on the
// strength of a killed git.
func interrupted(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errShutdown)
}

// shutdownErr is err, or the answer of a command the shutdown cut short
// when it failed for that.
func shutdownErr(ctx context.Context, err error) error {
	if err != nil && interrupted(ctx) && errors.Is(err, context.Canceled) {
		return errShuttingDown()
	}
	return err
}

// errShuttingDown answers what the actor cannot do because the daemon is
// stopping.
func errShuttingDown() error {
	return protocol.Errorf(protocol.CodeConflict, "daemon is shutting down")
}
