package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
)

func reply(cmd *registry.Command, data any) {
	cmd.Client.Send(protocol.NewResponse(cmd.Header.ID, cmd.Header.Type, data))
}

func fail(cmd *registry.Command, err error) {
	cmd.Client.Send(protocol.NewErrorResponse(cmd.Header.ID, cmd.Header.Type, err))
}

// onCommand serves a subagent.* or jobs.* command the registry forwarded.
// Every command is answered exactly once: here, after its commit, by a
// waiter, by a job actor (stop) or by the child agent (steer).
func (co *Coordinator) onCommand(c actor.Context, cmd *registry.Command) {
	switch m := cmd.Cmd.(type) {
	case *protocol.JobsList:
		co.opList(cmd, m)
		return
	case *protocol.JobsShow:
		co.opShow(cmd, m)
		return
	case *protocol.JobsPrune:
		co.opPrune(c, cmd, m)
		return
	}
	parent := protocol.SubagentParent(cmd.Cmd)
	pm, err := co.idx.agent(parent)
	if err != nil {
		fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no agent %s", parent))
		return
	}
	co.remember(c, parent, cmd.Client)
	switch m := cmd.Cmd.(type) {
	case *protocol.SubagentCreate:
		if live := cmd.Parent; live.AgentID == pm.AgentID && live.Provider != "" {
			// What the parent runs now (docs/protocol.md §13, providers).
			pm.Provider, pm.Model = live.Provider, live.Model
		}
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
	default:
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not a subagent command", cmd.Header.Type))
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

func (co *Coordinator) create(c actor.Context, cmd *registry.Command, m *protocol.SubagentCreate, pm store.Agent) {
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
	if m.Runtime != "" && (co.deps.KnownRuntime == nil || !co.deps.KnownRuntime(m.Runtime)) {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, `field "runtime": no runtime profile %q is configured`, m.Runtime))
		return
	}
	tools, skills, err := childTools(m, pm)
	if err == nil && co.deps.CheckTools != nil {
		// The parent's own MCP servers' tools are the parent's: childTools
		// checked them; the profile knows only its own.
		err = co.deps.CheckTools(firstNonEmpty(m.Runtime, pm.Runtime), protocol.WithoutMCPTools(tools, pm.MCPServers), skills)
	}
	if err != nil {
		fail(cmd, err)
		return
	}
	if len(tasks) > maxTasks {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "field \"tasks\": %d tasks exceed the launch policy's maxTasks %d", len(tasks), maxTasks))
		return
	}
	// A child inherits its parent's provider (and model, when it names
	// neither); what it names must be configured (docs/protocol.md §13,
	// providers).
	childRuntime := firstNonEmpty(m.Runtime, pm.Runtime)
	prov, model, err := co.deps.Models.ResolveChild(childRuntime, pm, m.Provider, m.Model)
	if err != nil {
		fail(cmd, err)
		return
	}
	if pm.Depth+1 > maxDepth {
		fail(cmd, protocol.Errorf(protocol.CodePermissionDenied, "launch policy: depth %d exceeds maxDepth %d", pm.Depth+1, maxDepth))
		return
	}
	if m.Isolation == protocol.IsolationWorkspace && co.deps.Workspaces == nil {
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "field \"isolation\": workspaces are not available in this daemon"))
		return
	}
	if m.RequestID != "" {
		if j := co.idx.byRequest(m.ParentAgentID, m.RequestID); j != nil {
			reply(cmd, createdData(j))
			return
		}
		reqKey := requestKey(m.ParentAgentID, m.RequestID)
		if pending, ok := co.creating[reqKey]; ok {
			// The same request is being committed: answer both alike.
			co.creating[reqKey] = append(pending, cmd)
			return
		}
		co.creating[reqKey] = nil
	}
	now := co.deps.Clock.Now()
	job := store.Job{JobID: ids.New("job"), ParentAgentID: m.ParentAgentID, Strategy: strategy,
		RequestID: m.RequestID, CreatedAt: now.UnixMilli()}
	aliases := map[string]string{}
	var agents []store.Agent
	lp := pm.LaunchPolicy
	if lp == nil {
		lp = &store.LaunchPolicy{MaxTasks: maxTasks, MaxDepth: maxDepth}
	}
	for i, t := range tasks {
		alias, norm := co.aliases.pick(m.ParentAgentID)
		a := store.Agent{
			AgentID: ids.New("agent"), SessionID: ids.New("sess"), Cwd: pm.Cwd, Name: t.Name,
			Model: model, Provider: prov,
			Mode: firstNonEmpty(m.Mode, pm.Mode), Tools: tools, Skills: skills, HeadlessPolicy: pm.HeadlessPolicy,
			MCPServers:    pm.MCPServers, // inherited like tools and skills (docs/protocol.md §10.1)
			SystemPrompt:  delegatedPrompt(m.ParentAgentID, t.Name, alias),
			ParentAgentID: m.ParentAgentID, CreatedAt: now.UnixMilli(), Depth: pm.Depth + 1,
			LaunchPolicy: lp, Alias: alias, DefinitionName: t.Name, DisplayName: view.DisplayName(t.Name, alias),
			Runtime: childRuntime,
		}
		agents = append(agents, a)
		aliases[norm] = a.AgentID
		job.Runs = append(job.Runs, store.Run{
			RunID: ids.New("run"), Index: i, Name: t.Name, AgentID: a.AgentID, Alias: alias, Task: t.Task,
			State: protocol.RunQueued, QueuedAt: now.UnixMilli(), TimeoutMs: lim.RunTimeout.Milliseconds(),
			Node: co.node(),
		})
	}
	var plan *workspaces.Plan
	anywhere := false
	if m.Isolation == protocol.IsolationWorkspace {
		plan = planOf(&job, pm.Cwd)
		// Isolated runs of a single or parallel job may run on any node of
		// a cluster (anywhere.go; the commit decides, once it knows the
		// repository has a remote every node can reach). A chain's steps
		// share one worktree in order, so a chain stays here.
		anywhere = co.deps.Remote != nil && strategy != protocol.StrategyChain
	}
	co.commit(c, cmd, job, agents, aliases, plan, anywhere)
}

