// Package remote is the parent's node's side of subagent runs that any
// node of a cluster may take (docs/protocol.md §13 "Runs on other nodes"):
// it publishes a job's runs to the cluster's records (cluster/records)
// with their branches pushed to the shared git remote, follows their
// records as the nodes that claim them write them, asks for their stops,
// and interrupts a lost node's runs. The jobs coordinator and its job
// actors call it from goroutines, never from a mailbox: every method
// waits on the cluster or on git.
//
// It holds no state of its own beyond its handles: the records decide,
// and the parent's node mirrors them into its own job records, whose
// terminal transition (with its completion report, one transaction) is
// what makes each run reported once.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// OriginRemote is the git remote a run's branch goes through: a
// repository whose remote of this name every node reaches may have its
// isolated runs placed on any node (docs/protocol.md §13).
const OriginRemote = "origin"

// Retry bounds of a follow that lost its watch, and of the background
// writes (a lost node's runs interrupted).
const (
	retryMin = 200 * time.Millisecond
	retryMax = 5 * time.Second
)

// Runs is a clustered node's handle on the runs it publishes. Its
// records are open once the cluster has a quorum (SetRecords); until
// then Records is nil and a create keeps its runs on this node.
type Runs struct {
	node string
	git  git.Runner
	log  *slog.Logger

	mu    sync.Mutex
	rec   *records.Records
	ready chan struct{}
	nodes func(node string) (incarnation uint64, alive bool)
}

// New returns the handle of node, running git through g (nil: the real
// git with its defaults).
func New(node string, g git.Runner, log *slog.Logger) *Runs {
	if g == nil {
		g = &git.Exec{}
	}
	return &Runs{node: node, git: g, log: log, ready: make(chan struct{})}
}

// Node is this node's name.
func (r *Runs) Node() string { return r.node }

// SetRecords gives the handle the cluster's records once they are open.
// Only the first call counts.
func (r *Runs) SetRecords(rec *records.Records) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rec == nil && rec != nil {
		r.rec = rec
		close(r.ready)
	}
}

