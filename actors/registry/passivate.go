package registry

import (
	"errors"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Live agents and passivation. The registry runs an actor only for a live
// agent: one whose runtime is not stopped, or a client is attached to, or
// that has anything in flight (a command, a request, a lease, a report, a
// save; the agent says which, agent.InfoChanged.Idle). Every other stored
// agent is served from its manifest: listed and counted from the store,
// and given an actor again the moment something addresses it (served).
// So memory and start-up follow the live work, not the history.
//
// An agent that has been idle for PassivateAfter is passivated: the
// registry sends it agent.Passivate and from then on holds every message
// for it, in order. The agent checks, on its own mailbox (so after
// whatever the registry sent it before), that it is still idle: then it
// stops itself, and on its Terminated the registry drops the entry, and if
// it held anything, serves the agent again from its manifest and sends
// the held messages to the new actor, in order. Otherwise the agent
// answers agent.PassivateBusy and the registry sends them on to it. No
// message is lost: only the registry addresses an idle agent (an attached
// connection, whose commands go to the agent directly, makes it busy).
//
// The grace period keeps the actor of an agent that is used in bursts
// (a person's detach and next attach, a job's child between its adoption
// and its lease, shardctl commands one after another) instead of
// rebuilding it for each command, and keeps a failed runtime's state
// visible for a while: a passivated agent is projected as after a daemon
// restart (restingInfo), idle and stopped. Its runtime_epoch is not reset:
// its next actor continues from the last one (epochs).

// DefaultPassivateAfter is Deps.PassivateAfter's default.
const DefaultPassivateAfter = 30 * time.Second

// passivation is an entry's part in it.
type passivation struct {
	// idle is what the agent last reported (InfoChanged.Idle).
	idle bool
	// timer is the pending grace period while idle; timerGen tags its
	// tick so that a stale one is ignored.
	timer    clock.Timer
	timerGen int
	// passivating: Passivate was sent; held are the messages for the
	// agent since, in order.
	passivating bool
	held        []heldMsg
	// gone: the actor stopped for a passivation while a removal of the
	// agent was being committed; onRemoved finishes it.
	gone bool
	// epoch is the agent's runtime generation as it last reported.
	epoch int64
}

// heldMsg is a message for an agent that is passivating, and who sent it.
type heldMsg struct {
	msg    any
	sender *actor.PID
}

// passivateTick ends an agent's grace period.
type passivateTick struct {
	agentID string
	gen     int
}

func (*passivateTick) isRegistryMessage() {}

func (e *entry) stopTimer() {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.timerGen++
}

// served returns the entry of agent id: its live one, or one made for it
// from its manifest (its actor spawned, under a name of its own: the one
// before it may still be stopping). nil, nil: no such agent. While the
// daemon shuts down no actor is made: CONFLICT.
func (r *Actor) served(c actor.Context, id string) (*entry, error) {
	if e := r.agents[id]; e != nil || id == "" {
		return e, nil
	}
	if r.draining {
		return nil, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down")
	}
	m, err := r.deps.Store.GetAgent(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		r.deps.Logger.Error("registry: read agent manifest", "agent_id", id, "err", err)
		return nil, protocol.Errorf(protocol.CodeInternal, "agent %s could not be read", id)
	}
	r.respawns++
	epoch, ran := r.epochs[id]
	if !ran {
		epoch = -1
	}
	e := r.spawnNamed(c, m, id+"~"+strconv.Itoa(r.respawns), epoch)
	delete(r.epochs, id) // the entry has it now
	if e == nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "agent actor could not be started")
	}
	r.deps.Metrics.AgentState(protocol.RuntimeStopped, "") // counted as stored until now (load, passivated)
	return e, nil
}

// deliver sends msg to e's actor (as sent by sender, when not nil), or
// holds it while e is passivating.
func (r *Actor) deliver(c actor.Context, e *entry, msg any, sender *actor.PID) {
	if e.passivating || e.gone {
		e.held = append(e.held, heldMsg{msg: msg, sender: sender})
		return
	}
	if sender != nil {
		c.RequestWithCustomSender(e.pid, msg, sender)
		return
	}
	c.Send(e.pid, msg)
}

// considerIdle starts e's grace period when it is idle and nothing else
// keeps it, and ends it when it is not.
func (r *Actor) considerIdle(c actor.Context, e *entry) {
	if !e.idle || e.passivating || e.removing || e.gone || r.draining {
		if e.timer != nil {
			e.stopTimer()
		}
		return
	}
	if e.timer != nil {
		return
	}
	e.timerGen++
	sys, self, tick := c.ActorSystem(), c.Self(), &passivateTick{agentID: e.m.AgentID, gen: e.timerGen}
	e.timer = r.deps.Clock.AfterFunc(r.deps.PassivateAfter, func() { sys.Root.Send(self, tick) })
}

