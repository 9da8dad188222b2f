package agent

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/telemetry"
)

// ensureRuntime starts a new Runtime generation unless one exists (startup
// is coalesced: every waiter joins the generation being started).
func (a *Actor) ensureRuntime(c actor.Context) {
	if a.rt != nil {
		return
	}
	if a.draining {
		a.failWaiters(protocol.Errorf(protocol.CodeRuntimeStartFailed, "daemon is shutting down"))
		return
	}
	a.generation = generation{epoch: a.epoch + 1} // a.rt is nil: none runs
	a.startFailed, a.stopping, a.esc, a.terminateWhenIdle = "", false, nil, false
	rc := a.deps.Runtime
	prof, ok := rc.command(a.m.Runtime)
	if !ok {
		// The profile was removed from the config since creation: the
		// identity stays; restoring the profile makes a retry work.
		a.rt = nil
		a.rstate = protocol.RuntimeFailed
		a.broadcastStatus(c)
		a.failWaiters(protocol.Errorf(protocol.CodeRuntimeStartFailed, "runtime profile %q is not configured", a.m.Runtime))
		return
	}
	if err := a.deps.Models.Check(a.m); err != nil {
		// The provider or model was removed from the config since: the
		// runtime would run another one than AgentInfo says. Restoring it
		// makes a retry work.
		a.rt = nil
		a.rstate = protocol.RuntimeFailed
		a.broadcastStatus(c)
		a.failWaiters(protocol.Errorf(protocol.CodeRuntimeStartFailed, "%w", err))
		return
	}
	// SHARD_RUNTIME_ID names this generation's process tree for the sweep
	// after its exit (Sweep): a sweep by agent ID alone would also kill
	// the runtime a respawned actor of the same agent starts meanwhile.
	sessionDir, ok := a.m.SessionPath(rc.SessionsDir)
	if !ok {
		// A manifest whose session directory would leave sessions/: never
		// handed to a runtime.
		a.rt = nil
		a.rstate = protocol.RuntimeFailed
		a.broadcastStatus(c)
		a.failWaiters(protocol.Errorf(protocol.CodeSessionCorrupt, "agent %s has no valid session directory", a.m.AgentID))
		return
	}
	runtimeID := ids.New("rt")
	env := append(append(append([]string(nil), rc.Env...), prof.Env...),
		"SHARD_AGENT_ID="+a.m.AgentID,
		"SHARD_RUNTIME_ID="+runtimeID,
		"SHARD_SESSION_ID="+a.m.SessionID,
		"SHARD_AGENT_MODE="+a.m.Mode,
		"SHARD_AGENT_PROVIDER="+a.m.Provider,
		"SHARD_AGENT_MODEL="+a.m.Model,
		"SHARD_AGENT_HEADLESS_POLICY="+cmp.Or(a.m.HeadlessPolicy, rc.HeadlessPolicy),
		"SHARD_SESSION_DIR="+sessionDir,
	)
	// The tools, skills and delegated prompt of the manifest
	// (docs/protocol.md §10.1); unset means every tool, no skill, no
	// delegated prompt.
	if len(a.m.Tools) > 0 {
		env = append(env, "SHARD_AGENT_TOOLS="+strings.Join(a.m.Tools, ","))
	}
	if len(a.m.Skills) > 0 {
		env = append(env, "SHARD_AGENT_SKILLS="+strings.Join(a.m.Skills, ","))
	}
	// The MCP servers: the agent's own over its profile's, by name
	// (docs/protocol.md §10.1), for a runtime that takes them only (a
	// child on a pi profile that inherited some does not pass their
	// secrets on to an agent that cannot use them). Never logged: env and
	// headers may hold secrets.
	if servers := mergeMCP(prof.MCPServers, a.m.MCPServers); prof.MCP && len(servers) > 0 {
		env = append(env, "SHARD_MCP_SERVERS="+string(protocol.MustMarshal(servers)))
	}
	if a.m.SystemPrompt != "" {
		env = append(env, "SHARD_AGENT_SYSTEM_PROMPT="+a.m.SystemPrompt)
	}
	spec := proc.Spec{
		Epoch:       a.epoch,
		Path:        prof.Path,
		Args:        prof.Args,
		Dir:         a.m.Cwd,
		Env:         env,
		StderrPath:  filepath.Join(rc.LogDir, "agents", a.m.AgentID+".log"),
		LogMaxBytes: rc.LogMaxBytes,
		LogBackups:  rc.LogBackups,
		Sweep:       []string{"SHARD_AGENT_ID=" + a.m.AgentID, "SHARD_RUNTIME_ID=" + runtimeID},
		Sweeper:     rc.Sweeper,
		Forks:       rc.Forks,
		Logs:        rc.Logs,
	}
	spec.Nice, spec.Idle = rc.priorityFor(a.m)
	if rc.Track != nil {
		spec.Track = rc.Track(a.m.AgentID)
	}
	if fi, err := os.Stat(a.m.Cwd); err != nil || !fi.IsDir() {
		// The cwd vanished since creation: the identity stays, retry is safe.
		a.rt = nil
		a.rstate = protocol.RuntimeFailed
		a.broadcastStatus(c)
		a.failWaiters(protocol.Errorf(protocol.CodeRuntimeStartFailed, "agent cwd is not a directory"))
		return
	}
	pid, err := c.SpawnNamed(proc.Props(spec, a.self, a.log, a.deps.Goroutines).Configure(actor.WithDispatcher(a.deps.Dispatcher)), "runtime-"+strconv.FormatInt(a.epoch, 10))
	if err != nil {
		a.failWaiters(protocol.Errorf(protocol.CodeRuntimeStartFailed, "spawn runtime actor: %w", err))
		return
	}
	a.rt = pid
	a.deps.Metrics.RuntimeStarted()
	a.rstate = protocol.RuntimeStarting
	a.broadcastStatus(c)
	epoch := a.epoch
	a.after(timerStart, rc.StartTimeout, &startTimeout{epoch: epoch})
}

