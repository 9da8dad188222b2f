package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
)

// errLost is a run whose record is no longer this node's: a survivor
// interrupted it (this incarnation was declared dead), or it ended. The
// executor gives it up and writes nothing more.
var errLost = errors.New("runner: the run is no longer this node's")

// writeAttempts bounds the compare-and-set loop of one write: each
// conflict is the parent's node writing the record (a stop request), and
// the loop reads it again and applies its change to what is there.
const writeAttempts = 16

// exec carries one claimed run to its end. Its fields are its goroutine's
// own; the record's watch reaches it through a channel.
type exec struct {
	r   *Runner
	cur records.Entry[records.RunRecord]
	inc string // the incarnation the run was claimed in

	timedOut bool
	stopped  bool // the lease was told to stop
	lease    Lease
	// leave, for a relaunch, says it is done with its child's worktree
	// (Git.Leave); nil for any other run.
	leave func()
}

func newExec(r *Runner, e records.Entry[records.RunRecord]) *exec {
	return &exec{r: r, cur: e, inc: e.Value.Incarnation}
}

// run is the run's life on this node (the package doc's diagram).
func (x *exec) run(ctx context.Context) {
	log := x.r.log.With("job_id", x.cur.Value.JobID, "run_id", x.cur.Value.RunID)
	now := x.r.o.Now()
	err := x.must(ctx, func(run *records.RunRecord) {
		run.State = protocol.RunStarting
		run.StartedAt = now.UnixMilli()
		if run.TimeoutMs > 0 {
			run.Deadline = now.Add(time.Duration(run.TimeoutMs) * time.Millisecond).UnixMilli()
		}
		run.LeaseUntil = now.Add(x.r.o.Lease).UnixMilli()
	})
	if err != nil {
		x.giveUp(ctx, log, err)
		return
	}
	log.Info("cluster: run claimed", "agent_id", x.cur.Value.AgentID)
	// Follow the record from here: a stop may be asked while the
	// worktree is made.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changes := x.watch(wctx)

	run := x.cur.Value
	if run.Git == nil {
		x.finish(ctx, log, Outcome{Error: "the run has no git place (remote, base, branch)"}, nil)
		return
	}
	prepare := x.r.o.Git.Prepare
	if run.Host != "" {
		// A relaunch of a child this node hosts: it goes on in its own
		// worktree, on its branch (Git.Resume).
		prepare = x.r.o.Git.Resume
	}
	ws, err := prepare(ctx, run)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		x.finish(ctx, log, Outcome{Error: fmt.Sprintf("cannot make the run's worktree: %v", err)}, nil)
		return
	}
	if run.Host != "" {
		// Done with the child's worktree once the run is, on every way
		// out; before its own release (release).
		x.leave = sync.OnceFunc(func() { x.r.o.Git.Leave(ws) })
		defer x.leave()
	}
	if x.cur.Value.StopRequestedAt != 0 {
		x.finish(ctx, log, Outcome{Cancelled: true, Error: "stopped before it started"}, &ws)
		return
	}
	x.lease, err = x.r.o.Host.Start(ctx, x.cur.Value, ws.Dir)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// Nothing ran in the worktree: nothing to push.
		x.finish(ctx, log, Outcome{Error: fmt.Sprintf("cannot host the child: %v", err)}, nil)
		return
	}
	var deadline <-chan time.Time
	if run.Deadline > 0 {
		// From the deadline recorded at starting: the worktree's making
		// counts against the run's time, as a local run's setup does.
		t := time.NewTimer(time.UnixMilli(run.Deadline).Sub(x.r.o.Now()))
		defer t.Stop()
		deadline = t.C
	}
	renew := time.NewTicker(x.r.o.Lease / 3)
	defer renew.Stop()
	started := x.lease.Started()
	for {
		select {
		case <-ctx.Done():
			return // the daemon stops: the run is interrupted later, once
		case <-started:
			started = nil
			if err := x.must(ctx, func(run *records.RunRecord) {
				run.State = protocol.RunActive
				run.LeaseUntil = x.r.o.Now().Add(x.r.o.Lease).UnixMilli()
			}); err != nil {
				x.giveUp(ctx, log, err)
				return
			}
		case <-renew.C:
			if changes == nil {
				changes = x.watch(wctx) // it could not open: try again
			}
			if err := x.write(ctx, func(run *records.RunRecord) {
				run.LeaseUntil = x.r.o.Now().Add(x.r.o.Lease).UnixMilli()
			}); err != nil {
				if errors.Is(err, errLost) {
					x.giveUp(ctx, log, err)
					return
				}
				log.Warn("cluster: run lease not renewed", "err", err)
			}
		case c, ok := <-changes:
			if !ok {
				changes = x.watch(wctx) // the watch closed: follow again
				continue
			}
			if c.Revision < x.cur.Revision {
				continue // older than what this node wrote since
			}
			if !x.mine(&c.Value) {
				x.giveUp(ctx, log, errLost)
				return
			}
			x.cur = records.Entry[records.RunRecord]{Key: c.Key, Value: c.Value, Revision: c.Revision}
			if c.Value.StopRequestedAt != 0 && !x.stopped {
				log.Info("cluster: run stop requested")
				x.stopped = true
				x.lease.Stop()
			}
		case <-deadline:
			deadline = nil
			x.timedOut = true
			x.stopped = true
			x.lease.Stop()
		case stage := <-x.lease.Stopping():
			if stage == "" || stage == "none" || stage == x.cur.Value.StopStage {
				continue
			}
			if err := x.write(ctx, func(run *records.RunRecord) { run.StopStage = stage }); errors.Is(err, errLost) {
				x.giveUp(ctx, log, err)
				return
			}
		case out := <-x.lease.Ended():
			x.finish(ctx, log, out, &ws)
			return
		}
	}
}

