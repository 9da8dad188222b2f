package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/ids"
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
	case *agent.Inject:
		if sender != nil {
			c.Send(sender, &agent.Injected{Key: msg.Key, Err: perr})
		}
	case *agent.Delegate:
		// An ancestor on another node: the uplink carries the request
		// there (docs/protocol.md §13 "Runs on other nodes").
		if in, ok := r.remoteInfo(id); ok && r.uplink != nil && in.Node != "" {
			c.Send(r.uplink, &RemoteDelegate{Node: in.Node, AgentID: id, Msg: msg})
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

// create validates agent.create, reserves the session id, and does the
// filesystem checks and the store commit off the mailbox.
func (r *Actor) create(c actor.Context, cmd *Command) {
	req := cmd.Cmd.(*protocol.AgentCreate)
	if r.draining {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
		return
	}
	if !filepath.IsAbs(req.Cwd) {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "cwd": must be an absolute path`))
		return
	}
	// Another node's name was forwarded there by the gateway; one that
	// reaches the registry names no node it can reach (docs/protocol.md
	// §10.1).
	if req.Node != "" && req.Node != r.deps.Agent.Node {
		if r.deps.Agent.Node == "" {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "node": this daemon is not clustered`))
		} else {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "node": %q is not a node this daemon forwards to`, req.Node))
		}
		return
	}
	if !r.deps.Agent.Runtime.KnownProfile(req.Runtime) {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "runtime": no runtime profile %q is configured`, req.Runtime))
		return
	}
	if err := r.deps.Agent.Runtime.CheckMCP(req.Runtime, req.MCPServers); err != nil {
		fail(cmd, err)
		return
	}
	if err := r.deps.Agent.Runtime.CheckTools(req.Runtime, protocol.WithoutMCPTools(req.Tools, req.MCPServers), req.Skills); err != nil {
		fail(cmd, err)
		return
	}
	if req.ParentAgentID != "" {
		if _, found, err := r.infoOf(req.ParentAgentID); err != nil || !found {
			fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no parent agent %s", req.ParentAgentID))
			return
		}
	}
	// The manifest names what runs: the provider and model resolved
	// against the configured ones, or NOT_FOUND before anything is stored
	// (docs/protocol.md §13, providers).
	prov, model, err := r.deps.Agent.Models.ResolveCreate(req.Runtime, req.Provider, req.Model)
	if err != nil {
		fail(cmd, err)
		return
	}
	m := store.Agent{
		AgentID:        ids.New("agent"),
		SessionID:      req.SessionID,
		Cwd:            req.Cwd,
		Name:           req.Name,
		Model:          model,
		Provider:       prov,
		Mode:           req.Mode,
		Tools:          req.Tools,
		Skills:         req.Skills,
		MCPServers:     req.MCPServers,
		HeadlessPolicy: req.HeadlessPolicy,
		ParentAgentID:  req.ParentAgentID,
		CreatedAt:      r.deps.Clock.Now().UnixMilli(),
		Runtime:        req.Runtime,
		// The managed-child fields (depth, launch_policy, alias, …) are never
		// copied from a client: Validate refuses them (docs/protocol.md
		// §10.1), and the jobs coordinator writes its children's manifests
		// itself.
	}
	if m.Mode == "" {
		m.Mode = r.deps.DefaultMode
	}
	adopt := m.SessionID != ""
	if adopt {
		if !sessionIDPattern.MatchString(m.SessionID) {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "session_id": not a session id`))
			return
		}
		// Adopted by an agent being created, or by a stored one (live or
		// not: the store's session index has them all).
		_, taken := r.reserved[m.SessionID]
		if !taken {
			var err error
			if _, taken, err = r.deps.Store.SessionAdopted(m.SessionID); err != nil {
				fail(cmd, protocol.Errorf(protocol.CodeInternal, "the store could not be read"))
				return
			}
		}
		if taken {
			fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "session is already adopted"))
			return
		}
	} else {
		m.SessionID = ids.New("sess")
	}
	r.reserved[m.SessionID] = m.AgentID // until the commit resolves

	sys, self := c.ActorSystem(), c.Self()
	st, sessionsDir, rc := r.deps.Store, r.deps.Agent.Runtime.SessionsDir, r.deps.Agent.Runtime
	started := r.deps.Group.Go(func() {
		err := prepare(&m, adopt, sessionsDir)
		if err == nil {
			// The skills are looked up where the runtime will: in the
			// canonical cwd and the Shard home.
			err = rc.CheckSkills(m.Runtime, m.Cwd, m.Skills)
		}
		if err == nil {
			// Commit before acknowledge: an acknowledged agent survives a
			// crash.
			if cerr := st.CreateAgent(m); cerr != nil {
				err = fmt.Errorf("store agent manifest: %w", cerr)
			}
		}
		sys.Root.Send(self, &createResult{cmd: cmd, m: m, err: err})
	})
	if !started {
		delete(r.reserved, m.SessionID)
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
	}
}

// prepare canonicalizes the cwd and checks an adopted session.
func prepare(m *store.Agent, adopt bool, sessionsDir string) error {
	cwd, err := filepath.EvalSymlinks(m.Cwd)
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "cwd": %s does not exist`, m.Cwd)
	}
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "cwd": %s is not a directory`, m.Cwd)
	}
	m.Cwd = filepath.Clean(cwd)
	if !adopt {
		return nil
	}
	f, err := os.Open(filepath.Join(sessionsDir, m.SessionID, sessionFile))
	if errors.Is(err, os.ErrNotExist) {
		// Not a top-level session: maybe a fork (docs/protocol.md §9.2
		// session_op fork), whose directory stays where the fork wrote it.
		if rel, ok := findFork(sessionsDir, m.SessionID); ok {
			m.SessionDir = rel
			f, err = os.Open(filepath.Join(sessionsDir, rel, sessionFile))
		}
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeNotFound, "no session %s", m.SessionID)
	}
	defer f.Close()
	rd := protocol.NewReader(f, 0)
	for {
		line, err := rd.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return protocol.Errorf(protocol.CodeSessionCorrupt, "session %s cannot be read", m.SessionID)
		}
		if !json.Valid(line) {
			return protocol.Errorf(protocol.CodeSessionCorrupt, "session %s cannot be restored", m.SessionID)
		}
	}
}

// sessionFile is a session directory's transcript; forksDir the
// subdirectory session_op fork writes a session's forks into, each in a
// directory of its own (the runtime's layout, runtime/refagent).
const (
	sessionFile = "session.jsonl"
	forksDir    = "forks"
	// maxForkDepth bounds the search for a fork of a fork of …
	maxForkDepth = 32
)

// findFork looks for the fork whose session id is id under every session
// in sessionsDir (forks of forks included) and returns its directory
// relative to sessionsDir. A fork is recognized by its transcript's first
// row, the checkpoint carrying the fork's session id; the transcript is
// never written here. Unreadable directories are skipped.
func findFork(sessionsDir, id string) (string, bool) {
	tops, err := os.ReadDir(sessionsDir)
	if err != nil {
		return "", false
	}
	var search func(rel string, depth int) (string, bool)
	search = func(rel string, depth int) (string, bool) {
		if depth > maxForkDepth {
			return "", false
		}
		forks, err := os.ReadDir(filepath.Join(sessionsDir, rel, forksDir))
		if err != nil {
			return "", false
		}
		for _, d := range forks {
			if !d.IsDir() || !sessionIDPattern.MatchString(d.Name()) {
				continue
			}
			fork := filepath.Join(rel, forksDir, d.Name())
			if forkSessionID(filepath.Join(sessionsDir, fork, sessionFile)) == id {
				return fork, true
			}
			if found, ok := search(fork, depth+1); ok {
				return found, true
			}
		}
		return "", false
	}
	for _, d := range tops {
		if !d.IsDir() || !sessionIDPattern.MatchString(d.Name()) {
			continue
		}
		if found, ok := search(d.Name(), 1); ok {
			return found, true
		}
	}
	return "", false
}

// forkSessionID is the session id a fork's transcript at path names in
// its first row (the fork checkpoint), or "".
func forkSessionID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := protocol.NewReader(f, 0).Next()
	if err != nil {
		return ""
	}
	var row struct {
		Type         string `json:"type"`
		ArtifactKind string `json:"artifactKind"`
		SessionID    string `json:"sessionId"`
	}
	if json.Unmarshal(line, &row) != nil || row.Type != "checkpoint" || row.ArtifactKind != "fork" {
		return ""
	}
	return row.SessionID
}

func (r *Actor) onCreated(c actor.Context, res *createResult) {
	delete(r.reserved, res.m.SessionID) // the store's index has it now, if committed
	if res.err != nil {
		if protocol.CodeOf(res.err) == protocol.CodeInternal {
			r.deps.Logger.Error("registry: agent.create failed", "err", res.err)
		}
		fail(res.cmd, res.err)
		return
	}
	e := r.spawn(c, res.m)
	if e == nil {
		fail(res.cmd, protocol.Errorf(protocol.CodeInternal, "agent actor could not be started"))
		return
	}
	r.deps.Logger.Info("agent created", "agent_id", res.m.AgentID)
	r.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentSpawned{
		Header: protocol.Header{Type: protocol.TypeAgentSpawned, AgentID: res.m.AgentID},
		Info:   e.info,
	}))
	// The agent starts its first runtime and answers once it is ready (or
	// with RUNTIME_START_FAILED, keeping the identity for a retry).
	c.Send(e.pid, &agent.Request{Client: res.cmd.Client, Header: res.cmd.Header, Cmd: res.cmd.Cmd, Raw: res.cmd.Raw})
}

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
