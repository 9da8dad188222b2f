package jobs

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/metrics"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
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
	Store    *store.Store
	Registry *actor.PID
	Logger   *slog.Logger
	Limits   Limits
	Aliases  []string
	Now      func() time.Time
	// Metrics records runs by state, transitions, queue wait, run duration,
	// stop stages and report delivery; nil records nothing.
	Metrics *metrics.Metrics
}

type waiter struct {
	id     int
	cmd    *Command
	parent string
	runIDs []string
	any    bool
	timer  *time.Timer // nil: waits forever
}

// Coordinator is the jobs actor: see the package doc.
type Coordinator struct {
	deps Deps
	sys  *actor.ActorSystem
	self *actor.PID

	jobs      map[string]*store.Job      // every job, by id
	runJob    map[string]string          // run_id → job_id
	agentRuns map[string][]string        // agent_id → run ids, oldest first
	actors    map[string]*actor.PID      // nonterminal job → its actor
	parents   map[string][]*agent.Client // parent → connections that spoke for it

	admitQueue []admitReq
	active     map[string]string // admitted run → parent
	waiters    map[int]*waiter
	nextWaiter int
	delivering map[string]int64 // run id whose report is in flight → its terminal time (ms)

	// requests indexes jobs by parent \x00 request_id (idempotent create).
	requests map[string]string
	// creating holds the creates whose commit is in flight, by parent \x00
	// request_id: the first one, then repeats of its request id, which are
	// answered with its outcome.
	creating map[string][]*Command
	// aliasHeld: aliases (normalized) picked by creates in flight, per
	// parent; they are not in the store yet.
	aliasHeld map[string]map[string]bool
	// aliasNext: per parent, the position in the alias sequence (aliasAt)
	// below which every alias is taken. Aliases are never unbound, so it
	// only moves forward, except that a failed create releases its picks
	// and resets it.
	aliasNext map[string]int
}

// Props returns the coordinator's props.
func Props(deps Deps) *actor.Props {
	deps.Limits = deps.Limits.withDefaults()
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if len(deps.Aliases) == 0 {
		deps.Aliases = view.DefaultAliases()
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Coordinator{
			deps: deps, jobs: map[string]*store.Job{}, runJob: map[string]string{}, agentRuns: map[string][]string{},
			actors: map[string]*actor.PID{}, parents: map[string][]*agent.Client{}, active: map[string]string{},
			waiters: map[int]*waiter{}, delivering: map[string]int64{},
			requests: map[string]string{}, creating: map[string][]*Command{},
			aliasHeld: map[string]map[string]bool{}, aliasNext: map[string]int{},
		}
	}, actor.WithSupervisor(supervisor.StopOnFailure()))
}

// Receive implements actor.Actor.
func (co *Coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		co.sys, co.self = c.ActorSystem(), c.Self()
		co.load(c)
	case *Command:
		co.onCommand(c, m)
	case *createDone:
		co.onCreated(c, m)
	case *runChanged:
		co.onRunChanged(c, m)
	case *admitReq:
		co.admitQueue = append(co.admitQueue, *m)
		co.admit(c)
	case *released:
		delete(co.active, m.runID)
		co.admit(c)
	case *agent.Injected:
		co.onInjected(m)
	case *retryReports:
		co.deliverPending(c)
	case *waitTimeout:
		if w := co.waiters[m.id]; w != nil {
			co.answerWait(c, w, true)
		}
	case *actor.Terminated:
		co.onTerminated(m)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		co.deps.Logger.Warn("jobs coordinator: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// load indexes every job and starts an actor for each nonterminal one. It
// runs after startup reconciliation, so no run is starting or active.
func (co *Coordinator) load(c actor.Context) {
	all, err := co.deps.Store.Jobs()
	if err != nil {
		co.deps.Logger.Error("jobs: load", "err", err)
		return
	}
	for i := range all {
		co.index(&all[i])
		for _, r := range all[i].Runs {
			co.deps.Metrics.RunState("", r.State)
		}
		if !view.Terminal(&all[i]) {
			co.spawnJob(c, all[i])
		}
	}
	co.deliverPending(c)
}

func (co *Coordinator) index(j *store.Job) {
	if _, known := co.jobs[j.JobID]; !known {
		for _, r := range j.Runs {
			co.agentRuns[r.AgentID] = append(co.agentRuns[r.AgentID], r.RunID)
		}
	}
	jj := *j
	co.jobs[j.JobID] = &jj
	for _, r := range j.Runs {
		co.runJob[r.RunID] = j.JobID
	}
	if j.RequestID != "" {
		co.requests[requestKey(j.ParentAgentID, j.RequestID)] = j.JobID
	}
}

func (co *Coordinator) spawnJob(c actor.Context, j store.Job) {
	a := &jobActor{store: co.deps.Store, registry: co.deps.Registry, coord: co.self,
		log: co.deps.Logger.With("job_id", j.JobID), now: co.deps.Now, job: j}
	pid, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), j.JobID)
	if err != nil {
		co.deps.Logger.Error("jobs: spawn job actor", "job_id", j.JobID, "err", err)
		return
	}
	co.actors[j.JobID] = pid
}