// onStarved ends a start that passed its readiness bound. A runtime that
// spent that time waiting for a CPU (a SCHED_IDLE subagent runtime while
// other work keeps every core busy) is slow, not broken: it gets another
// bound, as many as it stays starved, and the run's own deadline still
// bounds it. Any other runtime is killed as not ready.
func (a *Actor) onStarved(c actor.Context, m *proc.Starved) {
	if m.Epoch != a.epoch || a.rt == nil || a.ready {
		return
	}
	rc := &a.deps.Runtime
	if m.Starved && !a.stopping {
		a.log.Info("runtime not ready yet: it was waiting for a CPU; its readiness bound starts again",
			"epoch", m.Epoch, "cpu_wait", m.Waited.Round(time.Millisecond), "over", m.Over.Round(time.Millisecond))
		a.after(timerStart, rc.StartTimeout, &startTimeout{epoch: m.Epoch})
		return
	}
	a.startFailed = fmt.Sprintf("runtime not ready within %s", rc.StartTimeout)
	a.stopRuntime(c, supervisor.StopForce)
}

// stopRuntime begins (or continues) stopping the current generation.
func (a *Actor) stopRuntime(c actor.Context, mode supervisor.StopMode) {
	if a.rt == nil {
		return
	}
	if !a.stopping {
		a.stopping = true
		a.rstate = protocol.RuntimeStopping
		a.broadcastStatus(c)
	}
	if a.esc == nil {
		a.esc = supervisor.NewEscalation(a.deps.Runtime.AbortGrace, a.deps.Runtime.TermGrace)
	}
	act, wait := a.esc.Start(mode)
	a.perform(c, act, wait)
	// A leased task counts as active from the moment it was sent: the
	// runtime's status event may still be on its way.
	busy := a.status.Active() || (a.lease != nil && a.lease.prompted)
	if a.esc.Stage() == supervisor.ActAbort && (!a.ready || !busy) {
		act, wait := a.esc.Idle()
		a.perform(c, act, wait) // nothing to abort: straight to the graceful stage
	}
}

