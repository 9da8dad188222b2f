package jobs

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/jobs/remote"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/telemetry"
	"github.com/shard-dev/shard/workspaces"
)

// Limits bound what jobs may do.
type Limits struct {
	// MaxActive caps starting+active runs across the daemon (16).
	MaxActive int
	// MaxActivePerParent caps them per parent (8).
	MaxActivePerParent int
	// MaxTasks caps the tasks of one create, unless the parent's launch
	// policy says otherwise (8).
	MaxTasks int
	// MaxDepth caps nesting: a child's depth is its parent's + 1 (3).
	MaxDepth int
	// RunTimeout is each run's start-to-close deadline (30 m; 0: none).
	RunTimeout time.Duration
	// ReportRetry is how often undelivered reports are retried (5 s).
	ReportRetry time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxActive <= 0 {
		l.MaxActive = 16
	}
	if l.MaxActivePerParent <= 0 {
		l.MaxActivePerParent = 8
	}
	if l.MaxTasks <= 0 {
		l.MaxTasks = 8
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 3
	}
	if l.ReportRetry <= 0 {
		l.ReportRetry = 5 * time.Second
	}
	return l
}

// Deps are the coordinator's collaborators.
type Deps struct {
	Store *store.Store
	// Registry is the registry actor, the coordinator's sibling: it routes
	// leases and reports to agent actors (agent.Route) and adopts the
	// children a create committed (registry.Adopt).
	Registry *actor.PID
	Logger   *slog.Logger
	Limits   Limits
	// Models resolves the provider and model of children (zero: as
	// given or inherited).
	Models agent.Models
	// Aliases is the pool children's aliases are picked from (nil: the
	// default pool).
	Aliases []string
	// Clock tells the time and runs the timers (wait timeouts, report
	// retries, run deadlines); nil is the wall clock. Tests pass a
	// clock.Manual and fire them instead of sleeping.
	Clock clock.Clock
	// Group owns the goroutines the coordinator starts off its mailbox (job
	// commits, forgetting delivered reports). It is the daemon's, closed
	// after the actor system stopped; required.
	Group *xsync.Group
	// KnownRuntime reports whether a runtime profile name (subagent.create
	// runtime) is configured; nil accepts only "" (the parent's).
	KnownRuntime func(name string) bool
	// CheckTools refuses tools and skills a child's runtime profile cannot
	// honour (agent.RuntimeConfig.CheckTools); nil checks nothing.
	CheckTools func(profile string, tools, skills []string) error
	// Metrics records runs by state, transitions, queue wait, run duration,
	// stop stages and report delivery; nil records nothing.
	Metrics *telemetry.Metrics
	// Workspaces is the workspace actor, which plans, makes and measures
	// the workspaces of isolated runs (isolation.go); nil refuses
	// isolation "workspace".
	Workspaces *actor.PID
	// Retention is how long a finished job is kept (jobs.retention): a sweep
	// at start and then periodically removes the finished jobs that ended
	// longer ago and their children nothing else references, as jobs.prune
	// does. 0, the default, keeps everything.
	Retention time.Duration
	// Dispatcher runs the mailboxes of the coordinator and its job actors
	// (a mailrun.Pool); nil is protoactor's default, a new goroutine per
	// mailbox run.
	Dispatcher actor.Dispatcher
	// Remote is this node's handle on the cluster's run records when the
	// daemon is a cluster node (nil on a single shardd): isolated runs of
	// a repository with a remote "origin" are published there for any
	// node to claim, and followed (anywhere.go).
	Remote *remote.Runs
	// RunEvents, on a cluster node, gets every subagent_run_changed for
	// the other nodes' clients that speak for the parent (cluster/events,
	// docs/protocol.md §13 "Events of other nodes"); the connections
	// those nodes forward their commands on get none here. It must not
	// block. nil on a single shardd.
	RunEvents func(rec []byte)
}