func (co *Coordinator) onTerminated(m *actor.Terminated) {
	for id, pid := range co.actors {
		if pid.Equal(m.Who) {
			delete(co.actors, id)
			return
		}
	}
	// A connection ended: its waiters end with it (the runs go on).
	for id, w := range co.waiters {
		if w.cmd.Client.PID.Equal(m.Who) {
			if w.timer != nil {
				w.timer.Stop()
			}
			delete(co.waiters, id)
		}
	}
	for p, cls := range co.parents {
		kept := cls[:0]
		for _, cl := range cls {
			if !cl.PID.Equal(m.Who) {
				kept = append(kept, cl)
			}
		}
		co.parents[p] = kept
	}
}

func reply(cmd *Command, data any) {
	cmd.Client.Send(protocol.NewResponse(cmd.Header.ID, cmd.Header.Type, data))
}

func fail(cmd *Command, err error) {
	cmd.Client.Send(protocol.NewErrorResponse(cmd.Header.ID, cmd.Header.Type, err))
}

func parentOf(cmd protocol.Command) string {
	switch m := cmd.(type) {
	case *protocol.SubagentCreate:
		return m.ParentAgentID
	case *protocol.SubagentWait:
		return m.ParentAgentID
	case *protocol.SubagentSteer:
		return m.ParentAgentID
	case *protocol.SubagentRelaunch:
		return m.ParentAgentID
	case *protocol.SubagentStatus:
		return m.ParentAgentID
	case *protocol.SubagentStop:
		return m.ParentAgentID
	}
	return ""
}

func (co *Coordinator) onCommand(c actor.Context, cmd *Command) {
	switch m := cmd.Cmd.(type) {
	case *protocol.JobsList:
		co.opList(cmd, m)
		return
	case *protocol.JobsShow:
		co.opShow(cmd, m)
		return
	}
	parent := parentOf(cmd.Cmd)
	pm, err := co.deps.Store.GetAgent(parent)
	if err != nil {
		fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no agent %s", parent))
		return
	}
	co.remember(c, parent, cmd.Client)
	switch m := cmd.Cmd.(type) {
	case *protocol.SubagentCreate:
		co.create(c, cmd, m, pm)
	case *protocol.SubagentRelaunch:
		co.relaunch(c, cmd, m)
	case *protocol.SubagentWait:
		co.wait(c, cmd, m)
	case *protocol.SubagentStatus:
		co.status(cmd, m)
	case *protocol.SubagentStop:
		co.stop(c, cmd, m)
	case *protocol.SubagentSteer:
		co.steer(c, cmd, m)
	}
}

// remember records a connection that speaks for parent: it receives that
// parent's subagent_run_changed events.
func (co *Coordinator) remember(c actor.Context, parent string, cl *agent.Client) {
	for _, known := range co.parents[parent] {
		if known.ID == cl.ID {
			return
		}
	}
	co.parents[parent] = append(co.parents[parent], cl)
	c.Watch(cl.PID)
}