func (a *Actor) perform(c actor.Context, act supervisor.Action, wait time.Duration) {
	switch act {
	case supervisor.ActNone:
		return
	case supervisor.ActAbort:
		a.internal(protocol.TypeAbort, map[string]any{})
	case supervisor.ActTerm:
		c.Send(a.rt, &proc.Term{})
	case supervisor.ActKill:
		c.Send(a.rt, &proc.Kill{})
	}
	a.log.Debug("runtime stop stage", "stage", act.String(), "epoch", a.epoch)
	if l := a.lease; l != nil && l.prompted {
		// The holder records the stage while the escalation runs, so an
		// operator sees a stopping run (and a stuck one) before it ends.
		a.sys.Root.Send(l.holder, &LeaseStopping{RunID: l.runID, AgentID: a.m.AgentID, Stage: act.String()})
	}
	if wait > 0 {
		a.escGen++
		a.after(timerEsc, wait, &escTimer{epoch: a.epoch, gen: a.escGen})
	}
}

func (a *Actor) onExited(c actor.Context, m *proc.Exited) {
	wasReady, requested := a.ready, a.stopping && a.startFailed == ""
	// Read before the generation's state is cleared below: the lease's end
	// reports the stage that actually ended the process (kill, not abort).
	stopStage := ""
	if a.esc != nil {
		stopStage = a.esc.Stage().String()
	}
	c.Stop(a.rt)
	a.rt, a.ready, a.stopping, a.esc = nil, false, false, nil
	a.terminateWhenIdle = false

	exitErr := protocol.Errorf(protocol.CodeInternal, "runtime exited (%s)", m.Reason)
	for id, f := range a.inflight {
		delete(a.inflight, id)
		if f.command == protocol.TypeGetSync {
			for _, cid := range f.attach {
				if att := a.attached[cid]; att != nil && !att.live {
					// Retried on the next generation below.
					a.pendingAttach = append(a.pendingAttach, cid)
				}
			}
			continue
		}
		if f.note != nil {
			a.answerSteer(f, nil) // the turn is gone: conflict
			continue
		}
		if f.injectTo != nil {
			// Not accepted: the sender keeps the report and retries.
			c.Send(f.injectTo, &Injected{Key: f.injectKey, Err: exitErr})
			continue
		}
		if f.client != nil {
			f.client.Send(protocol.NewErrorResponse(f.clientID, f.command, exitErr))
		}
	}
	if a.lease != nil && (a.lease.prompted || (!wasReady && !requested)) {
		reason := "runtime exited (" + m.Reason + ")"
		if a.lease.cancelled {
			reason = "cancelled"
		} else if !wasReady {
			reason = "runtime failed to start: " + m.Reason
		}
		a.leaseRuntimeGone(reason, m.Reason, stopStage)
	}
	// Requests of the dead process can no longer be answered: close them
	// for every client so no dialog stays open.
	for reqID, o := range a.open {
		delete(a.open, reqID)
		var rec []byte
		if o.kind == protocol.TypePermissionRequest {
			rec = protocol.MustMarshal(protocol.PermissionResolved{Header: protocol.Header{Type: protocol.TypePermissionResolved},
				RequestID: reqID, Decision: protocol.DecisionDeny, Source: "runtime_exit"})
		} else {
			rec = protocol.MustMarshal(protocol.UIResolved{Header: protocol.Header{Type: protocol.TypeUIResolved},
				RequestID: reqID, Value: []byte("null"), Source: "runtime_exit"})
		}
		a.fanout(rec)
		a.resolvedFor(c, reqID, rec)
	}
	for reqID := range a.delegated { // answered but not yet resolved
		a.resolvedFor(c, reqID, protocol.MustMarshal(protocol.PermissionResolved{Header: protocol.Header{Type: protocol.TypePermissionResolved},
			RequestID: reqID, Decision: protocol.DecisionDeny, Source: "runtime_exit"}))
	}

	var startErr *protocol.Error
	switch {
	case !wasReady && !requested:
		reason := m.Reason
		if a.startFailed != "" {
			reason = a.startFailed
		}
		a.rstate, a.status = protocol.RuntimeFailed, protocol.StatusError
		startErr = protocol.Errorf(protocol.CodeRuntimeStartFailed, "runtime failed to start: %s", reason)
		if se := a.startError; se != nil && a.startFailed == "" {
			// The runtime said why. A session it cannot restore is
			// SESSION_CORRUPT, which retrying does not cure; any other
			// reason stays RUNTIME_START_FAILED, now with the runtime's
			// words instead of the exit status.
			reason = se.Message
			startErr = protocol.Errorf(protocol.CodeRuntimeStartFailed, "runtime failed to start: %s", reason)
			if se.Code == protocol.CodeSessionCorrupt {
				startErr = se
			}
		}
		a.broadcastExit(m, reason)
		a.deps.Metrics.RuntimeExited(telemetry.ExitStartFailed)
	case requested:
		a.rstate, a.status = protocol.RuntimeStopped, protocol.StatusIdle
		a.deps.Metrics.RuntimeExited(telemetry.ExitRequested)
	default:
		a.deps.Metrics.RuntimeExited(telemetry.ExitCrash)
		a.rstate, a.status = protocol.RuntimeFailed, protocol.StatusError
		a.broadcastExit(m, m.Reason)
		a.fanout(protocol.MustMarshal(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError},
			Code: protocol.CodeInternal, Message: "runtime exited unexpectedly (" + m.Reason + ")"}))
	}
	a.startFailed = ""
	// The registry's projection is updated before anyone is answered, so a
	// client that reacts to the answer with agent.list sees the new state.
	a.broadcastStatus(c)
	a.setActivity(phaseOf(a.status), "")
	if startErr != nil {
		a.failWaiters(startErr)
	}
	for _, w := range a.killWaiters {
		w.client.Send(protocol.NewResponse(w.header.ID, w.header.Type, nil))
	}
	a.killWaiters = nil

	if a.draining {
		a.failWaiters(protocol.Errorf(protocol.CodeRuntimeStartFailed, "daemon is shutting down"))
		c.Send(c.Parent(), &Drained{AgentID: a.m.AgentID})
		return
	}
	// Work that arrived while the old generation was stopping restores a
	// new one.
	if len(a.queued) > 0 || len(a.pendingAttach) > 0 || len(a.startWaiters) > 0 || a.lease != nil || len(a.injects) > 0 {
		a.ensureRuntime(c)
	}
}

