package agent

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/internal/actorref"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/logfile"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/telemetry"
)

// RuntimeConfig says how runtimes are started and stopped.
type RuntimeConfig struct {
	// Path and Args are the runtime command ("shardd agent --headless").
	Path string
	Args []string
	// Env is the base environment of every runtime; the agent adds
	// SHARD_AGENT_ID, SHARD_SESSION_ID, SHARD_AGENT_MODE, SHARD_AGENT_PROVIDER
	// and SHARD_AGENT_MODEL.
	Env []string
	// SessionsDir holds sessions/<session_id>; LogDir holds agents/<id>.log.
	SessionsDir, LogDir string
	// LogMaxBytes and LogBackups bound each agent's log (log.max_bytes,
	// log.backups; proc.Spec): it rotates while the runtime runs.
	// LogMaxBytes 0 means the defaults.
	LogMaxBytes int64
	LogBackups  int

	StartTimeout time.Duration // readiness bound (runtime.start_timeout)
	IdleTimeout  time.Duration // reaping after inactivity (runtime.idle_timeout)
	AbortGrace   time.Duration // kill.abort_grace
	TermGrace    time.Duration // kill.term_grace
	// HeadlessPolicy is the default for agents whose manifest names none.
	HeadlessPolicy string
	// ChildNice is the niceness the runtimes of subagent children (a
	// manifest with a parent) run at (proc.Spec.Nice; jobs.nice); 0
	// leaves them at the daemon's. Other agents always run at it.
	ChildNice int
	// ChildIdle runs the runtimes of subagent children under SCHED_IDLE
	// (proc.Spec.Idle; jobs.sched_idle). Other agents never are.
	ChildIdle bool
	// Sweeper shares the after-exit sweeps of all runtimes (proc.Spec);
	// nil: each sweeps alone.
	Sweeper *procs.Sweeper
	// Forks is the gate all runtimes start through (proc.Spec); nil:
	// each starts at once.
	Forks *procs.ForkGate
	// Logs copies every runtime's stderr into its log (proc.Spec); nil:
	// each runtime's copy runs in a goroutine of its own.
	Logs *logfile.Mux
	// Track, when set, returns the tracker recording an agent's runtime
	// processes (see proc.Tracker).
	Track func(agentID string) proc.Tracker
	// Profiles are the runtime profiles (config runtimes:) by
	// name: the command line and extra environment a manifest's Runtime
	// selects. The agent knows nothing of their kind. An agent whose
	// Runtime is "" or DefaultProfile and that has no entry here runs
	// Path and Args.
	Profiles map[string]Profile
}

// DefaultProfile is the name of the reference runtime's profile, the one
// an agent created without a runtime runs on.
const DefaultProfile = "shard"

// Profile is the process of one runtime profile.
type Profile struct {
	// Path and Args are the command line (Args excludes the program name).
	Path string
	Args []string
	// Env is added to RuntimeConfig.Env (KEY=VALUE).
	Env []string
	// Tools are the tool names the profile's runtime has: an agent's tools
	// (docs/protocol.md §10.1) may name only these. nil: the runtime cannot
	// limit its tools, and a create that names any is refused.
	Tools []string
	// MCPServers are the profile's MCP servers (config mcp_servers, the
	// daemon's merged under the profile's), which the runtime gets, with
	// the agent's own over them by name, in SHARD_MCP_SERVERS. Their tools
	// (<server>__<tool>) are known only once the runtime connects, so an
	// agent's tools may name any tool of theirs.
	MCPServers map[string]protocol.MCPServer
	// MCP reports whether the profile's runtime takes MCP servers (the
	// reference runtime connects to them, the ACP adapter passes them to
	// its agent): agent.create's mcp_servers need it.
	MCP bool
	// Skills checks, off the mailbox, that the named skills exist for an
	// agent working in cwd: NOT_FOUND for a missing one, INVALID_REQUEST
	// for one that cannot be used. nil: the runtime loads no skills, and a
	// create that names any is refused.
	Skills func(cwd string, names []string) error
}

// CheckTools refuses, with INVALID_REQUEST naming the known ones, tools
// the profile named profile ("" is the default) does not have, and skills
// on a profile that loads none. The skills themselves are checked by
// CheckSkills, which reads the filesystem.
func (rc *RuntimeConfig) CheckTools(profile string, tools, skills []string) error {
	p, _ := rc.command(profile)
	if len(tools) > 0 && p.Tools == nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "tools": the runtime profile %q cannot limit its tools`, cmp.Or(profile, DefaultProfile))
	}
	for _, t := range tools {
		if !slices.Contains(p.Tools, t) && len(protocol.WithoutMCPTools([]string{t}, p.MCPServers)) > 0 {
			return protocol.Errorf(protocol.CodeInvalidRequest, `field "tools": unknown tool %q (the tools are %s)`, t, strings.Join(p.Tools, ", "))
		}
	}
	if len(skills) > 0 && p.Skills == nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "skills": the runtime profile %q loads no skills`, cmp.Or(profile, DefaultProfile))
	}
	return nil
}