// ---- create / relaunch ----

func (co *Coordinator) create(c actor.Context, cmd *Command, m *protocol.SubagentCreate, pm store.Agent) {
	lim := co.deps.Limits
	maxTasks, maxDepth := lim.MaxTasks, lim.MaxDepth
	if pm.LaunchPolicy != nil {
		if pm.LaunchPolicy.MaxTasks > 0 {
			maxTasks = pm.LaunchPolicy.MaxTasks
		}
		if pm.LaunchPolicy.MaxDepth > 0 {
			maxDepth = pm.LaunchPolicy.MaxDepth
		}
	}
	tasks := m.Tasks
	strategy := m.Strategy
	if len(tasks) == 0 {
		tasks = []protocol.TaskSpec{{Name: m.Name, Task: m.Task}}
		strategy = protocol.StrategySingle
	}
	// Validate everything before any side effect.
	if len(tasks) > maxTasks {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "field \"tasks\": %d tasks exceed the launch policy's maxTasks %d", len(tasks), maxTasks))
		return
	}
	if pm.Depth+1 > maxDepth {
		fail(cmd, protocol.Errorf(protocol.CodePermissionDenied, "launch policy: depth %d exceeds maxDepth %d", pm.Depth+1, maxDepth))
		return
	}
	var reqKey string
	if m.RequestID != "" {
		reqKey = requestKey(m.ParentAgentID, m.RequestID)
		if j := co.jobs[co.requests[reqKey]]; j != nil {
			reply(cmd, createdData(j))
			return
		}
		if pending, ok := co.creating[reqKey]; ok {
			// The same request is being committed: answer both alike.
			co.creating[reqKey] = append(pending, cmd)
			return
		}
		co.creating[reqKey] = nil
	}
	now := co.deps.Now()
	job := store.Job{JobID: ids.New("job"), ParentAgentID: m.ParentAgentID, Strategy: strategy,
		RequestID: m.RequestID, CreatedAt: now.UnixMilli()}
	aliases := map[string]string{}
	var agents []store.Agent
	lp := pm.LaunchPolicy
	if lp == nil {
		lp = &store.LaunchPolicy{MaxTasks: maxTasks, MaxDepth: maxDepth}
	}
	for i, t := range tasks {
		alias, norm := co.pickAlias(m.ParentAgentID)
		a := store.Agent{
			AgentID: ids.New("agent"), SessionID: ids.New("sess"), Cwd: pm.Cwd, Name: t.Name,
			Model: firstNonEmpty(m.Model, pm.Model), Provider: firstNonEmpty(m.Provider, pm.Provider),
			Mode: firstNonEmpty(m.Mode, pm.Mode), Tools: pm.Tools, HeadlessPolicy: pm.HeadlessPolicy,
			ParentAgentID: m.ParentAgentID, CreatedAt: now.UnixMilli(), Depth: pm.Depth + 1,
			LaunchPolicy: lp, Alias: alias, DefinitionName: t.Name, DisplayName: t.Name + " · " + alias,
		}
		agents = append(agents, a)
		aliases[norm] = a.AgentID
		job.Runs = append(job.Runs, store.Run{
			RunID: ids.New("run"), Index: i, Name: t.Name, AgentID: a.AgentID, Alias: alias, Task: t.Task,
			State: protocol.RunQueued, QueuedAt: now.UnixMilli(), TimeoutMs: lim.RunTimeout.Milliseconds(),
		})
	}
	co.commit(c, cmd, job, agents, aliases)
}

// pickAlias picks a free alias for a new child of parent and holds it
// until its create's commit is answered. Free means: not bound in the
// store and not held by a create in flight. The search starts at the
// parent's aliasNext, so picking stays cheap however many children the
// parent has.
func (co *Coordinator) pickAlias(parent string) (alias, norm string) {
	held := co.aliasHeld[parent]
	if held == nil {
		held = map[string]bool{}
		co.aliasHeld[parent] = held
	}
	pos := co.aliasNext[parent]
	contiguous := true // every position before pos is taken
	for ; ; pos++ {
		alias = aliasAt(co.deps.Aliases, pos)
		norm = view.NormalizeAlias(alias)
		if held[norm] {
			continue
		}
		if _, bound, err := co.deps.Store.Alias(parent, norm); bound || err != nil {
			// A store error counts as taken (the commit would check again).
			if err != nil {
				contiguous = false
			}
			continue
		}
		break
	}
	held[norm] = true
	if contiguous {
		co.aliasNext[parent] = pos + 1
	}
	return alias, norm
}