// node is this node's name in a cluster, "" on a single shardd: where the
// runs it starts itself run (store.Run.Node).
func (co *Coordinator) node() string {
	if co.deps.Remote == nil {
		return ""
	}
	return co.deps.Remote.Node()
}

func (co *Coordinator) relaunch(c actor.Context, cmd *registry.Command, m *protocol.SubagentRelaunch) {
	agentID, err := co.idx.resolveAgent(m.ParentAgentID, m.Target)
	if err != nil {
		fail(cmd, err)
		return
	}
	if run := co.idx.liveRun(agentID); run != nil {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "agent %s already has run %s (%s)", agentID, run.RunID, run.State))
		return
	}
	if co.deps.Remote != nil {
		if prev := co.idx.currentRun(agentID); prev != nil && prev.Anywhere {
			// It lives on the node its run ran on, this one included, in
			// that node's worktree of its branch (anywhere.go).
			co.relaunchRemote(c, cmd, m, agentID, prev)
			return
		}
	}
	am, err := co.idx.agent(agentID)
	if err != nil {
		fail(cmd, protocol.Errorf(protocol.CodeNotFound, "no agent %s", agentID))
		return
	}
	ws, err := co.workspaceOf(am)
	if err != nil {
		fail(cmd, err)
		return
	}
	now := co.deps.Clock.Now()
	job := store.Job{JobID: ids.New("job"), ParentAgentID: m.ParentAgentID, Strategy: protocol.StrategySingle,
		CreatedAt: now.UnixMilli(), Runs: []store.Run{{
			RunID: ids.New("run"), Name: am.Name, AgentID: agentID, Alias: am.Alias, Task: m.Task,
			State: protocol.RunQueued, QueuedAt: now.UnixMilli(), TimeoutMs: co.deps.Limits.RunTimeout.Milliseconds(),
			Workspace: ws, Node: co.node(),
		}}}
	// Index now so a concurrent relaunch of the same agent conflicts.
	co.idx.addLive(&job)
	co.commit(c, cmd, job, nil, nil, nil, false)
}

