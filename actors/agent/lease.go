package agent

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
)

// lease is the agent's side of a subagent run.
type lease struct {
	runID  string
	task   string
	holder *actor.PID

	prompted  bool   // the task prompt was sent
	started   bool   // the runtime accepted it
	turnID    string // the turn the task started
	finalText string
	usage     protocol.RunUsage
	cancelled bool
	stopping  bool
}

func (a *Actor) onLeaseStart(c actor.Context, m *LeaseStart) {
	if a.lease != nil {
		c.Send(m.Holder, &LeaseEnded{RunID: m.RunID, AgentID: a.m.AgentID, Error: "agent is already running run " + a.lease.runID})
		return
	}
	a.lease = &lease{runID: m.RunID, task: m.Task, holder: m.Holder}
	a.pumpLease(c)
}

// pumpLease sends the task once the runtime is ready and idle.
func (a *Actor) pumpLease(c actor.Context) {
	l := a.lease
	if l == nil || l.prompted {
		return
	}
	if !a.ready || a.stopping {
		a.ensureRuntime(c)
		return
	}
	if a.status.Active() {
		return // a client's turn is finishing; the lease waits for idle
	}
	l.prompted = true
	// follow_up: should a client's prompt have reached the runtime first,
	// the task waits for that turn instead of being refused (an idle
	// runtime starts it at once).
	a.toRuntime(&inflight{command: protocol.TypePrompt, lease: true}, protocol.MustMarshal(protocol.Prompt{
		Header: protocol.Header{Type: protocol.TypePrompt}, Message: l.task,
		StreamingBehavior: protocol.BehaviorFollowUp,
	}))
}

func (a *Actor) onLeaseResponse(c actor.Context, resp *protocol.Response) {
	l := a.lease
	if l == nil {
		return
	}
	if !resp.Success {
		msg := "child refused the task"
		if resp.Error != nil {
			msg = resp.Error.Message
		}
		a.endLease(LeaseEnded{Error: msg})
		return
	}
	l.started = true
	c.Send(l.holder, &LeaseStarted{RunID: l.runID, AgentID: a.m.AgentID})
}

// leaseObserve follows the leased turn in the runtime's output.
func (a *Actor) leaseObserve(c actor.Context, typ string, line []byte) {
	l := a.lease
	if l == nil || !l.started {
		return
	}
	switch typ {
	case protocol.TypeTurnStart:
		if l.turnID == "" {
			var ev protocol.TurnStart
			if json.Unmarshal(line, &ev) == nil {
				l.turnID = ev.TurnID
			}
		}
	case protocol.TypeMessageComplete:
		var ev protocol.MessageComplete
		if json.Unmarshal(line, &ev) == nil && ev.Message.Role == "assistant" {
			var b strings.Builder
			for _, blk := range ev.Message.Content {
				if blk.Type == protocol.BlockText {
					b.WriteString(blk.Text)
				}
			}
			if b.Len() > 0 {
				l.finalText = b.String()
			}
		}
	case protocol.TypeTurnEnd:
		var ev protocol.TurnEnd
		if l.turnID == "" || json.Unmarshal(line, &ev) != nil || ev.TurnID != l.turnID {
			return // not the task's turn
		}
		if ev.Usage != nil {
			l.usage = protocol.RunUsage{Input: ev.Usage.Input, Output: ev.Usage.Output}
		}
		end := LeaseEnded{Completed: !l.cancelled, Cancelled: l.cancelled, FinalText: l.finalText, Usage: l.usage}
		if l.cancelled {
			end.StopStage = supervisor.ActAbort.String()
			end.Error = "cancelled"
		}
		if a.lastError != "" && !l.cancelled {
			// The turn failed (a provider error): the run failed.
			end.Completed = false
			end.Error = a.lastError
		}
		leaseStop := l.stopping
		a.endLease(end)
		// A lease's abort-stage stop is complete once the turn ended: the
		// durable child stays, idle, for a relaunch. (A kill, terminate or
		// shutdown in progress carries on.)
		if leaseStop && a.esc != nil && a.esc.Stage() == supervisor.ActAbort &&
			len(a.killWaiters) == 0 && !a.draining && !a.terminateWhenIdle {
			a.esc, a.stopping = nil, false
			a.rstate = protocol.RuntimeRunning
			a.broadcastStatus(c)
		}
	case protocol.TypeError:
		var ev protocol.ErrorEvent
		// A crashed tool (TOOL_ERROR) does not end the turn: the model
		// sees the error result and goes on, so it does not fail the run.
		if json.Unmarshal(line, &ev) == nil && ev.Code != protocol.CodeToolError {
			a.lastError = string(ev.Code) + ": " + ev.Message
		}
	}
}