// releaseAliases ends the hold of a create's aliases. When the create
// failed they are free again, so the parent's search restarts.
func (co *Coordinator) releaseAliases(parent string, aliases map[string]string, failed bool) {
	held := co.aliasHeld[parent]
	for norm := range aliases {
		delete(held, norm)
	}
	if len(held) == 0 {
		delete(co.aliasHeld, parent)
	}
	if failed && len(aliases) > 0 {
		delete(co.aliasNext, parent)
	}
}

// aliasAt is the alias at position pos of the sequence view.PickAlias
// walks: the pool's names, then each with "-2", then "-3", and so on.
func aliasAt(pool []string, pos int) string {
	if len(pool) == 0 {
		pool = []string{"agent"}
	}
	name, round := pool[pos%len(pool)], pos/len(pool)
	if round == 0 {
		return name
	}
	return name + "-" + strconv.Itoa(round+1)
}

func (co *Coordinator) relaunch(c actor.Context, cmd *Command, m *protocol.SubagentRelaunch) {
	agentID, err := co.resolveAgent(m.ParentAgentID, m.Target)
	if err != nil {
		fail(cmd, err)
		return
	}
	if run := co.currentRun(agentID); run != nil && !run.State.Terminal() {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "agent %s already has run %s (%s)", agentID, run.RunID, run.State))
		return
	}
	am, err := co.deps.Store.GetAgent(agentID)
	if err != nil {
		fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no agent %s", agentID))
		return
	}
	now := co.deps.Now()
	job := store.Job{JobID: ids.New("job"), ParentAgentID: m.ParentAgentID, Strategy: protocol.StrategySingle,
		CreatedAt: now.UnixMilli(), Runs: []store.Run{{
			RunID: ids.New("run"), Name: am.Name, AgentID: agentID, Alias: am.Alias, Task: m.Task,
			State: protocol.RunQueued, QueuedAt: now.UnixMilli(), TimeoutMs: co.deps.Limits.RunTimeout.Milliseconds(),
		}}}
	// Index now so a concurrent relaunch of the same agent conflicts.
	co.index(&job)
	co.commit(c, cmd, job, nil, nil)
}

// commit writes the job (and its new agents) off the mailbox; the response
// is sent only after the transaction commits. Creates committing at the
// same time share a transaction (store group commit).
func (co *Coordinator) commit(c actor.Context, cmd *Command, job store.Job, agents []store.Agent, aliases map[string]string) {
	st, sys, self := co.deps.Store, co.sys, co.self
	go func() {
		existing, err := st.CreateJob(job, agents, aliases)
		sys.Root.Send(self, &createDone{cmd: cmd, job: job, agents: agents, aliases: aliases, existing: existing, err: err})
	}()
}