// CheckMCP refuses, with INVALID_REQUEST, MCP servers for an agent of a
// profile whose runtime does not connect to them.
func (rc *RuntimeConfig) CheckMCP(profile string, servers map[string]protocol.MCPServer) error {
	if p, _ := rc.command(profile); len(servers) > 0 && !p.MCP {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "mcp_servers": the runtime profile %q does not connect to MCP servers`, cmp.Or(profile, DefaultProfile))
	}
	return nil
}

// CheckSkills reports whether the skills names exist for an agent of
// profile working in cwd. It reads the filesystem: call it off the
// mailbox.
func (rc *RuntimeConfig) CheckSkills(profile, cwd string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	p, _ := rc.command(profile)
	if p.Skills == nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "skills": the runtime profile %q loads no skills`, cmp.Or(profile, DefaultProfile))
	}
	return p.Skills(cwd, names)
}

// command returns the profile named name ("" is DefaultProfile), and
// whether there is one.
func (rc *RuntimeConfig) command(name string) (Profile, bool) {
	if name == "" {
		name = DefaultProfile
	}
	if p, ok := rc.Profiles[name]; ok {
		return p, true
	}
	if name == DefaultProfile {
		return Profile{Path: rc.Path, Args: rc.Args}, true
	}
	return Profile{}, false
}

// priorityFor is the niceness m's runtime runs at, and whether under
// SCHED_IDLE: ChildNice and ChildIdle for a subagent child, the daemon's
// own (0, false) for any other agent.
func (rc *RuntimeConfig) priorityFor(m store.Agent) (nice int, idle bool) {
	if m.ParentAgentID != "" {
		return rc.ChildNice, rc.ChildIdle
	}
	return 0, false
}

// KnownProfile reports whether name ("" is the default) selects a profile.
func (rc *RuntimeConfig) KnownProfile(name string) bool {
	_, ok := rc.command(name)
	return ok
}

// Deps are the agent actor's collaborators.
type Deps struct {
	Runtime RuntimeConfig
	// Node is the cluster node hosting the agents, carried in their
	// AgentInfo.node (docs/protocol.md §10.1); "" on a single shardd,
	// where the field is omitted.
	Node   string
	Hub    *outbox.Hub
	Logger *slog.Logger
	// Clock tells the time and runs the actor's timers (start timeout,
	// idle reaping, escalation stages); nil is the wall clock. Tests pass a
	// clock.Manual and fire timers instead of sleeping.
	Clock clock.Clock
	// Metrics records runtime starts/exits/reaps, attachments and relayed
	// events; nil records nothing.
	Metrics *telemetry.Metrics
	// Models resolves providers and models (models.go); the zero value
	// accepts any.
	Models Models
	// SaveSelection persists an agent's provider, model and mode when its runtime
	// changes them, so a restored runtime starts where the last one was. It
	// runs off the mailbox, in a goroutine of Goroutines; nil saves
	// nothing.
	SaveSelection func(agentID, provider, model, mode string)
	// SaveUsage persists an agent's usage totals after each turn that
	// reported usage, so that AgentInfo.usage outlives the daemon. It runs
	// off the mailbox, in a goroutine of Goroutines, and must keep the
	// totals with the most turns when two saves race; nil saves nothing.
	SaveUsage func(agentID string, u store.Usage)
	// SaveTitle commits an agent's title (given: the manifest's Title and
	// Titled), by agent.update or automatic (title.go). It runs off the
	// mailbox, in a goroutine of Goroutines; the title is acknowledged and
	// announced once it returned nil. nil keeps titles in memory only.
	SaveTitle func(agentID, title string) error
	// Goroutines owns every goroutine the agent starts, and those of its
	// runtime actors (stdout reader, exit wait, stdin writer). Required:
	// the daemon closes it at shutdown once the actor system is down (so
	// every runtime child is gone), before it closes the store.
	Goroutines *xsync.Group
	// Dispatcher runs the mailboxes of the agent actor and its runtime actors (a mailrun.Pool);
	// nil is protoactor's default, a new goroutine per mailbox run.
	Dispatcher actor.Dispatcher
}