func (a *Actor) broadcastExit(m *proc.Exited, reason string) {
	ev := protocol.AgentExited{
		Header:       protocol.Header{Type: protocol.TypeAgentExited, AgentID: a.m.AgentID},
		RuntimeState: protocol.RuntimeFailed,
		Reason:       reason,
	}
	if m.ExitCode >= 0 && m.Started {
		code := m.ExitCode
		ev.ExitCode = &code
	}
	a.deps.Hub.Broadcast(protocol.MustMarshal(ev))
	a.log.Warn("runtime exited", "epoch", m.Epoch, "reason", reason)
}

// failWaiters answers everyone waiting for a runtime with err.
func (a *Actor) failWaiters(err *protocol.Error) {
	for _, w := range a.startWaiters {
		w.client.Send(protocol.NewErrorResponse(w.header.ID, w.header.Type, err))
	}
	a.startWaiters = nil
	for _, id := range a.pendingAttach {
		if att := a.attached[id]; att != nil && !att.live {
			att.client.Send(protocol.NewErrorResponse(att.attachID, protocol.TypeAgentAttach, err))
			// The identity is kept; the connection may simply attach again.
			delete(a.attached, id)
		}
	}
	a.pendingAttach = nil
	for _, r := range a.queued {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type, err))
	}
	a.queued = nil
	if a.lease != nil && !a.lease.prompted {
		a.endLease(LeaseEnded{Error: err.Message})
	}
	for _, p := range a.injects {
		if p.from != nil {
			a.sys.Root.Send(p.from, &Injected{Key: p.key, Err: err})
		}
	}
	a.injects = nil
}