// commit writes the job (and its new agents) off the mailbox; the response
// is sent only after the transaction commits. Creates committing at the
// same time share a transaction (store group commit).
//
// With a plan (isolation "workspace") the goroutine first asks the
// workspace actor for the workspace records and binds the runs and child
// agents to them (isolation.go); the records are committed in the job's
// transaction. With anywhere (a cluster node) the runs are published to
// the cluster's records first when the repository has a remote "origin"
// (anywhere.go).
func (co *Coordinator) commit(c actor.Context, cmd *registry.Command, job store.Job, agents []store.Agent, aliases map[string]string, plan *workspaces.Plan, anywhere bool) {
	st, sys, self, wsPID, remote := co.deps.Store, co.sys, co.self, co.deps.Workspaces, co.deps.Remote
	if plan == nil {
		// Queued from the mailbox; the store's writer answers the mailbox
		// once the batch committed, for every create in it at once: no
		// goroutine waits for the commit, and none per create is woken
		// after it. The group counts the write until it is answered.
		end, ok := co.deps.Group.Begin()
		if !ok {
			co.onCreated(c, &createDone{cmd: cmd, job: job, agents: agents, aliases: aliases, err: errStopping})
			return
		}
		st.CreateJobWorkspacesThen(job, agents, aliases, nil, func(existing string, err error) {
			defer end()
			sys.Root.Send(self, &createDone{cmd: cmd, job: job, agents: agents, aliases: aliases, existing: existing, err: err})
		})
		return
	}
	started := co.deps.Group.Go(func() {
		recs, err := askPlan(sys, wsPID, plan)
		if err != nil {
			sys.Root.Send(self, &createDone{cmd: cmd, job: job, agents: agents, aliases: aliases, err: err})
			return
		}
		// Copies: the mailbox's job and agents stay as they were.
		job.Runs, agents = slices.Clone(job.Runs), slices.Clone(agents)
		bindWorkspaces(&job, agents, recs)
		local := agents
		var undo func(context.Context)
		if anywhere {
			// Published to the cluster first (anywhere.go): its records
			// must exist before the create is answered, and a failure
			// there leaves nothing here.
			var err error
			local, undo, err = publish(remote, &job, agents, recs)
			if err != nil {
				sys.Root.Send(self, &createDone{cmd: cmd, job: job, agents: agents, aliases: aliases, err: err})
				return
			}
		}
		existing, err := st.CreateJobWorkspaces(job, local, aliases, recs)
		if err != nil && undo != nil {
			undo(context.Background())
		}
		sys.Root.Send(self, &createDone{cmd: cmd, job: job, agents: local, aliases: aliases, existing: existing, err: err})
	})
	if !started {
		// The daemon is stopping: nothing was written; answer as a failed
		// commit would, without waiting for one.
		co.onCreated(c, &createDone{cmd: cmd, job: job, agents: agents, aliases: aliases, err: errStopping})
	}
}

// errStopping is a commit refused because the daemon is stopping.
var errStopping = protocol.Errorf(protocol.CodeConflict, "daemon is shutting down")