// SetNodes tells the handle how this node sees the others: a node's
// current incarnation, and whether it is alive (not declared dead, nor
// unknown). A relaunch is pinned to the incarnation of its child's node
// (PublishRelaunch). Until it is set, every other node counts as
// unavailable.
func (r *Runs) SetNodes(f func(node string) (incarnation uint64, alive bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = f
}

// nodeOf is node's incarnation and whether it is alive.
func (r *Runs) nodeOf(node string) (uint64, bool) {
	r.mu.Lock()
	f := r.nodes
	r.mu.Unlock()
	if f == nil {
		return 0, false
	}
	return f(node)
}

// Records returns the records, or nil while they are not open.
func (r *Runs) Records() *records.Records {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec
}

// OpenWait bounds how long a create waits for the records of a node that
// just joined (they open once the cluster has a quorum).
const OpenWait = 30 * time.Second

// Wait returns the records once they are open, or nil when ctx ends.
func (r *Runs) Wait(ctx context.Context) *records.Records { return r.wait(ctx) }

// wait returns the records once they are open, or nil when ctx ends.
func (r *Runs) wait(ctx context.Context) *records.Records {
	select {
	case <-r.ready:
		return r.Records()
	case <-ctx.Done():
		return nil
	}
}

// Incarnation is a node's incarnation as the run records spell it
// (RunRecord.Incarnation): its decimal number.
func Incarnation(inc uint64) string { return strconv.FormatUint(inc, 10) }

// Origin returns the URL of the repository's remote "origin", or "" when
// it has none: its runs stay on this node.
func (r *Runs) Origin(ctx context.Context, repoRoot string) (string, error) {
	out, err := r.git.Run(ctx, git.Invocation{Dir: repoRoot, Args: []string{"remote", "get-url", OriginRemote}, ReadOnly: true})
	if err != nil {
		var ge *git.Error
		if errors.As(err, &ge) && ge.ExitCode > 0 {
			return "", nil // no such remote
		}
		return "", protocol.Errorf(protocol.CodeInternal, "read the repository's remote %s: %w", OriginRemote, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Publication is what a create publishes: the job, its runs (each with
// its child's manifest and workspace), and the repository they branch
// from.
type Publication struct {
	Job      store.Job
	Children map[string]store.Agent // by agent id
	RepoRoot string
	Remote   string // the URL of origin, as Origin read it
	Base     string // the commit every run's branch starts from
	// Branches are the runs' branches, by run id.
	Branches map[string]string
}

// Publish pushes each run's branch at the base commit to the remote and
// writes the job's record and each run's record (queued, claimable, but
// held off the claim queue until Follow queues it), before the create is
// answered. It leaves nothing behind when it fails:
// the branches it pushed and the records it wrote are removed, and the
// error is a protocol error naming what failed. On success it returns
// undo, which removes them all again, for a local commit that fails after
// it (a run a node claimed meanwhile is asked to stop instead).
func (r *Runs) Publish(ctx context.Context, p Publication) (undo func(context.Context), err error) {
	rec := r.Records()
	if rec == nil {
		return nil, protocol.Errorf(protocol.CodeTimeout, "the cluster's records are not open yet")
	}
	var pushed []string
	var written []records.Entry[records.RunRecord]
	jobWritten := false
	remove := func(ctx context.Context) {
		for _, e := range written {
			r.withdraw(ctx, rec, e.Key)
		}
		if jobWritten {
			if e, err := rec.Jobs.Get(ctx, p.Job.JobID); err == nil {
				_ = rec.Jobs.Delete(ctx, e.Key, e.Revision)
			}
		}
		for _, b := range pushed {
			if _, err := r.git.Run(ctx, git.Invocation{Dir: p.RepoRoot, Args: []string{"push", "--quiet", p.Remote, "--delete", "refs/heads/" + b}}); err != nil {
				r.log.Warn("cluster runs: a pushed branch was not removed", "branch", b, "err", err)
			}
		}
	}
	defer func() {
		if err != nil {
			remove(context.WithoutCancel(ctx))
		}
	}()
	for _, run := range p.Job.Runs {
		b := p.Branches[run.RunID]
		// The branch must not exist there yet: a push that would move
		// someone's branch is refused (no force).
		if _, err := r.git.Run(ctx, git.Invocation{Dir: p.RepoRoot, Args: []string{"push", "--quiet", p.Remote, p.Base + ":refs/heads/" + b}}); err != nil {
			return nil, protocol.Errorf(protocol.CodeConflict, "push the run's branch %s to the repository's remote %s: %w", b, OriginRemote, err)
		}
		pushed = append(pushed, b)
	}
	jr := records.JobRecord{JobID: p.Job.JobID, ParentAgentID: p.Job.ParentAgentID, ParentNode: r.node,
		Strategy: p.Job.Strategy, RequestID: p.Job.RequestID, CreatedAt: p.Job.CreatedAt}
	for _, run := range p.Job.Runs {
		jr.RunIDs = append(jr.RunIDs, run.RunID)
	}
	if _, err := rec.Jobs.Create(ctx, jr.JobID, jr); err != nil {
		return nil, fmt.Errorf("write the job's cluster record: %w", err)
	}
	jobWritten = true
	for _, run := range p.Job.Runs {
		child, err := json.Marshal(p.Children[run.AgentID])
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "encode the child of run %s: %w", run.RunID, err)
		}
		rr := records.RunRecord{
			RunID: run.RunID, JobID: p.Job.JobID, Index: run.Index, Name: run.Name, AgentID: run.AgentID,
			Alias: run.Alias, Task: run.Task, State: protocol.RunQueued, Anywhere: true,
			TimeoutMs: run.TimeoutMs, QueuedAt: run.QueuedAt,
			Git:   &records.RunGit{Remote: p.Remote, Base: p.Base, Branch: p.Branches[run.RunID]},
			Child: child, ParentNode: r.node,
		}
		if run.Workspace != nil {
			ws := *run.Workspace
			rr.Workspace = &ws
		}
		// Held: the record alone, with no pointer on the claim queue. Follow
		// queues it once this node's job committed (records.Queue), so a
		// write whose acknowledgement was lost, and which commits after
		// the create was answered with an error, is never run.
		key := records.RunKey(rr.JobID, rr.RunID)
		rev, err := rec.Runs.Create(ctx, key, rr)
		if err != nil {
			return nil, fmt.Errorf("write the cluster record of run %s: %w", run.RunID, err)
		}
		written = append(written, records.Entry[records.RunRecord]{Key: key, Value: rr, Revision: rev})
	}
	return remove, nil
}

// Relaunch is what a subagent.relaunch of a child that ran on another
// node publishes: the new job (one run, marked Anywhere, its task and its
// workspace binding on this node) and the run of the child it follows
// (the child's latest, whose record says where the child lives).
type Relaunch struct {
	Job       store.Job
	PrevJobID string
	PrevRunID string
}

// PublishRelaunch writes the job's record and its one run's record, held
// off the claim queue until Follow queues it, as Publish does, for a
// relaunch of a child whose latest run ran on another node
// (docs/protocol.md §13 "Runs on other nodes"). The child lives on the
// node that claimed that run (or that a relaunch of it was pinned to): the
// new run is pinned to that node in its current incarnation
// (RunRecord.Host), goes on in the child's worktree there
// (RunRecord.Worktree) and on the same branch from the same base, which is
// on the remote already, so nothing is pushed. A child whose run no node
// ever claimed was never hosted anywhere: its relaunch is an ordinary
// anywhere run with the same manifest and branch.
//
// A child's node that is not alive is refused with NODE_UNAVAILABLE
// (data.node), and a record that is gone with NOT_FOUND; nothing is
// written then. On success it returns undo, as Publish does.
func (r *Runs) PublishRelaunch(ctx context.Context, p Relaunch) (undo func(context.Context), err error) {
	rec := r.Records()
	if rec == nil {
		return nil, protocol.Errorf(protocol.CodeTimeout, "the cluster's records are not open yet")
	}
	if len(p.Job.Runs) != 1 {
		return nil, protocol.Errorf(protocol.CodeInternal, "a relaunch has one run, not %d", len(p.Job.Runs))
	}
	prevKey := records.RunKey(p.PrevJobID, p.PrevRunID)
	pe, err := rec.Runs.Get(ctx, prevKey)
	if errors.Is(err, records.ErrNotFound) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "the cluster has no record of run %s", p.PrevRunID)
	}
	if err != nil {
		return nil, fmt.Errorf("read the cluster record of run %s: %w", p.PrevRunID, err)
	}
	prev := pe.Value
	if prev.Git == nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "run %s has no git place", p.PrevRunID)
	}
	if !prev.State.Terminal() {
		return nil, protocol.Errorf(protocol.CodeConflict, "agent %s still has run %s (%s)", prev.AgentID, prev.RunID, prev.State)
	}
	host, worktree := prev.Node, prev.RunID
	if prev.Host != "" {
		host, worktree = prev.Host, prev.Worktree
	}
	run := p.Job.Runs[0]
	rr := records.RunRecord{
		RunID: run.RunID, JobID: p.Job.JobID, Index: run.Index, Name: run.Name, AgentID: run.AgentID,
		Alias: run.Alias, Task: run.Task, State: protocol.RunQueued, Anywhere: true,
		TimeoutMs: run.TimeoutMs, QueuedAt: run.QueuedAt,
		Git:   &records.RunGit{Remote: prev.Git.Remote, Base: prev.Git.Base, Branch: prev.Git.Branch},
		Child: prev.Child,
	}
	if host != "" {
		inc, alive := r.nodeOf(host)
		if !alive {
			e := protocol.Errorf(protocol.CodeNodeUnavailable,
				"node %s is unavailable: agent %s lives there and cannot be relaunched until it is back", host, run.AgentID)
			e.Data = map[string]string{"node": host}
			return nil, e
		}
		rr.Host, rr.Incarnation, rr.Worktree = host, Incarnation(inc), worktree
	}
	if run.Workspace != nil {
		ws := *run.Workspace
		rr.Workspace = &ws
	}
	jr := records.JobRecord{JobID: p.Job.JobID, ParentAgentID: p.Job.ParentAgentID, ParentNode: r.node,
		Strategy: p.Job.Strategy, CreatedAt: p.Job.CreatedAt, RunIDs: []string{run.RunID}}
	if _, err := rec.Jobs.Create(ctx, jr.JobID, jr); err != nil {
		return nil, fmt.Errorf("write the job's cluster record: %w", err)
	}
	key := records.RunKey(rr.JobID, rr.RunID)
	remove := func(ctx context.Context) {
		r.withdraw(ctx, rec, key)
		if e, err := rec.Jobs.Get(ctx, jr.JobID); err == nil {
			_ = rec.Jobs.Delete(ctx, e.Key, e.Revision)
		}
	}
	if _, err := rec.Runs.Create(ctx, key, rr); err != nil {
		remove(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("write the cluster record of run %s: %w", run.RunID, err)
	}
	if rr.Host != "" {
		// Asked again once written: a host declared dead meanwhile may
		// have had its runs interrupted before this record existed, and
		// nobody else would end it. (A declaration this node has not seen
		// yet still slips through: docs/cluster.md, known limits.)
		if inc, alive := r.nodeOf(rr.Host); !alive || Incarnation(inc) != rr.Incarnation {
			remove(context.WithoutCancel(ctx))
			e := protocol.Errorf(protocol.CodeNodeUnavailable, "node %s is unavailable: it was lost while agent %s was relaunched", rr.Host, run.AgentID)
			e.Data = map[string]string{"node": rr.Host}
			return nil, e
		}
	}
	return remove, nil
}