// onPassivateTick asks an agent idle for the whole grace period to stop.
func (r *Actor) onPassivateTick(c actor.Context, m *passivateTick) {
	e := r.agents[m.agentID]
	if e == nil || m.gen != e.timerGen || e.timer == nil {
		return // stale: the agent was busy again, or is gone
	}
	e.timer = nil
	if !e.idle || e.passivating || e.removing || e.gone || r.draining {
		return
	}
	e.passivating = true
	c.Send(e.pid, &agent.Passivate{})
}

// onPassivateBusy keeps an agent that turned out busy and sends it what
// was held for it.
func (r *Actor) onPassivateBusy(c actor.Context, m *agent.PassivateBusy) {
	e := r.agents[m.AgentID]
	if e == nil || !e.passivating {
		return
	}
	e.passivating = false
	r.deps.Logger.Debug("registry: agent busy; not passivated", "agent_id", m.AgentID, "held", len(e.held))
	held := e.held
	e.held = nil
	for _, h := range held {
		r.deliver(c, e, h.msg, h.sender)
	}
	r.considerIdle(c, e)
}

// passivated finishes the passivation of e, whose actor stopped: the
// entry goes (the agent counts as stored again), and what was held for
// it goes to a new actor. A removal in progress finishes it instead.
func (r *Actor) passivated(c actor.Context, e *entry) {
	id := e.m.AgentID
	e.passivating = false
	if e.removing {
		e.gone = true
		return
	}
	r.forget(id)
	if e.epoch >= 0 {
		r.epochs[id] = e.epoch
	}
	r.deps.Metrics.AgentState(e.info.RuntimeState, "")
	r.deps.Metrics.AgentState("", protocol.RuntimeStopped)
	r.deps.Logger.Debug("registry: agent passivated", "agent_id", id, "held", len(e.held))
	if r.draining {
		for _, h := range e.held {
			r.undelivered(c, id, h.msg, h.sender, protocol.Errorf(protocol.CodeConflict, "daemon is shutting down"))
		}
		r.checkDrained()
		return
	}
	if len(e.held) == 0 {
		return
	}
	ne, err := r.served(c, id)
	if err == nil && ne == nil {
		err = protocol.Errorf(protocol.CodeNotFound, "no agent %s", id)
	}
	for _, h := range e.held {
		if err != nil {
			r.undelivered(c, id, h.msg, h.sender, err)
			continue
		}
		r.deliver(c, ne, h.msg, h.sender)
	}
}

// restingInfo is the projection of a stored agent without an actor: what
// a fresh actor for it reports (an agent actor starts idle and stopped,
// from its manifest with the configured defaults filled in).
func restingInfo(models agent.Models, node string, m store.Agent) protocol.AgentInfo {
	m = models.Fill(m)
	info := agent.InfoOf(m, protocol.StatusIdle, protocol.RuntimeStopped, m.Mode, agent.UsageOf(m))
	info.Node = node
	return info
}

// infoOf is agent id's projection: live, or from its manifest.
func (r *Actor) infoOf(id string) (info protocol.AgentInfo, found bool, err error) {
	if e := r.agents[id]; e != nil {
		return e.info, true, nil
	}
	if id == "" {
		return protocol.AgentInfo{}, false, nil
	}
	m, err := r.deps.Store.GetAgent(id)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.AgentInfo{}, false, nil
	}
	if err != nil {
		return protocol.AgentInfo{}, false, err
	}
	return restingInfo(r.deps.Agent.Models, r.deps.Agent.Node, m), true, nil
}

// agentStates answers AgentStates: the live projections from memory, the
// others from the store, read off the mailbox (a retention pass may ask
// about many).
func (r *Actor) agentStates(c actor.Context, m *AgentStates) {
	sender := c.Sender()
	if sender == nil {
		return
	}
	live := map[string]*entry{}
	for _, id := range m.AgentIDs {
		if e := r.agents[id]; e != nil {
			live[id] = e
		}
	}
	type liveState struct {
		info        protocol.AgentInfo
		attachments int
	}
	snap := make(map[string]liveState, len(live))
	for id, e := range live {
		snap[id] = liveState{e.info, e.attachments}
	}
	sys, st, models, node, ids := c.ActorSystem(), r.deps.Store, r.deps.Agent.Models, r.deps.Agent.Node, m.AgentIDs
	answer := func(read bool) {
		res := &AgentStatesResult{}
		for _, id := range ids {
			if s, ok := snap[id]; ok {
				res.Infos = append(res.Infos, s.info)
				if s.attachments > 0 {
					if res.Attachments == nil {
						res.Attachments = map[string]int{}
					}
					res.Attachments[id] = s.attachments
				}
				continue
			}
			if read {
				if m, err := st.GetAgent(id); err == nil {
					res.Infos = append(res.Infos, restingInfo(models, node, m))
					continue
				}
			}
			res.Unknown = append(res.Unknown, id)
		}
		sys.Root.Send(sender, res)
	}
	if len(snap) == len(ids) || !r.deps.Group.Go(func() { answer(true) }) {
		answer(false)
	}
}