func (a *Actor) failAll(err *protocol.Error) {
	a.failWaiters(err)
	for id, f := range a.inflight {
		delete(a.inflight, id)
		if f.client != nil {
			f.client.Send(protocol.NewErrorResponse(f.clientID, f.command, err))
		}
	}
}

func (a *Actor) onShutdown(c actor.Context, m *Shutdown) {
	a.draining = true
	if a.rt == nil {
		c.Send(c.Parent(), &Drained{AgentID: a.m.AgentID})
		return
	}
	switch {
	case m.Force:
		a.stopRuntime(c, supervisor.StopForce)
	case a.stopping:
	case !a.ready || a.status.Active():
		a.terminateWhenIdle = true // active turns finish first
	default:
		a.stopRuntime(c, supervisor.StopGraceful)
	}
}

// ---- idle reaping ----

func (a *Actor) armIdle() {
	if a.deps.Runtime.IdleTimeout <= 0 {
		return
	}
	a.idleGen++
	a.after(timerIdle, a.deps.Runtime.IdleTimeout, &idleTick{epoch: a.epoch, gen: a.idleGen})
}

// maybeIdle re-arms the reaper after a command completes while idle.
func (a *Actor) maybeIdle() {
	if a.ready && !a.status.Active() && len(a.inflight) == 0 {
		a.idleSince = a.deps.Clock.Now()
		a.armIdle()
	}
}

func (a *Actor) onIdleTick(c actor.Context, m *idleTick) {
	if m.epoch != a.epoch || m.gen != a.idleGen || !a.ready || a.stopping {
		return
	}
	if supervisor.Reapable(a.status, len(a.inflight), a.idleSince, a.deps.Clock.Now(), a.deps.Runtime.IdleTimeout) {
		a.log.Info("reaping idle runtime", "epoch", a.epoch)
		a.deps.Metrics.RuntimeReaped()
		a.stopRuntime(c, supervisor.StopGraceful)
	}
}

// timerKind names the actor's timers: one of each kind is pending at most.
type timerKind int

const (
	timerStart timerKind = iota // readiness bound of a starting generation
	timerIdle                   // idle reaping
	timerEsc                    // the current escalation stage's grace
	numTimers
)

// after delivers msg to the actor itself once d has passed, replacing the
// pending timer of the same kind (its message would be stale anyway: each
// carries the epoch and generation it was armed for).
func (a *Actor) after(kind timerKind, d time.Duration, msg Message) {
	if t := a.timers[kind]; t != nil {
		t.Stop()
		a.timers[kind] = nil
	}
	if d <= 0 {
		return
	}
	sys, self := a.sys, a.self
	a.timers[kind] = a.deps.Clock.AfterFunc(d, func() { sys.Root.Send(self, msg) })
}

// stopTimers stops every pending timer (the actor is stopping: nothing may
// be sent to it late).
func (a *Actor) stopTimers() {
	for i, t := range a.timers {
		if t != nil {
			t.Stop()
			a.timers[i] = nil
		}
	}
}

// mergeMCP is base with over's servers replacing those of the same name.
func mergeMCP(base, over map[string]protocol.MCPServer) map[string]protocol.MCPServer {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]protocol.MCPServer{}
	}
	maps.Copy(out, over)
	return out
}