// Coordinator is the jobs actor: see the package doc. Its state is split by
// responsibility: the job index (index.go), the alias allocator (alias.go),
// admission (below), waiters (waiters.go) and report delivery (reports.go);
// commands are in commands.go and operator.go.
type Coordinator struct {
	deps Deps
	sys  *actor.ActorSystem
	self *actor.PID

	idx     *index
	aliases *aliasAllocator
	actors  map[string]*actor.PID      // nonterminal job → its actor
	parents map[string][]*agent.Client // parent → connections that spoke for it
	// creating holds the creates whose commit is in flight, by requestKey:
	// the first one, then repeats of its request id, which are answered
	// with its outcome.
	creating map[string][]*registry.Command
	admit    admission
	waits    waitSet
	reports  reportDelivery
	ret      retentionState
}

// admission is the runs holding or waiting for a start.
type admission struct {
	queue  []admitReq
	active map[string]string // admitted run → parent
}

// Props returns the coordinator's props.
func Props(deps Deps) *actor.Props {
	deps.Limits = deps.Limits.withDefaults()
	deps.Clock = clock.Or(deps.Clock)
	if len(deps.Aliases) == 0 {
		deps.Aliases = view.DefaultAliases()
	}
	if deps.Group == nil {
		panic("jobs: Deps.Group is required")
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Coordinator{
			deps: deps, idx: newIndex(deps.Store), aliases: newAliasAllocator(deps.Aliases, deps.Store),
			actors: map[string]*actor.PID{}, parents: map[string][]*agent.Client{},
			creating: map[string][]*registry.Command{},
			admit:    admission{active: map[string]string{}},
			waits:    waitSet{byID: map[int]*waiter{}},
			reports:  reportDelivery{inFlight: map[string]int64{}},
		}
	}, actor.WithSupervisor(supervisor.StopOnFailure()), actor.WithDispatcher(deps.Dispatcher))
}

