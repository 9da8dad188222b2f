package registry

import (
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/telemetry"
)

type agentManifest = store.Agent

// Deps are the registry's collaborators.
type Deps struct {
	Store  *store.Store
	Agent  agent.Deps
	Hub    *outbox.Hub
	Logger *slog.Logger
	// DaemonStatus returns the daemon-level part of daemon.status; the
	// registry adds the agent counts.
	DaemonStatus func() protocol.DaemonStatusData
	// ClusterStatus answers cluster.status (docs/protocol.md §10.1); nil
	// answers {"enabled":false}: a single shardd. It reads the node's
	// membership table under its own lock and never blocks.
	ClusterStatus func() protocol.ClusterStatusData
	// Directory is the cluster's agent directory as this node follows it
	// (nil on a single shardd): agent.list merges the other nodes' agents
	// into its answer, and a command for one of them is refused naming its
	// node instead of NOT_FOUND (docs/protocol.md §13 "Agents of other
	// nodes"). Its methods read a snapshot and never block.
	Directory Directory
	// OnShutdown is called on the registry's mailbox after daemon.shutdown
	// was acknowledged. It must not block: the shutdown it starts waits for
	// this actor to stop, so it runs on a goroutine of the caller's.
	OnShutdown func(force bool)
	// DefaultMode is the mode of agents created without one.
	DefaultMode string

	// Clock stamps created agents; nil is the wall clock.
	Clock clock.Clock
	// Group owns the goroutines the registry starts off its mailbox (the
	// agent.create checks and commit, daemon.check). It is the daemon's,
	// closed after the actor system stopped; required.
	Group *xsync.Group
	// Metrics keeps shard_agents_by_runtime_state from the projections the
	// registry holds; nil records nothing.
	Metrics *telemetry.Metrics
	// PassivateAfter is how long an agent stays idle before its actor is
	// passivated (passivate.go); 0 is DefaultPassivateAfter. Timed on Clock.
	PassivateAfter time.Duration
}

// entry is a live agent: one the registry runs an actor for (see
// passivate.go for which agents are live and when they stop being).
type entry struct {
	pid  *actor.PID
	m    store.Agent
	info protocol.AgentInfo
	// attachments is the agent's attached connections, as it last
	// reported (agent.InfoChanged).
	attachments int
	drained     bool
	// removing: an agent.remove of it is being committed; commands to
	// it are refused meanwhile (remove.go).
	removing bool
	passivation
}

// Actor is the registry actor. It serves every stored agent, and runs an
// actor only for the live ones (agents); the others are read from the
// store when they are listed or addressed.
type Actor struct {
	deps   Deps
	agents map[string]*entry
	// reserved holds the session ids of the agent.creates being committed
	// (session_id → agent_id): the store's index has the committed ones.
	reserved map[string]string
	draining bool
	force    bool
	drainers []chan<- struct{}
	// ndrained counts the entries marked drained (markDrained), so that
	// checkDrained, run as each agent reports, is not a pass over them
	// all: a shutdown of n agents was O(n²).
	ndrained int
	// respawns numbers the respawned agent actors' names.
	respawns int
	// epochs is the last runtime generation of each passivated agent that
	// ran one in this daemon (passivate.go): its next actor continues
	// from it. It grows with the agents run since the start, not with the
	// history, and loses an agent when it is removed.
	epochs map[string]int64
	// jobs is the jobs coordinator, a sibling handed over by AttachJobs;
	// nil before that, after DetachJobs or a Drain, and once it stopped.
	jobs *actor.PID
	// workspaces is the workspace actor (AttachWorkspaces), handled like
	// jobs.
	workspaces *actor.PID
	// team is the team coordinator (AttachTeam), handled like jobs.
	team *actor.PID
	// uplink carries delegations to ancestors on other nodes
	// (AttachUplink); nil on a single shardd.
	uplink *actor.PID
}

// Props returns the registry's props.
func Props(deps Deps) *actor.Props {
	deps.Clock = clock.Or(deps.Clock)
	if deps.DefaultMode == "" {
		deps.DefaultMode = "build"
	}
	if deps.PassivateAfter <= 0 {
		deps.PassivateAfter = DefaultPassivateAfter
	}
	if deps.Group == nil {
		panic("registry: Deps.Group is required")
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{deps: deps, agents: make(map[string]*entry), reserved: make(map[string]string), epochs: make(map[string]int64)}
	}, actor.WithSupervisor(supervisor.StopOnFailure()))
}