func (a *Actor) onLeaseStop(c actor.Context, m *LeaseStop) {
	l := a.lease
	if l == nil || l.runID != m.RunID {
		return
	}
	l.cancelled = true
	if !l.prompted {
		a.endLease(LeaseEnded{Cancelled: true, Error: "cancelled before start"})
		return
	}
	l.stopping = true
	mode := supervisor.StopEscalate
	if m.Force {
		mode = supervisor.StopForce
	}
	a.stopRuntime(c, mode)
}

// leaseRuntimeGone ends a lease whose runtime exited or never started.
// stopStage is the escalation stage that ended it, "" when none ran.
func (a *Actor) leaseRuntimeGone(reason, exitStatus, stopStage string) {
	l := a.lease
	if l == nil {
		return
	}
	end := LeaseEnded{Cancelled: l.cancelled, Error: reason, ExitStatus: exitStatus, FinalText: l.finalText, Usage: l.usage,
		StopStage: stopStage}
	a.endLease(end)
}

func (a *Actor) endLease(end LeaseEnded) {
	l := a.lease
	a.lease = nil
	a.lastError = ""
	end.RunID, end.AgentID = l.runID, a.m.AgentID
	a.sys.Root.Send(l.holder, &end)
}

// leaseGuard refuses client commands that would interfere with a leased
// run. It reports whether the request was refused.
func (a *Actor) leaseGuard(r *Request) bool {
	if a.lease == nil {
		return false
	}
	switch r.Header.Type {
	case protocol.TypePrompt:
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type,
			protocol.Errorf(protocol.CodeConflict, "agent %s is running subagent run %s; a direct prompt is refused while it holds the agent", a.m.AgentID, a.lease.runID)))
		return true
	case protocol.TypeSteer:
		// A human steer takes the strict path: into the run's active turn
		// or CONFLICT, never a new turn of its own; its outcome is
		// recorded against the run.
		a.humanSteer(r)
		return true
	case protocol.TypeAbort:
		a.lease.cancelled = true // recorded against the run: it ends cancelled
	}
	return false
}

// onInject delivers a report: steer into an active turn, prompt otherwise.
func (a *Actor) onInject(c actor.Context, m *Inject) {
	a.injects = append(a.injects, pendingInject{key: m.Key, text: m.Text, from: c.Sender()})
	a.pumpInjects(c)
}

type pendingInject struct {
	key, text string
	from      *actor.PID
}

func (a *Actor) pumpInjects(c actor.Context) {
	if len(a.injects) == 0 {
		return
	}
	if !a.ready || a.stopping {
		a.ensureRuntime(c)
		return
	}
	for _, p := range a.injects {
		// Steer into an active turn; otherwise a prompt. follow_up rather
		// than no behaviour: the status seen here may lag the runtime (a
		// report sent just before this one may have started a turn), and an
		// idle runtime starts a follow_up at once.
		msg := protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt}, Message: p.text,
			StreamingBehavior: protocol.BehaviorFollowUp, DedupeKey: "report:" + p.key}
		if a.status.Active() {
			msg.StreamingBehavior = protocol.BehaviorSteer
		}
		a.toRuntime(&inflight{command: protocol.TypePrompt, injectKey: p.key, injectTo: p.from}, protocol.MustMarshal(msg))
	}
	a.injects = nil
}

// steerNote is a strict steer of the leased run in flight to the runtime:
// its outcome goes to the run's holder (LeaseSteered), which records it.
type steerNote struct {
	runID, correlationID, source string
	holder                       *actor.PID
}

// steerable reports whether the leased run's turn can take a strict steer
// now: the runtime accepted the task and runs, and no stop is under way.
func (a *Actor) steerable(runID string) bool {
	l := a.lease
	return l != nil && l.runID == runID && l.started && a.ready && !a.stopping && !l.stopping
}

func (a *Actor) onLeaseSteer(m *LeaseSteer) {
	note := &steerNote{runID: m.RunID, correlationID: m.CorrelationID, source: protocol.SteerSourceParent}
	if a.lease != nil {
		note.holder = a.lease.holder
	}
	if !a.steerable(m.RunID) {
		a.answerSteer(&inflight{steer: m, note: note}, nil)
		return
	}
	a.log.Info("parent steer sent into a leased run", "run_id", m.RunID)
	a.toRuntime(&inflight{command: protocol.TypeSteer, steer: m, note: note}, protocol.MustMarshal(protocol.Steer{
		Header: protocol.Header{Type: protocol.TypeSteer}, Message: m.Message, Strict: true,
	}))
}