func (co *Coordinator) onCreated(c actor.Context, m *createDone) {
	co.releaseAliases(m.job.ParentAgentID, m.aliases, m.err != nil)
	var repeats []*Command
	if m.job.RequestID != "" && m.cmd.Header.Type != protocol.TypeSubagentRelaunch {
		key := requestKey(m.job.ParentAgentID, m.job.RequestID)
		repeats = co.creating[key]
		delete(co.creating, key)
	}
	answer := func(send func(*Command)) {
		send(m.cmd)
		for _, r := range repeats {
			send(r)
		}
	}
	if m.err != nil {
		co.forget(&m.job)
		if errors.Is(m.err, store.ErrExists) && m.existing != "" {
			if j := co.jobs[m.existing]; j != nil {
				answer(func(cmd *Command) { reply(cmd, createdData(j)) })
				return
			}
		}
		if errors.Is(m.err, store.ErrConflict) {
			answer(func(cmd *Command) { fail(cmd, protocol.Errorf(protocol.CodeConflict, "%v", m.err)) })
			return
		}
		co.deps.Logger.Error("jobs: create", "err", m.err)
		answer(func(cmd *Command) { fail(cmd, protocol.Errorf(protocol.CodeInternal, "could not store the job")) })
		return
	}
	co.index(&m.job)
	for _, r := range m.job.Runs {
		co.deps.Metrics.RunState("", r.State)
	}
	switch m.cmd.Header.Type {
	case protocol.TypeSubagentRelaunch:
		r := m.job.Runs[0]
		reply(m.cmd, protocol.SubagentRelaunchData{JobID: m.job.JobID, RunID: r.RunID, AgentID: r.AgentID,
			Alias: r.Alias, State: r.State, DefinitionName: r.Name})
	default:
		answer(func(cmd *Command) { reply(cmd, createdData(&m.job)) })
	}
	if len(m.agents) > 0 {
		c.Send(co.deps.Registry, &Adopt{Agents: m.agents})
	}
	co.deps.Logger.Info("job accepted", "job_id", m.job.JobID, "runs", len(m.job.Runs), "strategy", m.job.Strategy)
	co.spawnJob(c, m.job)
}

func (co *Coordinator) forget(j *store.Job) {
	if _, ok := co.jobs[j.JobID]; !ok {
		return
	}
	delete(co.jobs, j.JobID)
	if key := requestKey(j.ParentAgentID, j.RequestID); j.RequestID != "" && co.requests[key] == j.JobID {
		delete(co.requests, key)
	}
	for _, r := range j.Runs {
		delete(co.runJob, r.RunID)
		runs := co.agentRuns[r.AgentID]
		for i, id := range runs {
			if id == r.RunID {
				co.agentRuns[r.AgentID] = append(runs[:i], runs[i+1:]...)
				break
			}
		}
	}
}

func createdData(j *store.Job) protocol.SubagentCreateData {
	out := protocol.SubagentCreateData{JobID: j.JobID, Strategy: j.Strategy}
	for _, r := range j.Runs {
		out.Runs = append(out.Runs, protocol.CreatedRun{RunID: r.RunID, Index: r.Index, Name: r.Name,
			State: protocol.RunQueued, AgentID: r.AgentID, Alias: r.Alias, DefinitionName: r.Name,
			DisplayName: r.Name + " · " + r.Alias})
	}
	return out
}

// requestKey keys co.requests and co.creating.
func requestKey(parent, requestID string) string { return parent + "\x00" + requestID }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ---- admission ----

func (co *Coordinator) admit(c actor.Context) {
	perParent := map[string]int{}
	for _, p := range co.active {
		perParent[p]++
	}
	kept := co.admitQueue[:0]
	for _, req := range co.admitQueue {
		j := co.jobs[req.jobID]
		pid := co.actors[req.jobID]
		if j == nil || pid == nil {
			continue
		}
		if len(co.active) >= co.deps.Limits.MaxActive || perParent[j.ParentAgentID] >= co.deps.Limits.MaxActivePerParent {
			kept = append(kept, req) // waits in queued
			continue
		}
		co.active[req.runID] = j.ParentAgentID
		perParent[j.ParentAgentID]++
		c.Send(pid, &admitted{runID: req.runID})
	}
	co.admitQueue = kept
}

// ---- transitions, events, waiters, reports ----