// Receive implements actor.Actor.
func (r *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		r.load(c)
	case *agent.Route:
		r.toAgent(c, m)
	case *Adopt:
		for _, a := range m.Agents {
			if r.agents[a.AgentID] != nil {
				continue
			}
			if e := r.spawn(c, a); e != nil {
				r.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentSpawned{
					Header: protocol.Header{Type: protocol.TypeAgentSpawned, AgentID: a.AgentID}, Info: e.info}))
			}
		}
	case *AttachJobs:
		if r.draining || m.PID == nil {
			return
		}
		r.jobs = m.PID
		c.Watch(m.PID)
	case *DetachJobs:
		r.detachJobs(c)
		if m.Done != nil {
			close(m.Done)
		}
	case *AttachWorkspaces:
		if r.draining || m.PID == nil {
			return
		}
		r.workspaces = m.PID
		c.Watch(m.PID)
	case *DetachWorkspaces:
		r.detachWorkspaces(c)
		if m.Done != nil {
			close(m.Done)
		}
	case *AttachUplink:
		r.uplink = m.PID
	case *RemoteSteer:
		if r.uplink == nil {
			m.Msg.Client.Send(protocol.NewErrorResponse(m.Msg.Header.ID, m.Msg.Header.Type,
				protocol.Errorf(protocol.CodeNodeUnavailable, "node %s is out of reach: this node is not in a cluster", m.Node)))
			return
		}
		c.Send(r.uplink, m)
	case *RemoteSteered:
		if r.uplink == nil || m.Node == "" {
			c.Send(m.ReplyTo, &agent.SteerRecorded{}) // nowhere to record it
			return
		}
		c.Send(r.uplink, m)
	case *RecordSteer:
		if r.jobs == nil || r.draining {
			if c.Sender() != nil {
				c.Respond(&agent.SteerRecorded{})
			}
			return
		}
		c.Forward(r.jobs) // the run's job actor answers the sender
	case *AttachTeam:
		if r.draining || m.PID == nil {
			return
		}
		r.team = m.PID
		c.Watch(m.PID)
	case *DetachTeam:
		if r.team != nil {
			c.Unwatch(r.team)
			r.team = nil
		}
		if m.Done != nil {
			close(m.Done)
		}
	case *RemoveAgents:
		sys, sender := c.ActorSystem(), c.Sender()
		r.removeIDs(c, m.AgentIDs, func(data protocol.AgentRemoveData, err error) {
			if sender != nil {
				sys.Root.Send(sender, &RemoveAgentsResult{Data: data, Err: err})
			}
		})
	case *AgentStates:
		r.agentStates(c, m)
	case *LiveAgents:
		res := &LiveAgentsResult{AgentIDs: make([]string, 0, len(r.agents))}
		for id := range r.agents {
			res.AgentIDs = append(res.AgentIDs, id)
		}
		if c.Sender() != nil {
			c.Respond(res)
		}
	case *Command:
		r.onCommand(c, m)
	case *createResult:
		r.onCreated(c, m)
	case *removeResult:
		r.onRemoved(c, m)
	case *agent.InfoChanged:
		if e := r.agents[m.Info.AgentID]; e != nil {
			r.deps.Metrics.AgentState(e.info.RuntimeState, m.Info.RuntimeState)
			e.info, e.attachments, e.idle, e.epoch = m.Info, m.Attachments, m.Idle, m.Epoch
			r.considerIdle(c, e)
		}
	case *passivateTick:
		r.onPassivateTick(c, m)
	case *agent.PassivateBusy:
		r.onPassivateBusy(c, m)
	case *agent.Drained:
		if e := r.agents[m.AgentID]; e != nil {
			r.markDrained(e)
		}
		r.checkDrained()
	case *Drain:
		r.onDrain(c, m)
	case *actor.Terminated:
		r.onTerminated(c, m)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		r.deps.Logger.Warn("registry: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// load counts the stored agents. No agent is live at a start (no runtime
// outlives the daemon), so none gets an actor until it is addressed
// (served): a start costs the same whatever the history.
func (r *Actor) load(_ actor.Context) {
	n, err := r.deps.Store.CountAgents()
	if err != nil {
		r.deps.Logger.Error("registry: count agents", "err", err)
		return
	}
	r.deps.Metrics.AgentsAdd(protocol.RuntimeStopped, n)
	r.deps.Logger.Info("registry loaded", "agents", n)
}

func (r *Actor) spawn(c actor.Context, m store.Agent) *entry {
	return r.spawnNamed(c, m, m.AgentID, -1)
}

// spawnNamed spawns m's actor under name: its agent ID, or for a respawn
// that ID and "~n" (respawn). The name starts with the agent ID, so that
// a Terminated names its entry (onTerminated).
// epoch is the last runtime generation its actors ran (-1: none).
func (r *Actor) spawnNamed(c actor.Context, m store.Agent, name string, epoch int64) *entry {
	m = r.deps.Agent.Models.Fill(m)
	pid, err := c.SpawnNamed(agent.PropsAfter(m, r.deps.Agent, epoch), name)
	if err != nil {
		r.deps.Logger.Error("registry: spawn agent actor", "agent_id", m.AgentID, "err", err)
		return nil
	}
	e := &entry{pid: pid, m: m, info: agent.InfoOf(m, protocol.StatusIdle, protocol.RuntimeStopped, m.Mode, agent.UsageOf(m))}
	e.info.Node = r.deps.Agent.Node
	e.epoch = epoch
	r.agents[m.AgentID] = e
	r.deps.Metrics.AgentState("", e.info.RuntimeState)
	return e
}

// detachJobs stops forwarding to the jobs coordinator.
func (r *Actor) detachJobs(c actor.Context) {
	if r.jobs != nil {
		c.Unwatch(r.jobs)
		r.jobs = nil
	}
}

// detachWorkspaces stops forwarding to the workspace actor.
func (r *Actor) detachWorkspaces(c actor.Context) {
	if r.workspaces != nil {
		c.Unwatch(r.workspaces)
		r.workspaces = nil
	}
}

func (r *Actor) onTerminated(c actor.Context, m *actor.Terminated) {
	if r.team != nil && r.team.Equal(m.Who) {
		r.deps.Logger.Error("registry: team coordinator stopped; teams are unavailable")
		r.team = nil
		return
	}
	if r.workspaces != nil && r.workspaces.Equal(m.Who) {
		r.deps.Logger.Error("registry: workspace actor stopped; workspaces are unavailable")
		r.workspaces = nil
		return
	}
	if r.jobs != nil && r.jobs.Equal(m.Who) {
		// Stopped under us (a failure: the daemon detaches it before it
		// stops it): from now on subagent.* is answered, not lost.
		r.deps.Logger.Error("registry: jobs coordinator stopped; subagent jobs are unavailable")
		r.jobs = nil
		return
	}
	// An agent actor is this actor's child named by its agent ID (and
	// "~n" for a respawn, spawnNamed), so its PID names its entry: no pass over every agent per Terminated,
	// which a shutdown receives once per agent.
	name, ok := strings.CutPrefix(m.Who.Id, c.Self().Id+"/")
	id, _, _ := strings.Cut(name, "~")
	e := r.agents[id]
	if !ok || e == nil || !e.pid.Equal(m.Who) {
		return
	}
	if e.passivating {
		r.passivated(c, e)
		return
	}
	if r.draining {
		r.markDrained(e)
		r.checkDrained()
		return
	}
	// An agent actor failed (a bug). Its runtime child was killed with
	// it; the durable identity is intact, so serve it again.
	r.deps.Logger.Error("registry: agent actor stopped unexpectedly; respawning", "agent_id", id)
	r.forget(id)
	r.deps.Metrics.AgentState(e.info.RuntimeState, "")
	// Under a name of its own: a PID names its actor by name, so messages
	// still on their way to the stopped actor and its runtime actor (an
	// exit, a Terminated) would otherwise reach the new ones, and the new
	// actor took its runtime for dead before it was ready.
	r.respawns++
	r.spawnNamed(c, e.m, e.m.AgentID+"~"+strconv.Itoa(r.respawns), e.epoch)
}

// markDrained marks e drained, once.
func (r *Actor) markDrained(e *entry) {
	if !e.drained {
		e.drained = true
		r.ndrained++
	}
}

// forget deletes agent id's entry, keeping the drained count.
func (r *Actor) forget(id string) {
	if e := r.agents[id]; e != nil {
		if e.drained {
			r.ndrained--
		}
		e.stopTimer()
	}
	delete(r.agents, id)
}

func reply(cmd *Command, data any) {
	cmd.Client.Send(protocol.NewResponse(cmd.Header.ID, cmd.Header.Type, data))
}

func fail(cmd *Command, err error) {
	cmd.Client.Send(protocol.NewErrorResponse(cmd.Header.ID, cmd.Header.Type, err))
}

func (r *Actor) onCommand(c actor.Context, cmd *Command) {
	typ := cmd.Header.Type
	switch typ {
	case protocol.TypeAgentList:
		m, _ := cmd.Cmd.(*protocol.AgentList)
		if m == nil {
			m = &protocol.AgentList{}
		}
		r.list(cmd, m)
		return
	case protocol.TypeAgentStatus:
		if id := cmd.Header.AgentID; id != "" {
			info, found, err := r.infoOf(id)
			switch {
			case err != nil:
				fail(cmd, protocol.Errorf(protocol.CodeInternal, "agent %s could not be read", id))
			case !found:
				if in, ok := r.remoteInfo(id); ok {
					reply(cmd, protocol.AgentListData{Agents: []protocol.AgentInfo{in}})
					return
				}
				fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no agent %s", id))
			default:
				reply(cmd, protocol.AgentListData{Agents: []protocol.AgentInfo{info}})
			}
			return
		}
		// Every agent, as agent.list without filters (docs/protocol.md
		// §13 "Paged lists": the unpaged form is for small stores).
		r.list(cmd, &protocol.AgentList{})
		return
	case protocol.TypeAgentCreate:
		r.create(c, cmd)
		return
	case protocol.TypeAgentRemove:
		r.remove(c, cmd)
		return
	case protocol.TypeDaemonShutdown:
		reply(cmd, nil)
		if r.deps.OnShutdown != nil {
			r.deps.OnShutdown(cmd.Cmd.(*protocol.DaemonShutdown).Force)
		}
		return
	case protocol.TypeDaemonStatus:
		reply(cmd, r.status())
		return
	case protocol.TypeClusterStatus:
		var st protocol.ClusterStatusData
		if r.deps.ClusterStatus != nil {
			st = r.deps.ClusterStatus()
		}
		reply(cmd, st)
		return
	case protocol.TypeModelsList:
		reply(cmd, r.deps.Agent.Models.Catalog)
		return
	case protocol.TypeDaemonCheck:
		st := r.deps.Store
		started := r.deps.Group.Go(func() { // a full consistency check reads the whole file
			var data protocol.DaemonCheckData
			if err := st.Check(); err != nil {
				data.StoreError = err.Error()
			} else {
				data.StoreOK = true
			}
			data.SchemaVersion, _ = st.SchemaVersion()
			reply(cmd, data)
		})
		if !started {
			fail(cmd, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
		}
		return
	case protocol.TypeGetSync:
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "get_sync is internal to the daemon"))
		return
	}
	switch protocol.CommandScope(typ) {
	case protocol.ScopeAgent:
		if cmd.Header.AgentID == "" {
			fail(cmd, protocol.Errorf(protocol.CodeNotAttached, "per-agent command %s needs an agent_id on a daemon connection", typ))
			return
		}
	case protocol.ScopeOrchestrator:
		switch typ {
		case protocol.TypeSubagentCreate, protocol.TypeSubagentWait, protocol.TypeSubagentSteer,
			protocol.TypeSubagentRelaunch, protocol.TypeSubagentStatus, protocol.TypeSubagentStop,
			protocol.TypeJobsList, protocol.TypeJobsShow, protocol.TypeJobsPrune:
			if r.jobs == nil || r.draining {
				fail(cmd, protocol.Errorf(protocol.CodeConflict, "subagent jobs are not available (daemon shutting down)"))
				return
			}
			if m, ok := cmd.Cmd.(*protocol.SubagentCreate); ok {
				// A live parent's projection; the coordinator reads the
				// manifest of one that is not (it has nothing unsaved).
				if e := r.agents[m.ParentAgentID]; e != nil {
					cmd.Parent = e.info
				}
			}
			c.Send(r.jobs, cmd) // the coordinator answers the client
			return
		case protocol.TypeWorkspaceCreate, protocol.TypeWorkspaceAttach, protocol.TypeWorkspaceList,
			protocol.TypeWorkspaceStatus, protocol.TypeWorkspaceRetire, protocol.TypeWorkspaceDiff,
			protocol.TypeWorkspaceMerge:
			if r.workspaces == nil || r.draining {
				fail(cmd, protocol.Errorf(protocol.CodeConflict, "workspaces are not available (daemon shutting down)"))
				return
			}
			c.Send(r.workspaces, cmd) // the workspace actor answers the client
			return
		case protocol.TypeTeamGoalSubmit, protocol.TypeTeamGoalList, protocol.TypeTeamGoalShow,
			protocol.TypeTeamGoalCancel, protocol.TypeTeamTaskCreate, protocol.TypeTeamTaskAction,
			protocol.TypeTeamDecisionList, protocol.TypeTeamDecisionAnswer, protocol.TypeTeamMemoryList,
			protocol.TypeTeamMemoryPut, protocol.TypeTeamMemoryDelete, protocol.TypeTeamFeed,
			protocol.TypeTeamMessage:
			if r.team == nil || r.draining {
				fail(cmd, protocol.Errorf(protocol.CodeConflict, "teams are not available (daemon shutting down)"))
				return
			}
			c.Send(r.team, cmd) // the team coordinator answers the client
			return
		case protocol.TypeAgentAttach, protocol.TypeAgentDetach, protocol.TypeAgentTerminate, protocol.TypeAgentKill, protocol.TypeAgentUpdate:
		default:
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not supported by this daemon yet", typ))
			return
		}
	}
	e, err := r.served(c, cmd.Header.AgentID)
	if err != nil {
		if typ == protocol.TypeAgentAttach && cmd.Client.PID != nil {
			c.Send(cmd.Client.PID, &agent.Routed{AgentID: cmd.Header.AgentID})
		}
		fail(cmd, err)
		return
	}
	if e != nil && e.removing {
		if typ == protocol.TypeAgentAttach && cmd.Client.PID != nil {
			c.Send(cmd.Client.PID, &agent.Routed{AgentID: cmd.Header.AgentID})
		}
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "agent %s is being removed", cmd.Header.AgentID))
		return
	}
	if e == nil {
		if typ == protocol.TypeAgentAttach && cmd.Client.PID != nil {
			c.Send(cmd.Client.PID, &agent.Routed{AgentID: cmd.Header.AgentID}) // no agent: the connection stops holding
		}
		fail(cmd, r.notHere(cmd.Header.AgentID))
		return
	}
	r.deliver(c, e, &agent.Request{Client: cmd.Client, Header: cmd.Header, Cmd: cmd.Cmd, Raw: cmd.Raw}, nil)
}