// watch follows the run's record (the job's prefix, filtered to this
// run): changes of this run only, current ones after the Synced marker.
// A watch that cannot open delivers nothing and is tried again when the
// lease is renewed next.
func (x *exec) watch(ctx context.Context) <-chan records.Change[records.RunRecord] {
	out := make(chan records.Change[records.RunRecord], 1)
	key := x.cur.Key
	ch, err := x.r.o.Records.Runs.Watch(ctx, x.cur.Value.JobID)
	if err != nil {
		x.r.log.Warn("cluster: run record not followed", "run_id", x.cur.Value.RunID, "err", err)
		return nil // a nil channel: the select skips it
	}
	go func() {
		defer close(out)
		for c := range ch {
			if c.Key != key || c.Synced || c.Err != nil || c.Deleted {
				if c.Deleted && c.Key == key {
					c.Value = records.RunRecord{} // gone: not this node's
				} else {
					continue
				}
			}
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// mine reports whether a record is still this node's run to write.
func (x *exec) mine(run *records.RunRecord) bool {
	return run.Node == x.r.o.Node && run.Incarnation == x.inc && !run.State.Terminal()
}

// finish commits and pushes what the run did (when it has a worktree)
// and writes the terminal record: the outcome's state, unless the push
// failed, which fails the run.
func (x *exec) finish(ctx context.Context, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}, out Outcome, ws *Workspace) {
	run := x.cur.Value
	var pushed Pushed
	var pushErr error
	if ws != nil {
		pushed, pushErr = x.r.o.Git.Finish(ctx, run, *ws)
		if ctx.Err() != nil {
			return
		}
	}
	to := protocol.RunFailed
	// A stop the parent's node asked at or after the run's deadline is
	// the deadline (both sides keep it; whichever acts first, the run
	// ends timed_out).
	cur := x.cur.Value
	lateStop := cur.Deadline > 0 && cur.StopRequestedAt >= cur.Deadline
	switch {
	case pushErr != nil:
	case x.timedOut || lateStop && !out.Completed:
		to = protocol.RunTimedOut
	case out.Completed:
		to = protocol.RunCompleted
	case out.Cancelled || x.cur.Value.StopRequestedAt != 0:
		to = protocol.RunCancelled
	}
	end := func(run *records.RunRecord) {
		run.State = to
		run.EndedAt = x.r.o.Now().UnixMilli()
		run.LeaseUntil = 0
		run.FinalText = out.FinalText
		if out.Usage != (protocol.RunUsage{}) {
			u := out.Usage
			run.Usage = &u
		}
		run.Error = ""
		switch {
		case pushErr != nil:
			run.Error = fmt.Sprintf("cannot push the run's branch: %v", pushErr)
		case to == protocol.RunTimedOut:
			run.Error = "deadline exceeded"
		case to != protocol.RunCompleted:
			run.Error = out.Error
		}
		if out.StopStage != "" && out.StopStage != "none" {
			run.StopStage = out.StopStage
		}
		if ws != nil {
			w := protocol.RunWorkspace{Branch: run.Git.Branch, DiffStat: pushed.DiffStat}
			if run.Workspace != nil {
				w.WorkspaceID, w.Cwd = run.Workspace.WorkspaceID, run.Workspace.Cwd
			}
			run.Workspace = &w
			g := *run.Git
			g.Head = pushed.Head
			run.Git = &g
		}
	}
	if err := x.must(ctx, end); err != nil {
		x.giveUp(ctx, log, err)
		return
	}
	log.Info("cluster: run ended", "state", string(to))
	if ws == nil {
		return
	}
	x.release(ctx, log, ws.Dir, pushed, pushErr)
}

// release retires the worktree dir of a run whose terminal record is
// written, once its branch is on the remote; a worktree whose push failed
// is kept (its work is nowhere else), and the log says so. dir is the
// run's own, or for a relaunch its child's (Git.Resume).
func (x *exec) release(ctx context.Context, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}, dir string, pushed Pushed, pushErr error) {
	if x.leave != nil {
		x.leave()
	}
	if pushErr != nil || pushed.Head == "" {
		log.Warn("cluster: the run's worktree is kept: its branch was not pushed", "worktree", dir)
		return
	}
	gone, err := x.r.o.Git.Release(ctx, x.cur.Value, pushed.Head)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Warn("cluster: the run's worktree is kept", "worktree", dir, "err", err)
	case gone:
		log.Info("cluster: the run's worktree retired (its branch is on the remote)")
	}
}