func (co *Coordinator) onRunChanged(c actor.Context, m *runChanged) {
	co.index(&m.job)
	j := co.jobs[m.job.JobID]
	r := j.Run(m.runID)
	if r == nil {
		return
	}
	co.observe(m.prev, r)
	ev := protocol.SubagentRunChanged{
		Header:        protocol.Header{Type: protocol.TypeSubagentRunChanged},
		ParentAgentID: j.ParentAgentID, JobID: j.JobID, RunID: r.RunID, Alias: r.Alias,
		DefinitionName: r.Name, DisplayName: r.Name + " · " + r.Alias,
		State: r.State, PreviousState: m.prev, Error: r.Error, EndedAt: r.EndedAt,
	}
	rec := protocol.WithAgentID(protocol.MustMarshal(ev), r.AgentID)
	// agent_id here is a payload field naming the child (spec §10.3 shape),
	// spliced the same way as routing ids.
	for _, cl := range co.parents[j.ParentAgentID] {
		cl.Send(rec)
	}
	if r.State.Terminal() {
		for _, w := range co.waiters {
			co.checkWaiter(c, w)
		}
		co.deliver(c, reportOf(j, r, r.EndedAt))
	}
}

// observe records a persisted transition of r from prev in the metrics.
func (co *Coordinator) observe(prev protocol.RunState, r *store.Run) {
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

func (co *Coordinator) deliverPending(c actor.Context) {
	reports, err := co.deps.Store.Reports()
	if err != nil {
		co.deps.Logger.Error("jobs: list reports", "err", err)
		return
	}
	for _, r := range reports {
		co.deliver(c, r)
	}
}

// deliver injects a completion report into the parent: steer into an
// active turn, prompt otherwise (restoring its runtime). The report stays
// in the store until the parent's runtime accepted it.
func (co *Coordinator) deliver(c actor.Context, r store.Report) {
	if _, ok := co.delivering[r.RunID]; ok {
		return
	}
	co.delivering[r.RunID] = r.CreatedAt
	c.Request(co.deps.Registry, &ToAgent{AgentID: r.ParentAgentID, Msg: &agent.Inject{Key: r.RunID, Text: ReportText(r)}})
}

func (co *Coordinator) onInjected(m *agent.Injected) {
	endedAt, known := co.delivering[m.Key]
	delete(co.delivering, m.Key)
	if m.Err == nil && known && endedAt != 0 {
		co.deps.Metrics.ObserveReportDelivery(co.deps.Now().Sub(time.UnixMilli(endedAt)))
	}
	if m.Err != nil {
		co.deps.Logger.Warn("completion report not delivered; will retry", "run_id", m.Key, "err", m.Err)
		sys, self := co.sys, co.self
		time.AfterFunc(co.deps.Limits.ReportRetry, func() { sys.Root.Send(self, &retryReports{}) })
		return
	}
	st, log := co.deps.Store, co.deps.Logger
	go func() {
		if err := st.DeleteReport(m.Key); err != nil {
			log.Error("jobs: forget delivered report", "run_id", m.Key, "err", err)
		}
	}()
}

// ReportText is the completion report a parent's model receives. It names
// the run and its outcome and carries the child's final text; it never
// repeats the task.
func ReportText(r store.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[subagent report] run %s of job %s (%s, agent %s", r.RunID, r.JobID, r.Name, r.AgentID)
	if r.Alias != "" {
		fmt.Fprintf(&b, ", alias %s", r.Alias)
	}
	fmt.Fprintf(&b, ") ended: %s.", r.State)
	if r.Error != "" {
		fmt.Fprintf(&b, "\nerror: %s", r.Error)
	}
	if r.FinalText != "" {
		fmt.Fprintf(&b, "\nfinal text:\n%s", r.FinalText)
	}
	return b.String()
}

// ---- handles ----

// resolveRuns turns handles into run ids, owned by parent: typed ids first,
// then parent-scoped aliases. Agent and alias handles snapshot to the
// agent's current-or-latest run.
func (co *Coordinator) resolveRuns(parent string, handles []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, h := range handles {
		switch {
		case ids.HasPrefix(h, "job") && co.jobs[h] != nil:
			j := co.jobs[h]
			if j.ParentAgentID != parent {
				return nil, protocol.Errorf(protocol.CodeNotFound, "no job %s", h)
			}
			for _, r := range j.Runs {
				add(r.RunID)
			}
		case ids.HasPrefix(h, "run") && co.runJob[h] != "":
			if co.jobs[co.runJob[h]].ParentAgentID != parent {
				return nil, protocol.Errorf(protocol.CodeNotFound, "no run %s", h)
			}
			add(h)
		default:
			agentID, err := co.resolveAgent(parent, h)
			if err != nil {
				return nil, err
			}
			run := co.currentRun(agentID)
			if run == nil {
				return nil, protocol.Errorf(protocol.CodeNotFound, "agent %s has no run", h)
			}
			add(run.RunID)
		}
	}
	return out, nil
}

// resolveAgent resolves an agent id or a parent-scoped alias to a child of
// parent; anything else (including another parent's child) is NOT_FOUND.
func (co *Coordinator) resolveAgent(parent, h string) (string, error) {
	if ids.HasPrefix(h, "agent") {
		if a, err := co.deps.Store.GetAgent(h); err == nil && a.ParentAgentID == parent {
			return h, nil
		}
	}
	if id, ok, err := co.deps.Store.Alias(parent, view.NormalizeAlias(h)); err == nil && ok {
		return id, nil
	}
	return "", protocol.Errorf(protocol.CodeNotFound, "no subagent %q of %s", h, parent)
}

// currentRun is the agent's nonterminal run, else its latest.
func (co *Coordinator) currentRun(agentID string) *store.Run {
	runs := co.agentRuns[agentID]
	var latest *store.Run
	for _, id := range runs {
		j := co.jobs[co.runJob[id]]
		if j == nil {
			continue
		}
		r := j.Run(id)
		if r == nil {
			continue
		}
		if !r.State.Terminal() {
			return r
		}
		latest = r
	}
	return latest
}

func (co *Coordinator) run(id string) (*store.Job, *store.Run) {
	j := co.jobs[co.runJob[id]]
	if j == nil {
		return nil, nil
	}
	return j, j.Run(id)
}

// ---- wait / status / stop ----

func (co *Coordinator) wait(c actor.Context, cmd *Command, m *protocol.SubagentWait) {
	runIDs, err := co.resolveRuns(m.ParentAgentID, m.Handles)
	if err != nil {
		fail(cmd, err)
		return
	}
	co.nextWaiter++
	w := &waiter{id: co.nextWaiter, cmd: cmd, parent: m.ParentAgentID, runIDs: runIDs, any: m.Mode == "any"}
	if co.satisfied(w) || (m.Timeout != nil && *m.Timeout == 0) {
		co.answerWait(c, w, !co.satisfied(w))
		return
	}
	co.waiters[w.id] = w
	// A timeout beyond a year is as good as none (and would overflow).
	if m.Timeout != nil && *m.Timeout < 365*24*3600 {
		id, sys, self := w.id, co.sys, co.self
		w.timer = time.AfterFunc(time.Duration(*m.Timeout*float64(time.Second)), func() { sys.Root.Send(self, &waitTimeout{id: id}) })
	}
}

func (co *Coordinator) satisfied(w *waiter) bool {
	done := 0
	for _, id := range w.runIDs {
		if _, r := co.run(id); r != nil && r.State.Terminal() {
			done++
		}
	}
	if w.any {
		return done > 0
	}
	return done == len(w.runIDs)
}

func (co *Coordinator) checkWaiter(c actor.Context, w *waiter) {
	if co.satisfied(w) {
		co.answerWait(c, w, false)
	}
}

// answerWait responds to a waiter. The timeout never changes a run.
func (co *Coordinator) answerWait(c actor.Context, w *waiter, timedOut bool) {
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(co.waiters, w.id)
	data := protocol.SubagentWaitData{TimedOut: timedOut, Runs: []protocol.RunSnapshot{}}
	var runs []store.Run
	terminal := 0
	for _, id := range w.runIDs {
		j, r := co.run(id)
		if r == nil {
			continue
		}
		runs = append(runs, *r)
		if r.State.Terminal() {
			terminal++
		}
		data.Runs = append(data.Runs, view.RunSnapshot(j, r, j.ParentAgentID == w.parent))
	}
	// Shard's choice for aggregate_state: the job-state derivation over the
	// waited runs when all or none are terminal, "mixed" in between.
	if terminal > 0 && terminal < len(runs) {
		data.AggregateState = "mixed"
	} else {
		data.AggregateState = string(view.DeriveState(runs))
	}
	reply(w.cmd, data)
}

func (co *Coordinator) status(cmd *Command, m *protocol.SubagentStatus) {
	data := protocol.SubagentStatusData{Agents: []protocol.SubagentAgentStatus{}}
	if len(m.Targets) > 0 {
		for _, h := range m.Targets {
			runIDs, err := co.resolveRuns(m.ParentAgentID, []string{h})
			if err != nil {
				fail(cmd, err)
				return
			}
			for _, id := range runIDs {
				j, r := co.run(id)
				snap := view.RunSnapshot(j, r, true)
				data.Agents = append(data.Agents, protocol.SubagentAgentStatus{AgentID: r.AgentID, Alias: r.Alias,
					DefinitionName: r.Name, DisplayName: r.Name + " · " + r.Alias, ParentAgentID: j.ParentAgentID, Run: &snap})
			}
		}
		reply(cmd, data)
		return
	}
	var mine []*store.Job
	for _, j := range co.jobs {
		if j.ParentAgentID == m.ParentAgentID {
			mine = append(mine, j)
		}
	}
	sort.Slice(mine, func(a, b int) bool { return mine[a].JobID > mine[b].JobID }) // ids sort by time
	if len(mine) > 50 {
		mine = mine[:50]
	}
	seen := map[string]bool{}
	for _, j := range mine {
		data.Jobs = append(data.Jobs, view.JobSnapshot(j, true))
		for _, r := range j.Runs {
			if seen[r.AgentID] {
				continue
			}
			seen[r.AgentID] = true
			cur := co.currentRun(r.AgentID)
			cj, _ := co.run(cur.RunID)
			snap := view.RunSnapshot(cj, cur, true)
			data.Agents = append(data.Agents, protocol.SubagentAgentStatus{AgentID: r.AgentID, Alias: r.Alias,
				DefinitionName: r.Name, DisplayName: r.Name + " · " + r.Alias, ParentAgentID: j.ParentAgentID, Run: &snap})
		}
	}
	if data.Jobs == nil {
		data.Jobs = []protocol.JobSnapshot{}
	}
	reply(cmd, data)
}

// steer is strict active steer (spec §10.3): only a run that is actively
// executing takes the message, into its current turn; the child answers
// injected or conflict. Queued and terminal runs are CONFLICT.
func (co *Coordinator) steer(c actor.Context, cmd *Command, m *protocol.SubagentSteer) {
	runIDs, err := co.resolveRuns(m.ParentAgentID, []string{m.Target})
	if err != nil {
		fail(cmd, err)
		return
	}
	_, r := co.run(runIDs[0])
	if r.State != protocol.RunActive {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "run %s is %s, not active", r.RunID, r.State))
		return
	}
	c.Send(co.deps.Registry, &ToAgent{AgentID: r.AgentID, Msg: &agent.LeaseSteer{
		RunID: r.RunID, Message: m.Message, CorrelationID: ids.New("steer"), Client: cmd.Client, Header: cmd.Header,
	}})
}

func (co *Coordinator) stop(c actor.Context, cmd *Command, m *protocol.SubagentStop) {
	h := m.Handle
	var jobID string
	var runIDs []string
	if ids.HasPrefix(h, "job") && co.jobs[h] != nil && co.jobs[h].ParentAgentID == m.ParentAgentID {
		jobID = h
	} else {
		resolved, err := co.resolveRuns(m.ParentAgentID, []string{h})
		if err != nil {
			fail(cmd, err)
			return
		}
		runIDs = resolved
		jobID = co.runJob[resolved[0]]
	}
	pid := co.actors[jobID]
	if pid == nil {
		// Terminal already: stopping again is idempotent and cancels nothing.
		out := protocol.SubagentStopData{Cancelled: []protocol.CancelledRun{}}
		if len(runIDs) == 0 {
			out.JobID = jobID
		}
		reply(cmd, out)
		return
	}
	c.Send(pid, &stopReq{cmd: cmd, runIDs: runIDs})
}