// toAgent delivers a message to an agent actor for another actor (the jobs
// subsystem, a child agent delegating up), keeping the sender so replies
// reach it.
func (r *Actor) toAgent(c actor.Context, m *agent.Route) {
	e, err := r.served(c, m.AgentID)
	if err == nil && (e == nil || e.removing) { // one being removed is as good as gone
		err = protocol.Errorf(protocol.CodeNotFound, "no agent %s", m.AgentID)
	}
	if err != nil {
		r.undelivered(c, m.AgentID, m.Msg, c.Sender(), err)
		return
	}
	r.deliver(c, e, m.Msg, c.Sender())
}

// undelivered answers for a message that cannot reach agent id (it has
// none, or is being removed, or the daemon is shutting down) with err,
// as the agent would have refused it: the sender waits for an answer.
func (r *Actor) undelivered(c actor.Context, id string, msg any, sender *actor.PID, err error) {
	perr := protocol.AsError(err)
	switch msg := msg.(type) {
	case *agent.Request:
		if msg.Header.Type == protocol.TypeAgentAttach && msg.Client.PID != nil {
			c.Send(msg.Client.PID, &agent.Routed{AgentID: id}) // the connection stops holding
		}
		msg.Client.Send(protocol.NewErrorResponse(msg.Header.ID, msg.Header.Type, perr))
	case *agent.LeaseStart:
		c.Send(msg.Holder, &agent.LeaseEnded{RunID: msg.RunID, AgentID: id, Error: perr.Message})
	case *agent.LeaseSteer:
		// No child to take it: no turn of the run is in flight.
		if msg.ReplyTo != nil {
			c.Send(msg.ReplyTo, &agent.SteerAnswer{CorrelationID: msg.CorrelationID, Status: protocol.SteerConflict})
		} else if msg.Client != nil {
			msg.Client.Send(protocol.NewResponse(msg.Header.ID, msg.Header.Type, protocol.SubagentSteerData{
				Status: protocol.SteerConflict, RunID: msg.RunID, CorrelationID: msg.CorrelationID}))
		}
	case *agent.Inject:
		if sender != nil {
			c.Send(sender, &agent.Injected{Key: msg.Key, Err: perr})
		}
	case *agent.Delegate:
		// An ancestor on another node: the uplink carries the request
		// there (docs/protocol.md §13 "Runs on other nodes").
		if node, ok := r.remoteNode(id); ok && r.uplink != nil && node != "" {
			c.Send(r.uplink, &RemoteDelegate{Node: node, AgentID: id, Msg: msg})
			return
		}
		c.Send(msg.Origin, &agent.DelegateResult{RequestID: msg.RequestID})
	}
}

