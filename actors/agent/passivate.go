package agent

import "github.com/asynkron/protoactor-go/actor"

// Passivation. The registry keeps an agent actor only while the agent is
// live; an idle one is stopped and served again from its manifest when it
// is next addressed. The agent says when it is idle (InfoChanged.Idle,
// sent whenever that changes) and the registry, after a grace period,
// asks it to stop with Passivate. The registry holds every message for the
// agent from then on; the agent checks once more, on its own mailbox, that
// nothing arrived meanwhile and stops itself, or answers PassivateBusy and
// the registry sends on what it held. Nothing but the registry addresses
// an idle agent (an attached connection or a delegation makes it busy), so
// no message can reach it once it decided to stop. A connection whose
// attach failed still sends to the agent directly until it detaches or
// stops (Actor.routed): the agent is busy until then.

// Passivate asks an idle agent to stop itself (see above).
type Passivate struct{}

// PassivateBusy answers Passivate: the agent is busy after all and stays.
type PassivateBusy struct{ AgentID string }

// saveDone tells the agent one of its selection or usage saves returned.
type saveDone struct{}

// IgnoreDeadLetterLogging keeps a save that outlived its agent (a daemon
// shutdown) out of the dead-letter log.
func (saveDone) IgnoreDeadLetterLogging() {}

func (Passivate) agentMessage()     {}
func (PassivateBusy) agentMessage() {}
func (saveDone) agentMessage()      {}

// idle reports whether nothing of the agent is in flight, so that its
// actor may stop and be served again from the manifest alone: no runtime
// (stopped or failed, and not stopping), no client attached or attaching
// or routing to it directly,
// no command, request, lease, report, kill, title or save pending, no
// drain. The manifest has everything the actor would be rebuilt with then:
// its selection, usage and title are saved before the agent is idle
// (saves counts those in flight).
func (a *Actor) idle() bool {
	return a.rt == nil && !a.stopping && a.esc == nil && len(a.attached) == 0 && len(a.routed) == 0 &&
		len(a.pendingAttach) == 0 && len(a.startWaiters) == 0 && len(a.queued) == 0 &&
		len(a.inflight) == 0 && len(a.open) == 0 && len(a.foreign) == 0 && len(a.delegated) == 0 &&
		a.lease == nil && len(a.injects) == 0 && len(a.killWaiters) == 0 && len(a.titles) == 0 &&
		a.saves == 0 && !a.draining
}

// reportIdle tells the registry when idle changed since it last heard
// (notifyInfo carries it); it runs after every message.
func (a *Actor) reportIdle(c actor.Context) {
	if _, stopped := c.Message().(*actor.Stopped); stopped {
		return
	}
	if a.idle() != a.reportedIdle {
		a.notifyInfo(c)
	}
}

// onPassivate stops the actor if it is still idle, or says it is busy.
func (a *Actor) onPassivate(c actor.Context) {
	if a.idle() {
		a.log.Debug("agent passivated")
		c.Stop(c.Self())
		return
	}
	c.Send(c.Parent(), &PassivateBusy{AgentID: a.m.AgentID})
}

// goSave runs save off the mailbox, counted in saves until it returned.
func (a *Actor) goSave(save func()) bool {
	sys, self := a.sys, a.self
	if !a.deps.Goroutines.Go(func() {
		save()
		sys.Root.Send(self, &saveDone{})
	}) {
		return false
	}
	a.saves++
	return true
}