func (co *Coordinator) onCreated(c actor.Context, m *createDone) {
	co.aliases.release(m.job.ParentAgentID, m.aliases, m.err != nil)
	var repeats []*registry.Command
	if m.job.RequestID != "" && m.cmd.Header.Type != protocol.TypeSubagentRelaunch {
		key := requestKey(m.job.ParentAgentID, m.job.RequestID)
		repeats = co.creating[key]
		delete(co.creating, key)
	}
	answer := func(send func(*registry.Command)) {
		send(m.cmd)
		for _, r := range repeats {
			send(r)
		}
	}
	if m.err != nil {
		co.idx.forget(m.job.JobID)
		switch {
		case errors.Is(m.err, store.ErrExists) && m.existing != "" && co.idx.job(m.existing) != nil:
			j := co.idx.job(m.existing)
			answer(func(cmd *registry.Command) { reply(cmd, createdData(j)) })
		case errors.Is(m.err, store.ErrConflict):
			answer(func(cmd *registry.Command) { fail(cmd, protocol.Errorf(protocol.CodeConflict, "%w", m.err)) })
		case errors.Is(m.err, errStopping), isRefusal(m.err):
			answer(func(cmd *registry.Command) { fail(cmd, m.err) })
		default:
			co.deps.Logger.Error("jobs: create", "err", m.err)
			answer(func(cmd *registry.Command) {
				fail(cmd, protocol.Errorf(protocol.CodeInternal, "could not store the job"))
			})
		}
		return
	}
	co.idx.addLive(&m.job)
	for _, r := range m.job.Runs {
		if !r.Anywhere { // counted by the node that runs it (observe)
			co.deps.Metrics.RunState("", r.State)
		}
	}
	if len(m.agents) > 0 {
		// Before the response: a client that attaches to a child as soon
		// as it reads the ack reaches the registry after the Adopt, so the
		// child it was just given is never NOT_FOUND.
		c.Send(co.deps.Registry, &registry.Adopt{Agents: m.agents})
	}
	switch m.cmd.Header.Type {
	case protocol.TypeSubagentRelaunch:
		r := m.job.Runs[0]
		reply(m.cmd, protocol.SubagentRelaunchData{JobID: m.job.JobID, RunID: r.RunID, AgentID: r.AgentID,
			Alias: r.Alias, State: r.State, DefinitionName: r.Name, DisplayName: view.DisplayName(r.Name, r.Alias)})
	default:
		answer(func(cmd *registry.Command) { reply(cmd, createdData(&m.job)) })
	}
	co.deps.Logger.Info("job accepted", "job_id", m.job.JobID, "runs", len(m.job.Runs), "strategy", m.job.Strategy)
	co.spawnJob(c, m.job)
}