// withdraw removes a run record a failed create wrote: deleted while no
// node claimed it, else asked to stop (the node that took it meanwhile
// ends it, and nobody reports it: its job was never acknowledged).
func (r *Runs) withdraw(ctx context.Context, rec *records.Records, key string) {
	for range 5 {
		e, err := rec.Runs.Get(ctx, key)
		if err != nil {
			return
		}
		run := e.Value
		if run.Node == "" && run.State == protocol.RunQueued {
			err = rec.Runs.Delete(ctx, key, e.Revision)
		} else if !run.State.Terminal() && run.StopRequestedAt == 0 {
			run.StopRequestedAt, run.StopStage = time.Now().UnixMilli(), "abort"
			_, err = rec.Runs.Update(ctx, key, run, e.Revision)
		}
		if !errors.Is(err, records.ErrConflict) {
			return
		}
	}
}

// Follow delivers every run record of job jobID, as it is now and then
// each change, to deliver, until ctx ends. A watch that is lost (the
// connection closed, the cluster without a quorum) is started again after
// a growing wait, and replays the records as they are then: deliver must
// treat a record it saw before as nothing new. It waits for the records
// to be open.
func (r *Runs) Follow(ctx context.Context, jobID string, deliver func(records.RunRecord)) {
	rec := r.wait(ctx)
	if rec == nil {
		return
	}
	wait := retryMin
	for ctx.Err() == nil {
		// A watch of its own, so leaving it early (a failed queue) ends
		// its goroutine too.
		wctx, wcancel := context.WithCancel(ctx)
		ch, err := rec.Runs.Watch(wctx, jobID)
		if err == nil {
			for c := range ch {
				if c.Synced || c.Deleted || c.Err != nil {
					if c.Err != nil {
						r.log.Warn("cluster runs: undecodable run record", "key", c.Key, "err", c.Err)
					}
					continue
				}
				// A run still waiting for a node is put on the claim queue
				// (again, after a restart or a lost watch: a pointer
				// already there is fine). Follow runs only for a job this
				// node committed, so only a create that was answered with
				// success releases its runs. A failure follows again.
				if err = rec.Queue(ctx, c.Value); err != nil {
					break
				}
				wait = retryMin
				deliver(c.Value)
			}
		}
		wcancel()
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("cluster runs: the watch of a job's runs was lost; following again", "job_id", jobID, "retry_in", wait.String(), "err", err)
		if !clock.Sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, retryMax)
	}
}

