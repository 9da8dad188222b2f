package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/runner"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// clusterRuns is a clustered daemon's side of the runs any node may take
// (docs/cluster.md "Runs on any node"): a runner.Runner that claims them
// while this node has room and executes them, hosting each child here
// (runHost). It starts once the node joined and stops before the node
// closes; nothing of it exists on a single shardd.
type clusterRuns struct {
	r      atomic.Pointer[runner.Runner]
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex // protects previous
	// previous are incarnations of this node whose runs it must
	// interrupt (it restarted, or the others declared it dead while it
	// ran): cluster.Hooks.OnRejoin adds them, possibly before the runner
	// exists, and the runner takes them (kick).
	previous []rejoin
	kick     chan struct{}
}

// rejoin is a previous incarnation to interrupt. Restarted says the
// daemon started as the next incarnation (OnRejoin before the runner
// existed): no child of the previous one runs any more, so its
// interrupted runs' worktrees may go. An incarnation declared dead while
// this daemon ran may still have children stopping in theirs: those stay.
type rejoin struct {
	inc       uint64
	restarted bool
}

// runsGitTimeout bounds one git of a run (a fetch or push of a large
// repository takes a while; a hung remote does not hold a run forever).
const runsGitTimeout = 10 * time.Minute

// rejoined notes a previous incarnation whose runs this node interrupts.
func (cr *clusterRuns) rejoined(previous uint64) {
	cr.mu.Lock()
	cr.previous = append(cr.previous, rejoin{inc: previous, restarted: cr.r.Load() == nil})
	cr.mu.Unlock()
	select {
	case cr.kick <- struct{}{}:
	default:
	}
}

// running is how many claimed runs this node executes now (0 before the
// runner exists): its part of the load its heartbeats publish.
func (cr *clusterRuns) running() int {
	if cr == nil {
		return 0
	}
	if r := cr.r.Load(); r != nil {
		return r.Running()
	}
	return 0
}

// startRuns opens the records (retrying while the cluster has no
// quorum), interrupts what a previous incarnation left, and runs the
// claimer. It returns at once.
func (d *Daemon) startRuns() {
	log := d.log.With("component", "cluster")
	cr := d.runs
	ctx, cancel := context.WithCancel(context.Background())
	cr.cancel = cancel
	node := d.node
	cr.wg.Go(func() {
		var rec *records.Records
		wait := runner.DefaultRetry
		for {
			var err error
			rec, err = records.Open(ctx, node.JetStream(), records.Options{Replicas: d.cluster.Replicas})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Warn("cluster: run records not open; retrying", "retry_in", wait.String(), "err", err)
			if !clock.Sleep(ctx, wait) {
				return
			}
			wait = min(2*wait, runner.DefaultMaxRetry)
		}
		g := &runner.Git{Root: filepath.Join(d.cfg.Home, "cluster", "runs"), Node: node.Name(),
			Runner: &git.Exec{Env: runner.Env(), Timeout: runsGitTimeout, Forks: d.gate}}
		r, err := runner.New(runner.Options{
			Records: rec, Node: node.Name(),
			Incarnation: func() string { return strconv.FormatUint(node.Incarnation(), 10) },
			Capacity: func() int {
				if !d.cfg.Cluster.ClaimRuns {
					return 0 // cluster.claim_runs false: this node runs none
				}
				return d.cfg.Jobs.MaxActive
			},
			Host: &runHost{d: d}, Git: g, Logger: log,
		})
		if err != nil {
			log.Error("cluster: runs not taken", "err", err)
			return
		}
		cr.r.Store(r)
		cr.wg.Go(func() { cr.interruptPrevious(ctx, r, g, log) })
		// Said once the runs are open, as the claimer starts: from here a
		// run put on the claim queue is looked at by this node too.
		log.Info("cluster: this node takes runs now", "capacity", r.Capacity())
		r.Run(ctx)
	})
}

// interruptPrevious interrupts, once across the cluster, the runs each
// previous incarnation of this node held, and retires their worktrees
// here (their changes kept on the run's branch in the node's cache).
func (cr *clusterRuns) interruptPrevious(ctx context.Context, r *runner.Runner, g *runner.Git, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) {
	for {
		cr.mu.Lock()
		todo := slices.Clone(cr.previous)
		cr.previous = nil
		cr.mu.Unlock()
		for _, rj := range todo {
			cr.retirePrevious(ctx, r, g, log, rj)
		}
		select {
		case <-ctx.Done():
			return
		case <-cr.kick:
		}
	}
}