// Receive implements actor.Actor.
func (co *Coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		co.sys, co.self = c.ActorSystem(), c.Self()
		co.load(c)
	case *registry.Command:
		co.onCommand(c, m)
	case *registry.RecordSteer:
		// A steer of an anywhere run of this node's (a person's, sent to
		// the child where its run was claimed; or any, when this node
		// claimed it): recorded by the run's job actor, as the lease
		// holder records it on one node (docs/protocol.md §13 "Runs on
		// other nodes").
		if pid := co.actors[co.idx.jobOf(m.Steered.RunID)]; pid != nil {
			c.RequestWithCustomSender(pid, m.Steered, c.Sender())
		} else if c.Sender() != nil {
			c.Respond(&agent.SteerRecorded{})
		}
	case *createDone:
		co.onCreated(c, m)
	case *runChanged:
		co.onRunChanged(c, m)
	case *jobUpdated:
		co.idx.put(&m.job)
	case *admitReq:
		co.admit.queue = append(co.admit.queue, *m)
		co.admitRuns(c)
	case *released:
		delete(co.admit.active, m.runID)
		co.admitRuns(c)
	case *finished:
		co.onFinished(c, m)
	case *agent.Injected:
		co.onInjected(m)
	case *workspaces.RunsInFlight:
		c.Respond(co.runsInFlight(m))
	case *retryReports:
		co.reports.retry = nil
		co.deliverPending(c)
	case *retentionTick:
		co.sweep(c)
	case *pruneChosen:
		co.onPruneChosen(c, m)
	case *jobsDeleted:
		co.onJobsDeleted(c, m)
	case *registry.AgentStatesResult:
		co.onAgentStates(m)
	case *registry.RemoveAgentsResult:
		co.onAgentsRemoved(m)
	case *waitTimeout:
		if w := co.waits.byID[m.id]; w != nil {
			co.answerWait(c, w, true)
		}
	case *actor.Terminated:
		co.onTerminated(m)
	case *actor.Stopping:
		// Nothing may be sent to a stopped coordinator late.
		co.waits.stopTimers()
		co.reports.stopRetry()
		if co.ret.timer != nil {
			co.ret.timer.Stop()
			co.ret.timer = nil
		}
	case *actor.Stopped, *actor.Restarting:
	default:
		co.deps.Logger.Warn("jobs coordinator: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// after sends m to the coordinator once d has passed, through the injected
// clock. The caller keeps the timer and stops it when it is not needed.
func (co *Coordinator) after(d time.Duration, m Message) clock.Timer {
	sys, self := co.sys, co.self
	return co.deps.Clock.AfterFunc(d, func() { sys.Root.Send(self, m) })
}

// load indexes the jobs that have not ended (the store's open-jobs index,
// so its cost follows the unfinished work, not the history) and starts an
// actor for each. It runs after startup reconciliation, so no run is
// starting or active. Finished jobs stay in the store, read on demand.
//
// shard_runs_by_state starts from the runs of those jobs and of the jobs
// whose completion reports wait for delivery (the ones reconciliation just
// ended among them); every run created or moved later joins it. Counting
// every run ever would mean reading every job at start.
func (co *Coordinator) load(c actor.Context) {
	open, err := co.deps.Store.OpenJobs()
	if err != nil {
		co.deps.Logger.Error("jobs: load", "err", err)
		return
	}
	counted := map[string]bool{}
	count := func(j *store.Job) {
		if !counted[j.JobID] {
			counted[j.JobID] = true
			for _, r := range j.Runs {
				if !r.Anywhere { // counted by the node that runs it (observe)
					co.deps.Metrics.RunState("", r.State)
				}
			}
		}
	}
	for _, id := range open {
		j, err := co.deps.Store.GetJob(id)
		if err != nil {
			co.deps.Logger.Error("jobs: load", "job_id", id, "err", err)
			continue
		}
		count(&j)
		if view.Terminal(&j) {
			// Not written today (a job ends in the transaction of its last
			// run's end); such a job needs no actor and is read on demand.
			continue
		}
		co.idx.addLive(&j)
		co.spawnJob(c, j)
	}
	if reports, err := co.deps.Store.Reports(); err == nil {
		for _, r := range reports {
			if j := co.idx.job(r.JobID); j != nil {
				count(j)
			}
		}
	}
	co.deliverPending(c)
	if co.deps.Retention > 0 {
		co.sweep(c)
	}
}

func (co *Coordinator) spawnJob(c actor.Context, j store.Job) {
	a := &jobActor{store: co.deps.Store, registry: co.deps.Registry, coord: co.self, workspaces: co.deps.Workspaces,
		log: co.deps.Logger.With("job_id", j.JobID), clock: co.deps.Clock, job: j,
		remote: co.deps.Remote, group: co.deps.Group}
	pid, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(co.deps.Dispatcher)), j.JobID)
	if err != nil {
		co.deps.Logger.Error("jobs: spawn job actor", "job_id", j.JobID, "err", err)
		return
	}
	co.actors[j.JobID] = pid
}

// onFinished ends the actor of a job that became terminal. The coordinator
// is the only sender of commands to job actors, so it alone can end one
// without losing a command: from now on the job's commands are answered
// here from the record (stop of a terminal job, see stop), and any command
// forwarded before this message is already in the job actor's mailbox,
// ahead of the poison pill (a user message, handled in order; c.Stop would
// overtake them as a system message, and the forwarded commands would go
// to dead letters unanswered).
func (co *Coordinator) onFinished(c actor.Context, m *finished) {
	pid := co.actors[m.jobID]
	if pid == nil {
		return
	}
	delete(co.actors, m.jobID)
	co.idx.retire(m.jobID)
	c.Poison(pid)
}

func (co *Coordinator) onTerminated(m *actor.Terminated) {
	// A job actor is spawned named by its job id (spawnJob), so its
	// termination is found without a scan of every live job.
	if id, ok := strings.CutPrefix(m.Who.GetId(), co.self.GetId()+"/"); ok {
		if pid := co.actors[id]; pid != nil && pid.Equal(m.Who) {
			delete(co.actors, id)
			return
		}
	}
	// A connection ended: its waiters end with it (the runs go on).
	co.waits.dropClient(m.Who)
	for p, cls := range co.parents {
		kept := slices.DeleteFunc(cls, func(cl *agent.Client) bool { return cl.PID.Equal(m.Who) })
		if len(kept) == 0 {
			delete(co.parents, p)
		} else {
			co.parents[p] = kept
		}
	}
}