// StopResult is what RequestStop did to one run's record.
type StopResult struct {
	// Run is the record as written (or as found, when it had ended).
	Run records.RunRecord
	// Cancelled: the run waited unclaimed and was cancelled in its record
	// (no node will take it).
	Cancelled bool
	// Requested: the stop was written for the node that runs it (or had
	// been already).
	Requested bool
}

// RequestStop asks for run runID of job jobID to stop, as a
// compare-and-set on its record: a run no node claimed yet is cancelled
// there and then, a claimed one gets StopRequestedAt and StopStage
// "abort", which the node running it follows; an ended run is left as it
// is. A conflict (the record changed meanwhile) decides again on what is
// there now.
func (r *Runs) RequestStop(ctx context.Context, jobID, runID string, now int64, reason string) (StopResult, error) {
	rec := r.Records()
	if rec == nil {
		return StopResult{}, protocol.Errorf(protocol.CodeTimeout, "the cluster's records are not open yet")
	}
	key := records.RunKey(jobID, runID)
	for {
		e, err := rec.Runs.Get(ctx, key)
		if err != nil {
			return StopResult{}, fmt.Errorf("read the cluster record of run %s: %w", runID, err)
		}
		run := e.Value
		res := StopResult{Run: run}
		switch {
		case run.State.Terminal():
			return res, nil
		case run.Node == "" && run.State == protocol.RunQueued:
			run.State, run.EndedAt, run.Error = protocol.RunCancelled, now, reason
			run.StopRequestedAt = now
			res.Cancelled = true
		case run.StopRequestedAt != 0:
			res.Requested = true
			return res, nil
		default:
			run.StopRequestedAt, run.StopStage = now, "abort"
			res.Requested = true
		}
		_, err = rec.Runs.Update(ctx, key, run, e.Revision)
		if errors.Is(err, records.ErrConflict) {
			continue
		}
		if err != nil {
			return StopResult{}, fmt.Errorf("write the stop of run %s: %w", runID, err)
		}
		res.Run = run
		return res, nil
	}
}