// retirePrevious interrupts the runs incarnation rj held and, when this
// node restarted, retires its worktrees of them once they are interrupted,
// whoever interrupted them (a survivor may have been first). Right after a
// restart this node's server may still answer a listing from its old state
// (docs/cluster.md, "Stale reads"), where such a run still looks active:
// it asks again, after a growing wait, until every run that incarnation
// held is seen ended, or ctx ends.
func (cr *clusterRuns) retirePrevious(ctx context.Context, r *runner.Runner, g *runner.Git, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}, rj rejoin) {
	prev := strconv.FormatUint(rj.inc, 10)
	retired := map[string]bool{}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		got, err := r.InterruptPrevious(ctx, prev)
		if err != nil && ctx.Err() == nil {
			log.Warn("cluster: runs of the previous incarnation not all interrupted", "previous", rj.inc, "err", err)
		}
		if len(got) > 0 {
			log.Info(fmt.Sprintf("cluster: interrupted %d runs of incarnation %d", len(got), rj.inc), "runs", len(got), "previous", rj.inc)
		}
		if !rj.restarted {
			return
		}
		left, lerr := r.HeldBy(ctx, prev)
		if lerr != nil && ctx.Err() == nil {
			log.Warn("cluster: runs of the previous incarnation not listed", "previous", rj.inc, "err", lerr)
		}
		retire := map[string]records.RunRecord{}
		for _, e := range got { // interrupted here, whatever a read says
			retire[e.Key] = e.Value
		}
		settled := err == nil && lerr == nil
		for _, e := range left {
			switch {
			case e.Value.State == protocol.RunInterrupted:
				retire[e.Key] = e.Value
			case !e.Value.State.Terminal() && retire[e.Key].RunID == "":
				settled = false // a stale read, or not interrupted yet
			}
		}
		for _, e := range sortedRuns(retire) {
			key := records.RunKey(e.JobID, e.RunID)
			if retired[key] {
				continue
			}
			if gone, err := g.Retire(ctx, e); err != nil && ctx.Err() == nil {
				log.Warn("cluster: worktree of an interrupted run not retired", "run_id", e.RunID, "err", err)
			} else if err == nil {
				retired[key] = true
				if gone {
					log.Info("cluster: retired the worktree of interrupted run "+e.RunID, "run_id", e.RunID)
				}
			}
		}
		if settled {
			return
		}
		if !clock.Sleep(ctx, wait) {
			return
		}
	}
}