// Actor is the agent actor. Create it with Props. Its state is only ever
// touched from Receive; it is grouped below by what it is about.
type Actor struct {
	deps Deps
	m    store.Agent

	sys  *actor.ActorSystem
	self *actor.PID
	log  *slog.Logger

	projection
	generation
	stopState
	reaper
	backlog
	dispatch
	requestState
	subagent
	batch
	titleSaves

	// attached are the client connections attached to the agent, by
	// connection id; nAttached is len(attached) as last reported to
	// telemetry.
	attached  map[uint64]*attachment
	nAttached int
	// routed are the connections that send this agent's commands to it
	// directly (it answered their agent.attach with Routed), by connection
	// id, until they detach or stop: attached or not (an attach that
	// failed leaves the route), the agent is not idle while one may still
	// send (passivate.go).
	routed map[uint64]*actor.PID

	// saves counts the selection and usage saves in flight (goSave);
	// reportedIdle is the Idle the registry last heard (reportIdle).
	saves        int
	reportedIdle bool

	// timers are the pending timer of each kind; arming one replaces the
	// previous one of its kind, and all are stopped when the actor stops.
	timers [numTimers]clock.Timer
}

// projection is the agent's public state: what agent.list, status events
// and agent_activity report.
type projection struct {
	status protocol.AgentStatus
	rstate protocol.RuntimeState
	mode   string
	usage  protocol.Usage
	// usageTurns counts the turns summed in usage (store.Usage.Turns).
	usageTurns int64
	phase      string // agent_activity's coarse phase, as last broadcast
	phaseArg   string // and its tool name
}

// generation is the current runtime generation: its epoch (-1 before the
// first), its runtime actor (nil when no runtime runs) and what the actor
// learned from its output so far.
type generation struct {
	epoch    int64
	rt       *actor.PID
	ready    bool // its first sync arrived: it takes commands
	gotHello bool
	caps     []string
	// badRecords counts this generation's invalid output records.
	badRecords int
	// startError is the fatal error event the runtime wrote before its
	// first sync: why it could not start (a session it cannot restore).
	startError *protocol.Error
}

// stopState is the stopping of the current generation and what waits on
// it: the escalation in progress (esc, escGen tagging its timer), why the
// start failed, a terminate deferred until idle, agent.kill callers waiting
// for the process to be gone, and the daemon's drain.
type stopState struct {
	esc               *supervisor.Escalation
	escGen            int
	stopping          bool
	startFailed       string
	terminateWhenIdle bool
	killWaiters       []waiter
	draining          bool
}

// reaper is idle reaping: the tick generation and when the agent went idle.
type reaper struct {
	idleGen   int
	idleSince time.Time
}

// backlog is the work waiting for a ready runtime: attaches to sync,
// agent.create callers, commands to forward.
type backlog struct {
	pendingAttach []uint64
	startWaiters  []waiter
	queued        []*Request
}

// dispatch is the commands sent to the runtime and not answered yet, by
// the daemon id they went under (d-<seq>, see toRuntime).
type dispatch struct {
	inflight map[string]*inflight
	seq      int
}

// requestState is the open permission/UI requests: this agent's own
// (open), descendants' surfaced here (foreign), and this agent's surfaced
// by an ancestor, until resolved (delegated).
type requestState struct {
	open      map[string]*openRequest
	foreign   map[string]*foreignRequest
	delegated map[string]*actor.PID
	// closed are the newest requests that were delegated and closed
	// since (at most maxClosedDelegated): an ancestor's client that
	// answers one late is answered success, nothing done (docs/protocol.md
	// §6.3), rather than NOT_ATTACHED.
	closed []string
}

// subagent is the agent's part in subagent runs: the lease of the run it
// serves, the last error of that run's turn, and completion reports to
// deliver into it as a parent.
type subagent struct {
	lease     *lease
	lastError string
	injects   []pendingInject
}

// batch is the runtime output batch being handled (see onOutputBatch):
// rest is the batch from the current record on, splice the buffer its
// relayed records share (see spliced), held the attachments fanout held
// records for; all empty between batches. idField is the encoded agent_id
// member spliced into every relayed event (encoded once).
type batch struct {
	rest    [][]byte
	splice  []byte
	held    []*attachment
	idField []byte
}

// Props returns the props of the actor for manifest m.
func Props(m store.Agent, deps Deps) *actor.Props {
	return PropsAfter(m, deps, -1)
}