// InterruptNode marks interrupted the unfinished runs node held in
// incarnation inc (a node this one declared dead), retrying until the
// cluster answers or ctx ends. Each run's parent's node sees its record
// turn interrupted through its follow and reports it once.
func (r *Runs) InterruptNode(ctx context.Context, node string, inc uint64) {
	rec := r.wait(ctx)
	if rec == nil {
		return
	}
	wait := retryMin
	for {
		got, err := rec.InterruptNodeRuns(ctx, node, Incarnation(inc))
		if len(got) > 0 {
			r.log.Warn(fmt.Sprintf("cluster runs: %d run(s) of lost node %s interrupted", len(got), node),
				"dead_node", node, "incarnation", inc, "runs", len(got))
		}
		if err == nil {
			return
		}
		r.log.Warn("cluster runs: interrupting a lost node's runs failed; retrying", "dead_node", node, "err", err)
		if !clock.Sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, retryMax)
	}
}

// RecordJobTimes writes a job's end and stop times (epoch ms, 0 for not
// yet) into its cluster record (JobRecord.EndedAt, StoppedAt), as a
// compare-and-set the parent's node makes once its own job ended or was
// stopped: the parent's node owns a job's transitions, as it owns its
// local record. A time already there is kept (the first one written is
// the job's), a record already up to date is not written, and a record
// that is gone (a refused create's, removed) is left gone. A conflict
// decides again on what is there now; no quorum is retried until ctx
// ends.
func (r *Runs) RecordJobTimes(ctx context.Context, jobID string, endedAt, stoppedAt int64) error {
	rec := r.Records()
	if rec == nil {
		return protocol.Errorf(protocol.CodeTimeout, "the cluster's records are not open yet")
	}
	wait := retryMin
	for {
		e, err := rec.Jobs.Get(ctx, jobID)
		if errors.Is(err, records.ErrNotFound) {
			return nil
		}
		if err == nil {
			jr := e.Value
			if jr.EndedAt == 0 && endedAt != 0 {
				jr.EndedAt = endedAt
			}
			if jr.StoppedAt == 0 && stoppedAt != 0 {
				jr.StoppedAt = stoppedAt
			}
			if jr.EndedAt == e.Value.EndedAt && jr.StoppedAt == e.Value.StoppedAt {
				return nil
			}
			if _, err = rec.Jobs.Update(ctx, jobID, jr, e.Revision); err == nil {
				return nil
			}
			if errors.Is(err, records.ErrConflict) {
				continue
			}
		}
		if !errors.Is(err, records.ErrUnavailable) {
			return fmt.Errorf("write the job's times into its cluster record: %w", err)
		}
		if !clock.Sleep(ctx, wait) {
			return fmt.Errorf("write the job's times into its cluster record: %w", err)
		}
		wait = min(2*wait, retryMax)
	}
}

// Bounds of Sweep.
const (
	// SweepAge is how old (from its creation) a job of this node must be
	// before its records may be swept: far longer than a create takes
	// from planning its job to committing it (its pushes included), so a
	// create in flight is never taken for a refused one.
	SweepAge = time.Hour
	// SweepEvery is how often Sweep looks again.
	SweepEvery = 15 * time.Minute
)

// Sweep deletes, once the records are open and then every SweepEvery
// until ctx ends, the cluster records of this node's jobs older than
// SweepAge that holds says this node does not hold (records.SweepJobs):
// the held records of a create that was refused after they were written
// (they may commit late, docs/cluster.md "No quorum"), and the records of
// a job its retention removed. holds must answer from this node's store:
// true for a committed job, an error when it cannot tell.
func (r *Runs) Sweep(ctx context.Context, holds func(jobID string) (bool, error)) {
	rec := r.wait(ctx)
	if rec == nil {
		return
	}
	for {
		res, err := rec.SweepJobs(ctx, r.node, time.Now().Add(-SweepAge).UnixMilli(), holds)
		if len(res.Jobs) > 0 || res.Runs > 0 {
			r.log.Info(fmt.Sprintf("cluster runs: swept the records of %d job(s) this node does not hold (%d run records)", len(res.Jobs), res.Runs),
				"jobs", len(res.Jobs), "runs", res.Runs)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("cluster runs: the sweep of records this node does not hold failed; trying again later", "retry_in", SweepEvery.String(), "err", err)
		}
		if !clock.Sleep(ctx, SweepEvery) {
			return
		}
	}
}