// sortedRuns is the runs of m in the order of their ids.
func sortedRuns(m map[string]records.RunRecord) []records.RunRecord {
	out := make([]records.RunRecord, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// stopRuns stops the runner and waits for it: its executors stop without
// writing (the runs are interrupted by whoever declares this incarnation
// dead, or by the next one).
func (d *Daemon) stopRuns() {
	if d.runs == nil || d.runs.cancel == nil {
		return
	}
	d.runs.cancel()
	d.runs.wg.Wait()
}

// runHost hosts a claimed run's child on this node (runner.Host): the
// child's manifest from the run record, with the run's worktree as its
// cwd, stored and adopted by the registry as a job's children are, and
// leased the run's task through the agent's lease (agent.LeaseStart) with
// a holder actor of the run's own, whose messages become the Lease's.
type runHost struct{ d *Daemon }

// Start implements runner.Host.
func (h *runHost) Start(_ context.Context, run records.RunRecord, cwd string) (runner.Lease, error) {
	d := h.d
	if run.Host != "" {
		// A relaunch of a child this node hosts (docs/protocol.md §13
		// "Runs on other nodes"): the same durable agent, its session and
		// settings, given the new task in its own worktree. A child its
		// first run never got to host here is hosted from the manifest.
		if a, err := d.store.GetAgent(run.AgentID); err == nil {
			// Only a child, of the parent the record names, in the run's
			// worktree: never another agent of this node.
			var m store.Agent
			if json.Unmarshal(run.Child, &m) != nil || a.ParentAgentID == "" || a.ParentAgentID != m.ParentAgentID {
				return nil, fmt.Errorf("agent %s is not the run's child", a.AgentID)
			}
			if filepath.Clean(a.Cwd) != filepath.Clean(cwd) {
				return nil, fmt.Errorf("agent %s works in %s, not in the run's worktree", a.AgentID, a.Cwd)
			}
			if run.ParentNode != d.node.Name() {
				d.dir.learn(a.ParentAgentID, run.ParentNode) // as for a new child, below
			}
			return h.lease(run, a.ParentAgentID), nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("read the child: %w", err)
		}
	}
	var m store.Agent
	if err := json.Unmarshal(run.Child, &m); err != nil {
		return nil, fmt.Errorf("the child's manifest: %w", err)
	}
	if m.AgentID == "" || m.AgentID != run.AgentID {
		return nil, fmt.Errorf("the child's manifest is agent %q, the run's %q", m.AgentID, run.AgentID)
	}
	// The parent's node's cwd and workspace mean nothing here: the child
	// works in the run's worktree, which no workspace record of this
	// node describes. Its parent stays (on another node).
	m.Cwd, m.WorkspaceID, m.SessionDir = cwd, "", ""
	if m.SessionID == "" {
		m.SessionID = ids.New("sess")
	}
	if m.CreatedAt == 0 {
		m.CreatedAt = time.Now().UnixMilli()
	}
	if err := d.store.CreateAgent(m); err != nil {
		if errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("agent %s already lives on node %s", m.AgentID, d.node.Name())
		}
		return nil, fmt.Errorf("store the child: %w", err)
	}
	if run.ParentNode != d.node.Name() {
		// Before the child exists: its first request goes up to its
		// parent's node even when the directory does not list the
		// parent yet (an older record without it: the directory's word).
		d.dir.learn(m.ParentAgentID, run.ParentNode)
	}
	d.sys.Root.Send(d.registry, &registry.Adopt{Agents: []store.Agent{m}})
	// After the Adopt, through the same mailbox: the child exists when
	// the lease reaches the registry.
	return h.lease(run, m.ParentAgentID), nil
}

// lease leases run's task to its child, which the registry knows, with a
// holder actor of the run's own.
func (h *runHost) lease(run records.RunRecord, parentID string) *runLease {
	d := h.d
	l := &runLease{d: d, agentID: run.AgentID, runID: run.RunID, parentID: parentID, parentNode: run.ParentNode,
		started: make(chan struct{}), ended: make(chan runner.Outcome, 1), stopping: make(chan string, 4)}
	pid := d.sys.Root.Spawn(actor.PropsFromFunc(l.receive))
	d.sys.Root.Send(d.registry, &agent.Route{AgentID: run.AgentID, Msg: &agent.LeaseStart{RunID: run.RunID, Task: run.Task, Holder: pid}})
	return l
}

// runLease is one child's lease of a claimed run (runner.Lease); its
// holder actor turns the agent's lease messages into its channels.
type runLease struct {
	d              *Daemon
	agentID, runID string
	// parentID and parentNode are the child's parent and the node
	// hosting it ("" from an older record: the directory's word), where
	// the run's job records its steers.
	parentID, parentNode string
	started              chan struct{}
	ended                chan runner.Outcome
	stopping             chan string
	startOnce            sync.Once
	endOnce              sync.Once
}

// receive is the holder actor: LeaseStarted, the stages of a stop, then
// one LeaseEnded (after which it stops). This node keeps no record of a
// steer of the leased run: the run's job on the parent's node does. A
// parent's steer came from there and is recorded there when its outcome
// goes back; a person's steer sent to the child directly is sent there to
// be recorded (registry.RemoteSteered over the uplink), and the child
// answers the person once it is (docs/protocol.md §10.3: persist before
// acknowledging). A run its parent's own node claimed has its job here:
// every steer is recorded by it (registry.RecordSteer).
func (l *runLease) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *agent.LeaseStarted:
		l.startOnce.Do(func() { close(l.started) })
	case *agent.LeaseEnded:
		l.endOnce.Do(func() {
			l.ended <- runner.Outcome{Completed: m.Completed, Cancelled: m.Cancelled, FinalText: m.FinalText,
				Usage: m.Usage, Error: m.Error, StopStage: m.StopStage}
		})
		c.Stop(c.Self())
	case *agent.LeaseStopping:
		select {
		case l.stopping <- m.Stage:
		default: // the executor is behind: the end carries the last stage
		}
	case *agent.LeaseSteered:
		if c.Sender() == nil {
			return
		}
		node := l.parentNode
		if node == "" {
			node, _ = l.d.dir.NodeOf(l.parentID)
		}
		switch {
		case node == "" || node == l.d.node.Name():
			// The parent's node claimed its own run: its job is here.
			c.RequestWithCustomSender(l.d.registry, &registry.RecordSteer{Steered: m}, c.Sender())
		case m.Steer.Source == protocol.SteerSourceClient:
			c.Send(l.d.registry, &registry.RemoteSteered{Node: node, Steered: m, ReplyTo: c.Sender()})
		default: // the parent's steer: its node records the outcome it gets back
			c.Respond(&agent.SteerRecorded{})
		}
	}
}

// Started implements runner.Lease.
func (l *runLease) Started() <-chan struct{} { return l.started }

// Ended implements runner.Lease.
func (l *runLease) Ended() <-chan runner.Outcome { return l.ended }

// Stopping implements runner.Lease.
func (l *runLease) Stopping() <-chan string { return l.stopping }

// Stop implements runner.Lease: the agent stops the leased turn by its
// escalation (abort, then graceful, then kill).
func (l *runLease) Stop() {
	l.d.sys.Root.Send(l.d.registry, &agent.Route{AgentID: l.agentID, Msg: &agent.LeaseStop{RunID: l.runID}})
}

// clusterRunsDeps makes d.runs when clustered, so that the node's
// OnRejoin, called while it starts, has somewhere to note the previous
// incarnation.
func (d *Daemon) clusterRunsDeps() {
	if d.clustered && d.runs == nil {
		d.runs = &clusterRuns{kick: make(chan struct{}, 1)}
	}
}

// rejoin is cluster.Hooks.OnRejoin's part for runs.
func (d *Daemon) rejoinRuns(r cluster.Rejoin) {
	if d.runs != nil {
		d.runs.rejoined(r.Previous)
	}
}
