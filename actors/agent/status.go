package agent

import (
	"cmp"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
)

func (a *Actor) setStatus(c actor.Context, s protocol.AgentStatus) {
	if s == a.status {
		return
	}
	a.status = s
	a.broadcastStatus(c)
	a.setActivity(phaseOf(s), "")
	if s.Active() {
		return
	}
	a.idleSince = a.deps.Clock.Now()
	a.armIdle()
	a.pumpLease(c)
	if a.esc != nil && a.esc.Stage() == supervisor.ActAbort {
		act, wait := a.esc.Idle()
		a.perform(c, act, wait)
	}
	if a.terminateWhenIdle && !a.stopping {
		a.terminateWhenIdle = false
		a.stopRuntime(c, supervisor.StopGraceful)
	}
}

func phaseOf(s protocol.AgentStatus) string {
	switch s {
	case protocol.StatusStreaming:
		return protocol.PhaseStreaming
	case protocol.StatusWaitingForPermission, protocol.StatusWaitingForUI:
		return protocol.PhaseWaiting
	case protocol.StatusCompacting:
		return protocol.PhaseCompacting
	case protocol.StatusError:
		return protocol.PhaseError
	}
	return protocol.PhaseIdle
}

// setActivity broadcasts the sanitized agent_activity overview when the
// coarse phase (or tool) changes. It never carries text, args or paths.
func (a *Actor) setActivity(phase, tool string) {
	if phase == a.phase && tool == a.phaseArg {
		return
	}
	a.phase, a.phaseArg = phase, tool
	a.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentActivity{
		Header:    protocol.Header{Type: protocol.TypeAgentActivity, AgentID: a.m.AgentID},
		Timestamp: a.deps.Clock.Now().UnixMilli(),
		Phase:     phase,
		Status:    a.status,
		ToolName:  tool,
	}))
}

func (a *Actor) broadcastStatus(c actor.Context) {
	a.deps.Hub.Broadcast(protocol.MustMarshal(protocol.AgentStatusChanged{
		Header:       protocol.Header{Type: protocol.TypeAgentStatusChanged, AgentID: a.m.AgentID},
		Status:       a.status,
		RuntimeState: a.rstate,
	}))
	a.notifyInfo(c)
}

func (a *Actor) notifyInfo(c actor.Context) {
	if p := c.Parent(); p != nil {
		a.reportedIdle = a.idle()
		c.Send(p, &InfoChanged{Info: a.Info(), Attachments: len(a.attached), Idle: a.reportedIdle, Epoch: a.epoch})
	}
}

// Info returns the agent's public projection.
func (a *Actor) Info() protocol.AgentInfo {
	info := InfoOf(a.m, a.status, a.rstate, a.mode, a.usage)
	info.AttachedClients = len(a.attached) // the count InfoChanged.Attachments reports
	info.Node = a.deps.Node
	return info
}

// InfoOf projects a manifest and live state into AgentInfo.
func InfoOf(m store.Agent, status protocol.AgentStatus, rs protocol.RuntimeState, mode string, usage protocol.Usage) protocol.AgentInfo {
	if mode == "" {
		mode = m.Mode
	}
	info := protocol.AgentInfo{
		AgentID: m.AgentID, Name: m.Name, Cwd: m.Cwd, Model: m.Model, Provider: m.Provider, Mode: mode,
		Status: status, RuntimeState: rs, CreatedAt: m.CreatedAt, ParentAgentID: m.ParentAgentID,
		Alias: m.Alias, DefinitionName: m.DefinitionName, DisplayName: m.DisplayName, WorkspaceID: m.WorkspaceID,
		Runtime: cmp.Or(m.Runtime, DefaultProfile), Title: m.Title, Tools: m.Tools, Skills: m.Skills,
		MCPServers: slices.Sorted(maps.Keys(m.MCPServers)), // names only: their env and headers may hold secrets
	}
	if usage != (protocol.Usage{}) {
		u := usage
		info.Usage = &u
	}
	if info.Model == "" {
		// No model chosen at create: the runtime's default, as its last
		// turn reported it (agent views showed "-" for every such agent).
		info.Model = usage.Model
	}
	return info
}

func (a *Actor) saveSelection() {
	if a.deps.SaveSelection == nil {
		return
	}
	id, prov, model, mode, save := a.m.AgentID, a.m.Provider, a.m.Model, a.m.Mode, a.deps.SaveSelection
	if !a.goSave(func() { save(id, prov, model, mode) }) {
		a.log.Warn("model/mode selection not saved: the daemon is stopping", "model", model, "mode", mode)
	}
}

// UsageOf is the usage totals a manifest recorded (zero before any turn).
func UsageOf(m store.Agent) protocol.Usage {
	if m.Usage == nil {
		return protocol.Usage{}
	}
	u := m.Usage
	return protocol.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite,
		Cost: u.Cost, ContextTokens: u.ContextTokens, Model: u.Model}
}

func usageTurns(m store.Agent) int64 {
	if m.Usage == nil {
		return 0
	}
	return m.Usage.Turns
}

// saveUsage persists the usage totals (Deps.SaveUsage).
func (a *Actor) saveUsage() {
	if a.deps.SaveUsage == nil {
		return
	}
	u := a.usage
	rec := store.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite,
		Cost: u.Cost, ContextTokens: u.ContextTokens, Model: u.Model, Turns: a.usageTurns}
	id, save := a.m.AgentID, a.deps.SaveUsage
	if !a.goSave(func() { save(id, rec) }) {
		a.log.Warn("usage totals not saved: the daemon is stopping")
	}
}