// PropsAfter is Props for an agent whose runtimes so far in this daemon
// ran up to generation epoch (InfoChanged.Epoch of its previous actor):
// its next runtime is epoch+1, so that runtime_epoch keeps increasing for
// the connections that saw the earlier ones (docs/protocol.md §6.4).
func PropsAfter(m store.Agent, deps Deps, epoch int64) *actor.Props {
	deps.Clock = clock.Or(deps.Clock)
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{
			deps:         deps,
			m:            m,
			projection:   projection{status: protocol.StatusIdle, rstate: protocol.RuntimeStopped, mode: m.Mode, usage: UsageOf(m), usageTurns: usageTurns(m)},
			generation:   generation{epoch: epoch},
			attached:     make(map[uint64]*attachment),
			routed:       make(map[uint64]*actor.PID),
			dispatch:     dispatch{inflight: make(map[string]*inflight)},
			requestState: requestState{open: make(map[string]*openRequest), foreign: make(map[string]*foreignRequest), delegated: make(map[string]*actor.PID)},
		}
	}, actor.WithSupervisor(supervisor.StopOnFailure()), actor.WithDispatcher(deps.Dispatcher))
}

// Receive implements actor.Actor.
func (a *Actor) Receive(c actor.Context) {
	defer a.reportIdle(c) // runs last: after countAttachments
	defer a.countAttachments(c)
	switch m := c.Message().(type) {
	case *actor.Started:
		a.sys, a.self = c.ActorSystem(), c.Self()
		a.log = a.deps.Logger.With("agent_id", a.m.AgentID)
		a.notifyInfo(c)
	case *Request:
		a.onRequest(c, m)
	case *proc.Output:
		a.onOutputBatch(c, m)
	case *proc.Exited:
		if m.Epoch == a.epoch && a.rt != nil {
			a.onExited(c, m)
		}
	case *actor.Terminated:
		a.onTerminated(c, m)
	case *Shutdown:
		a.onShutdown(c, m)
	case *LeaseStart:
		a.onLeaseStart(c, m)
	case *LeaseStop:
		a.onLeaseStop(c, m)
	case *Inject:
		a.onInject(c, m)
	case *LeaseSteer:
		a.onLeaseSteer(m)
	case *Delegate:
		a.onDelegate(c, m)
	case *DelegateResult:
		a.onDelegateResult(c, m)
	case *DelegatedResolved:
		a.onDelegatedResolved(m)
	case *CheckResponder:
		a.onCheckResponder(c, m)
	case *ResponderChecked:
		a.onResponderChecked(c, m)
	case *CheckOrigin:
		a.onCheckOrigin(c, m)
	case *DelegateLost:
		a.onDelegateLost(c, m)
	case *startTimeout:
		if m.epoch == a.epoch && a.rt != nil && !a.ready {
			// Starved or hung? The answer decides (onStarved).
			c.Request(a.rt, &proc.CheckStarved{})
		}
	case *proc.Starved:
		a.onStarved(c, m)
	case *idleTick:
		a.onIdleTick(c, m)
	case *escTimer:
		if m.epoch == a.epoch && m.gen == a.escGen && a.esc != nil && a.rt != nil {
			act, wait := a.esc.Timeout()
			a.perform(c, act, wait)
		}
	case *titleSaved:
		a.onTitleSaved(c, m)
	case *saveDone:
		a.saves--
	case *Passivate:
		a.onPassivate(c)
	case *actor.Stopping:
		a.stopTimers()
		a.failAll(protocol.Errorf(protocol.CodeInternal, "agent stopped"))
		a.failTitles(protocol.Errorf(protocol.CodeInternal, "agent stopped"))
	case *actor.Stopped:
		// A connection that lives on would keep this agent's PID among
		// its watchers (the gateway's connections unwatch agents alike).
		for _, att := range a.attached {
			if att.client.PID != nil {
				c.Unwatch(att.client.PID)
			}
		}
		for _, pid := range a.routed {
			c.Unwatch(pid)
		}
		clear(a.attached)   // gone with the actor (for the attachments gauge)
		actorref.Release(c) // connections and jobs may hold this agent's PID
	case *actor.Restarting:
	default:
		a.log.Warn("agent actor: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// countAttachments reports a change of the attachment count to metrics and
// to the parent (InfoChanged.Attachments); it runs after every message,
// whichever path added or dropped one.
func (a *Actor) countAttachments(c actor.Context) {
	if n := len(a.attached); n != a.nAttached {
		a.deps.Metrics.AttachmentsAdd(n - a.nAttached)
		a.nAttached = n
		if _, stopped := c.Message().(*actor.Stopped); !stopped {
			a.notifyInfo(c)
		}
	}
}