// giveUp stops the lease of a run that is not (or no longer) this node's
// to write, or whose record cannot be written, and logs why.
func (x *exec) giveUp(ctx context.Context, log interface{ Warn(string, ...any) }, err error) {
	if x.lease != nil && !x.stopped {
		x.stopped = true
		x.lease.Stop()
	}
	if ctx.Err() == nil {
		log.Warn("cluster: run given up", "err", err)
	}
}

// must writes a step the run cannot go on without (starting, active, its
// end): while the cluster has no quorum it tries again, until the daemon
// stops (then the run is interrupted later, once).
func (x *exec) must(ctx context.Context, change func(*records.RunRecord)) error {
	wait := x.r.o.Retry
	err := x.write(ctx, change)
	for errors.Is(err, records.ErrUnavailable) {
		x.r.log.Warn("cluster: run record not written; retrying", "run_id", x.cur.Value.RunID,
			"retry_in", wait.String(), "err", err)
		if !clock.Sleep(ctx, wait) {
			break
		}
		wait = min(2*wait, x.r.o.MaxRetry)
		err = x.write(ctx, change)
	}
	return err
}

// write applies change to the run's record as a compare-and-set: on a
// conflict it reads the record again and applies change to what is there,
// as long as the run is still this node's (errLost otherwise). The record
// it wrote becomes x.cur.
func (x *exec) write(ctx context.Context, change func(*records.RunRecord)) error {
	t := x.r.o.Records.Runs
	for range writeAttempts {
		run := x.cur.Value
		if run.Git != nil {
			g := *run.Git
			run.Git = &g
		}
		change(&run)
		rev, err := t.Update(ctx, x.cur.Key, run, x.cur.Revision)
		if err == nil {
			x.cur = records.Entry[records.RunRecord]{Key: x.cur.Key, Value: run, Revision: rev}
			return nil
		}
		if !errors.Is(err, records.ErrConflict) {
			return err
		}
		e, gerr := t.Get(ctx, x.cur.Key)
		if errors.Is(gerr, records.ErrNotFound) {
			return errLost
		}
		if gerr != nil {
			return gerr
		}
		if !x.mine(&e.Value) {
			return errLost
		}
		x.cur = e
	}
	return fmt.Errorf("runner: run %s: the record kept changing", x.cur.Key)
}