// humanSteer sends a client's steer of the leased child down the strict
// path (docs/protocol.md §10.3 lease guard): the runtime answers only once
// the message is in a provider request of the run's turn, or CONFLICT when
// the turn ends (or is aborted) first; the client gets that answer, and the
// run's holder records it.
func (a *Actor) humanSteer(r *Request) {
	l := a.lease
	note := &steerNote{runID: l.runID, correlationID: ids.New("steer"), source: protocol.SteerSourceClient, holder: l.holder}
	f := &inflight{client: r.Client, clientID: r.Header.ID, command: r.Header.Type, note: note}
	if !a.steerable(l.runID) {
		a.answerSteer(f, nil)
		return
	}
	raw, err := protocol.SetMember(r.Raw, "strict", []byte("true"))
	if err == nil {
		raw, err = protocol.DeleteMember(raw, "agent_id")
	}
	if err != nil {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type, protocol.Errorf(protocol.CodeInvalidRequest, "%w", err)))
		return
	}
	a.log.Info("client steer sent into a leased run", "run_id", l.runID)
	a.toRuntime(f, raw)
}

// answerSteer answers a strict steer from the runtime's response (nil when
// it never reached a turn: no turn, or the runtime exited): the parent's
// subagent.steer gets SubagentSteerData, a client's steer the runtime's
// answer (CONFLICT when there is none). The run's holder records the
// outcome first (LeaseSteered): the answer goes out once the record is
// committed, so a client that reads the run after its answer sees the steer
// (persist before acknowledging). Waiting for the record happens off the
// mailbox, in a goroutine of Goroutines; a holder that is gone (its job
// ended) or slow does not hold the answer past steerRecordWait.
func (a *Actor) answerSteer(f *inflight, resp *protocol.Response) {
	status, turnID := protocol.SteerConflict, ""
	var data protocol.SteerData
	if resp != nil && resp.Success && json.Unmarshal(resp.Data, &data) == nil {
		status, turnID = protocol.SteerInjected, data.TurnID
	}
	var send func()
	if m := f.steer; m != nil && m.ReplyTo != nil {
		ans, to := &SteerAnswer{CorrelationID: m.CorrelationID, Status: status, TurnID: turnID}, m.ReplyTo
		send = func() { a.sys.Root.Send(to, ans) }
	} else if m != nil {
		rec := protocol.NewResponse(m.Header.ID, m.Header.Type, protocol.SubagentSteerData{
			Status: status, RunID: m.RunID, TurnID: turnID, CorrelationID: m.CorrelationID})
		send = func() { m.Client.Send(rec) }
	} else if f.client != nil {
		// Like every answer relayed from the runtime, it carries the
		// routing agent_id.
		var rec []byte
		switch {
		case resp != nil && resp.Success:
			rec = protocol.NewResponse(f.clientID, f.command, data)
		case resp != nil && resp.Error != nil:
			rec = protocol.NewErrorResponse(f.clientID, f.command, resp.Error)
		default:
			rec = protocol.NewErrorResponse(f.clientID, f.command,
				protocol.Errorf(protocol.CodeConflict, "agent %s has no turn of run %s in flight to steer", a.m.AgentID, f.note.runID))
		}
		client, rec := f.client, protocol.WithAgentID(rec, a.m.AgentID)
		send = func() { client.Send(rec) }
	}
	if send == nil {
		send = func() {}
	}
	n := f.note
	if n == nil || n.holder == nil {
		send()
		return
	}
	fut := a.sys.Root.RequestFuture(n.holder, &LeaseSteered{RunID: n.runID, AgentID: a.m.AgentID, Steer: protocol.RunSteer{
		CorrelationID: n.correlationID, Source: n.source, Status: status, TurnID: turnID}}, steerRecordWait)
	if !a.deps.Goroutines.Go(func() {
		_, _ = fut.Result() // recorded, the holder gone (dead letter) or timed out: answer either way
		send()
	}) {
		send() // the daemon is stopping: answer without waiting
	}
}

// steerRecordWait bounds how long a steer's answer waits for the run's
// holder to commit its record (one store write).
const steerRecordWait = 10 * time.Second