// infos is the live agents' projections in agent.list's order.
func (r *Actor) infos() []protocol.AgentInfo {
	out := make([]protocol.AgentInfo, 0, len(r.agents))
	for _, e := range r.agents {
		out = append(out, e.info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].AgentID < out[j].AgentID
	})
	return out
}

func (r *Actor) status() protocol.DaemonStatusData {
	var st protocol.DaemonStatusData
	if r.deps.DaemonStatus != nil {
		st = r.deps.DaemonStatus()
	}
	st.Connections = r.deps.Hub.Len()
	st.AgentsByRuntimeState = map[protocol.RuntimeState]int{}
	st.AgentsByStatus = map[protocol.AgentStatus]int{}
	for _, e := range r.agents {
		st.AgentsByRuntimeState[e.info.RuntimeState]++
		st.AgentsByStatus[e.info.Status]++
	}
	// Every stored agent without an actor is idle with its runtime
	// stopped (restingInfo).
	if n, err := r.deps.Store.CountAgents(); err == nil && n > len(r.agents) {
		st.AgentsByRuntimeState[protocol.RuntimeStopped] += n - len(r.agents)
		st.AgentsByStatus[protocol.StatusIdle] += n - len(r.agents)
	}
	if n, err := r.deps.Store.Size(); err == nil {
		st.StoreBytes = n
	}
	return st
}

// sessionIDPattern keeps an adopted session id from naming a path.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (r *Actor) onDrain(c actor.Context, m *Drain) {
	if m.Done != nil {
		r.drainers = append(r.drainers, m.Done)
	}
	if r.draining && !m.Force {
		r.checkDrained()
		return
	}
	r.draining = true
	r.force = r.force || m.Force
	// The jobs coordinator is stopped by the daemon before the drain (see
	// DetachJobs), so that no run starts during a shutdown and a run cut
	// short stays starting/active on disk, to be reconciled to interrupted
	// at the next start; a drain without it only stops forwarding.
	r.detachJobs(c)
	r.detachWorkspaces(c)
	if r.team != nil {
		c.Unwatch(r.team)
		r.team = nil
	}
	for _, e := range r.agents {
		e.stopTimer() // no passivation starts from now on
		if !e.drained {
			c.Send(e.pid, &agent.Shutdown{Force: m.Force})
		}
	}
	r.checkDrained()
}

func (r *Actor) checkDrained() {
	if !r.draining {
		return
	}
	if r.ndrained < len(r.agents) { // passivated agents have left agents: nothing to drain
		return
	}
	for _, ch := range r.drainers {
		close(ch)
	}
	r.drainers = nil
}