// admitRuns starts the queued runs the global and per-parent caps allow,
// oldest request first; the others wait in queued.
func (co *Coordinator) admitRuns(c actor.Context) {
	perParent := map[string]int{}
	for _, p := range co.admit.active {
		perParent[p]++
	}
	lim := co.deps.Limits
	kept := co.admit.queue[:0]
	for i, req := range co.admit.queue {
		if len(co.admit.active) >= lim.MaxActive {
			// Nothing more can start: the rest waits as it is, unscanned,
			// so a deep queue costs nothing per transition.
			kept = append(kept, co.admit.queue[i:]...)
			break
		}
		j := co.idx.job(req.jobID)
		pid := co.actors[req.jobID]
		if j == nil || pid == nil {
			continue
		}
		if perParent[j.ParentAgentID] >= lim.MaxActivePerParent {
			kept = append(kept, req) // waits in queued
			continue
		}
		co.admit.active[req.runID] = j.ParentAgentID
		perParent[j.ParentAgentID]++
		c.Send(pid, &admitted{runID: req.runID})
	}
	co.admit.queue = kept
}

// onRunChanged indexes a persisted transition, tells the parent's
// connections, and on a terminal one answers waiters and delivers the
// completion report.
func (co *Coordinator) onRunChanged(c actor.Context, m *runChanged) {
	co.idx.put(&m.job)
	j := co.idx.job(m.job.JobID)
	r := j.Run(m.runID)
	if r == nil {
		return
	}
	co.observe(m.prev, r)
	ev := protocol.SubagentRunChanged{
		Header:        protocol.Header{Type: protocol.TypeSubagentRunChanged},
		ParentAgentID: j.ParentAgentID, JobID: j.JobID, RunID: r.RunID, Alias: r.Alias,
		DefinitionName: r.Name, DisplayName: view.DisplayName(r.Name, r.Alias),
		State: r.State, PreviousState: m.prev, Error: r.Error, EndedAt: r.EndedAt,
	}
	rec := protocol.WithAgentID(protocol.MustMarshal(ev), r.AgentID)
	// agent_id here is a payload field naming the child (docs/protocol.md
	// §10.3 shape), spliced the same way as routing ids.
	for _, cl := range co.parents[j.ParentAgentID] {
		if cl.Forwarded {
			continue // its node delivers it (RunEvents)
		}
		cl.Send(rec)
	}
	if co.deps.RunEvents != nil {
		co.deps.RunEvents(rec)
	}
	if r.State.Terminal() {
		co.checkWaiters(c)
		co.deliver(c, reportOf(j, r, r.EndedAt))
	}
}

// observe records a persisted transition of r from prev in the telemetry.
// A run any node may take is left out: it runs on the node that claimed
// it, whose metrics and cluster load count it (this node's describe the
// work it does itself).
func (co *Coordinator) observe(prev protocol.RunState, r *store.Run) {
	if r.Anywhere {
		return
	}
	mt := co.deps.Metrics
	mt.RunTransition(prev, r.State)
	ms := func(from, to int64) time.Duration { return time.Duration(to-from) * time.Millisecond }
	if r.State == protocol.RunStarting && r.QueuedAt != 0 && r.StartedAt != 0 {
		mt.ObserveQueueWait(ms(r.QueuedAt, r.StartedAt))
	}
	if !r.State.Terminal() {
		return
	}
	if r.StartedAt != 0 && r.EndedAt != 0 {
		mt.ObserveRunDuration(r.State, ms(r.StartedAt, r.EndedAt))
	}
	if r.StopStage != "" {
		mt.StopStage(r.StopStage)
	}
}