func createdData(j *store.Job) protocol.SubagentCreateData {
	out := protocol.SubagentCreateData{JobID: j.JobID, Strategy: j.Strategy}
	for _, r := range j.Runs {
		out.Runs = append(out.Runs, protocol.CreatedRun{RunID: r.RunID, Index: r.Index, Name: r.Name,
			State: protocol.RunQueued, AgentID: r.AgentID, Alias: r.Alias, DefinitionName: r.Name,
			DisplayName: view.DisplayName(r.Name, r.Alias), WorkspaceID: workspaceIDOf(&r)})
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ---- status / steer / stop ----

func (co *Coordinator) status(cmd *registry.Command, m *protocol.SubagentStatus) {
	data := protocol.SubagentStatusData{Agents: []protocol.SubagentAgentStatus{}}
	if len(m.Targets) > 0 {
		for _, h := range m.Targets {
			runIDs, err := co.idx.resolveRuns(m.ParentAgentID, []string{h})
			if err != nil {
				fail(cmd, err)
				return
			}
			for _, id := range runIDs {
				j, r := co.idx.run(id)
				snap := view.RunSnapshot(j, r, true)
				data.Agents = append(data.Agents, protocol.SubagentAgentStatus{AgentID: r.AgentID, Alias: r.Alias,
					DefinitionName: r.Name, DisplayName: view.DisplayName(r.Name, r.Alias), ParentAgentID: j.ParentAgentID, Run: &snap})
			}
		}
		reply(cmd, data)
		return
	}
	// The parent's 50 newest jobs: a walk of its index that stops there.
	mine := co.idx.parentJobs(m.ParentAgentID, 50)
	seen := map[string]bool{}
	for _, j := range mine {
		data.Jobs = append(data.Jobs, view.JobSnapshot(j, true))
		for _, r := range j.Runs {
			if seen[r.AgentID] {
				continue
			}
			seen[r.AgentID] = true
			cur := co.idx.currentRun(r.AgentID)
			if cur == nil {
				continue
			}
			cj, _ := co.idx.run(cur.RunID)
			if cj == nil {
				continue
			}
			snap := view.RunSnapshot(cj, cur, true)
			data.Agents = append(data.Agents, protocol.SubagentAgentStatus{AgentID: r.AgentID, Alias: r.Alias,
				DefinitionName: r.Name, DisplayName: view.DisplayName(r.Name, r.Alias), ParentAgentID: j.ParentAgentID, Run: &snap})
		}
	}
	if data.Jobs == nil {
		data.Jobs = []protocol.JobSnapshot{}
	}
	reply(cmd, data)
}

// steer is strict active steer (docs/protocol.md §10.3): only a run that is
// actively executing takes the message, into its current turn; the child
// answers injected or conflict. Queued and terminal runs are CONFLICT.
func (co *Coordinator) steer(c actor.Context, cmd *registry.Command, m *protocol.SubagentSteer) {
	runIDs, err := co.idx.resolveRuns(m.ParentAgentID, []string{m.Target})
	if err != nil {
		fail(cmd, err)
		return
	}
	_, r := co.idx.run(runIDs[0])
	if r.State != protocol.RunActive {
		fail(cmd, protocol.Errorf(protocol.CodeConflict, "run %s is %s, not active", r.RunID, r.State))
		return
	}
	if r.Anywhere && r.Node != co.node() {
		// Its child lives on the node that claimed it (docs/protocol.md
		// §13 "Runs on other nodes"): the uplink carries the steer there
		// and the outcome back, which the run's job actor records before
		// the parent is answered; a lost link answers NODE_UNAVAILABLE.
		c.Send(co.deps.Registry, &registry.RemoteSteer{Node: r.Node, AgentID: r.AgentID, Holder: co.actors[co.idx.jobOf(r.RunID)],
			Msg: &agent.LeaseSteer{RunID: r.RunID, Message: m.Message, CorrelationID: ids.New("steer"), Client: cmd.Client, Header: cmd.Header}})
		return
	}
	c.Send(co.deps.Registry, &agent.Route{AgentID: r.AgentID, Msg: &agent.LeaseSteer{
		RunID: r.RunID, Message: m.Message, CorrelationID: ids.New("steer"), Client: cmd.Client, Header: cmd.Header,
	}})
}

func (co *Coordinator) stop(c actor.Context, cmd *registry.Command, m *protocol.SubagentStop) {
	h := m.Handle
	var jobID string
	var runIDs []string
	if j := co.idx.job(h); j != nil && j.ParentAgentID == m.ParentAgentID {
		jobID = h
	} else {
		resolved, err := co.idx.resolveRuns(m.ParentAgentID, []string{h})
		if err != nil {
			fail(cmd, err)
			return
		}
		runIDs = resolved
		jobID = co.idx.jobOf(resolved[0])
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

// delegatedPrompt is the system prompt of a child the coordinator creates,
// the managed manifest field system_prompt (docs/protocol.md §10.1): who
// delegated the work and what becomes of its last message. The runtime
// gives it to the child's model after its own system prompt. It holds no
// task text (the task is the child's first prompt and stays private to the
// job record), and it is bounded: the name is at most protocol.MaxNameLen
// bytes, so the prompt stays under a kilobyte.
//
// The child inherits its parent's tools and skills (a child never has a
// tool its parent lacks), so delegation cannot widen what an agent may do.
func delegatedPrompt(parentID, name, alias string) string {
	return fmt.Sprintf("You are a subagent named %q (alias %s): agent %s delegated a task to you, which runs as a "+
		"background job. The task is the user's message. Work on it on your own and stay within it. The agent that "+
		"delegated it reads only your final message, so end with a self-contained report: what you did, what you "+
		"found, and what is left to do.", name, alias, parentID)
}

// childTools are the tools and skills of the children of subagent.create m
// under parent pm: what m names, else the parent's. A child never gets what
// its parent lacks: a tool the parent does not have is PERMISSION_DENIED
// (a parent limited to read must not delegate a write), a skill it does
// not have INVALID_REQUEST (its skills were checked on disk at its create).
func childTools(m *protocol.SubagentCreate, pm store.Agent) (tools, skills []string, err error) {
	tools, skills = pm.Tools, pm.Skills
	if len(m.Tools) > 0 {
		for _, t := range m.Tools {
			if pm.Tools != nil && !slices.Contains(pm.Tools, t) {
				return nil, nil, protocol.Errorf(protocol.CodePermissionDenied, `field "tools": the parent agent has no tool %q`, t)
			}
		}
		tools = m.Tools
	}
	if len(m.Skills) > 0 {
		for _, s := range m.Skills {
			if !slices.Contains(pm.Skills, s) {
				return nil, nil, protocol.Errorf(protocol.CodeInvalidRequest, `field "skills": the parent agent has no skill %q`, s)
			}
		}
		skills = m.Skills
	}
	return tools, skills, nil
}
