package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/metrics"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
)

// RuntimeConfig says how runtimes are started and stopped.
type RuntimeConfig struct {
	// Path and Args are the runtime command ("shardd agent --headless").
	Path string
	Args []string
	// Env is the base environment of every runtime; the agent adds
	// SHARD_AGENT_ID, SHARD_SESSION_ID, SHARD_AGENT_MODE and SHARD_AGENT_MODEL.
	Env []string
	// SessionsDir holds sessions/<session_id>; LogDir holds agents/<id>.log.
	SessionsDir, LogDir string

	StartTimeout time.Duration // readiness bound (runtime.start_timeout)
	IdleTimeout  time.Duration // reaping after inactivity (runtime.idle_timeout)
	AbortGrace   time.Duration // kill.abort_grace
	TermGrace    time.Duration // kill.term_grace
	// HeadlessPolicy is the default for agents whose manifest names none.
	HeadlessPolicy string
	// Track, when set, returns the tracker recording an agent's runtime
	// processes (see proc.Tracker).
	Track func(agentID string) proc.Tracker
}

// Deps are the agent actor's collaborators.
type Deps struct {
	Runtime RuntimeConfig
	Hub     *outbox.Hub
	Logger  *slog.Logger
	// Clock tells the time and runs the actor's timers (start timeout,
	// idle reaping, escalation stages); nil is the wall clock. Tests pass a
	// clock.Manual and fire timers instead of sleeping.
	Clock clock.Clock
	// Metrics records runtime starts/exits/reaps, attachments and relayed
	// events; nil records nothing.
	Metrics *metrics.Metrics
	// SaveSelection persists an agent's model and mode when its runtime
	// changes them, so a restored runtime starts where the last one was. It
	// runs off the mailbox; nil saves nothing.
	SaveSelection func(agentID, model, mode string)
}

type attachment struct {
	client   *Client
	role     string
	live     bool   // false while reserved: waiting for its sync
	attachID string // the agent.attach id, answered when the sync is sent
	held     bool   // in Actor.held: records held for the current batch
}

// inflight is a command forwarded to the runtime under a daemon id.
type inflight struct {
	client   *Client // nil for the daemon's own commands
	clientID string
	command  string
	attach   []uint64 // get_sync: clients waiting for their sync
	lease    bool     // the task prompt of a subagent run
	// injectKey/injectTo: a completion report; the sender hears Injected.
	injectKey string
	injectTo  *actor.PID
	steer     *LeaseSteer // a subagent.steer into a leased run
}

// openRequest is a permission/UI request no response has won yet.
type openRequest struct {
	kind    string // permission_request | ui_request
	options map[string]bool
	choices map[string]bool
	// delegating: sent up the hierarchy, no answer yet; delegate: the
	// ancestor actor whose interactive clients may answer it.
	delegating bool
	delegate   *actor.PID
}

type waiter struct {
	client *Client
	header protocol.Header
}

// Actor is the agent actor. Create it with Props.
type Actor struct {
	deps Deps
	m    store.Agent

	sys  *actor.ActorSystem
	self *actor.PID
	log  *slog.Logger

	status   protocol.AgentStatus
	rstate   protocol.RuntimeState
	mode     string
	usage    protocol.Usage
	phase    string
	phaseArg string

	epoch    int64
	rt       *actor.PID
	ready    bool
	gotHello bool
	caps     []string
	// badRecords counts this generation's invalid output records.
	badRecords int

	attached      map[uint64]*attachment
	nAttached     int // len(attached) as last reported to metrics
	pendingAttach []uint64
	startWaiters  []waiter
	queued        []*Request
	inflight      map[string]*inflight
	seq           int
	open          map[string]*openRequest

	esc               *supervisor.Escalation
	escGen            int
	stopping          bool
	startFailed       string
	terminateWhenIdle bool
	killWaiters       []waiter
	idleGen           int
	idleSince         time.Time
	draining          bool

	// timers are the pending timer of each kind; arming one replaces the
	// previous one of its kind, and all are stopped when the actor stops.
	timers [numTimers]clock.Timer

	lease     *lease
	lastError string
	injects   []pendingInject
	// idField is the encoded agent_id member spliced into every relayed
	// event (encoded once).
	idField []byte
	// rest is the runtime output batch being handled, from the current
	// record on, and splice the buffer its relayed records share (see
	// spliced); both nil between batches.
	rest   [][]byte
	splice []byte
	// held lists the attachments fanout held records for in this batch.
	held []*attachment
	// foreign holds descendants' requests surfaced through this agent.
	foreign map[string]*foreignRequest
	// delegated maps this agent's requests surfaced by an ancestor to that
	// ancestor, until they are resolved.
	delegated map[string]*actor.PID
}

// Props returns the props of the actor for manifest m.
func Props(m store.Agent, deps Deps) *actor.Props {
	deps.Clock = clock.Or(deps.Clock)
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{
			deps:      deps,
			m:         m,
			status:    protocol.StatusIdle,
			rstate:    protocol.RuntimeStopped,
			mode:      m.Mode,
			epoch:     -1,
			attached:  make(map[uint64]*attachment),
			inflight:  make(map[string]*inflight),
			open:      make(map[string]*openRequest),
			foreign:   make(map[string]*foreignRequest),
			delegated: make(map[string]*actor.PID),
		}
	}, actor.WithSupervisor(supervisor.StopOnFailure()))
}

// Receive implements actor.Actor.
func (a *Actor) Receive(c actor.Context) {
	defer a.countAttachments()
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
	case *startTimeout:
		if m.epoch == a.epoch && a.rt != nil && !a.ready {
			a.startFailed = fmt.Sprintf("runtime not ready within %s", a.deps.Runtime.StartTimeout)
			a.stopRuntime(c, supervisor.StopForce)
		}
	case *idleTick:
		a.onIdleTick(c, m)
	case *escTimer:
		if m.epoch == a.epoch && m.gen == a.escGen && a.esc != nil && a.rt != nil {
			act, wait := a.esc.Timeout()
			a.perform(c, act, wait)
		}
	case *actor.Stopping:
		a.stopTimers()
		a.failAll(protocol.Errorf(protocol.CodeInternal, "agent stopped"))
	case *actor.Stopped:
		clear(a.attached) // gone with the actor (for the attachments gauge)
	case *actor.Restarting:
	default:
		a.log.Warn("agent actor: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// ---- client requests ----

func (a *Actor) onRequest(c actor.Context, r *Request) {
	switch r.Header.Type {
	case protocol.TypeAgentCreate:
		if a.ready {
			r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, protocol.AgentCreateData{AgentID: a.m.AgentID}))
			return
		}
		a.startWaiters = append(a.startWaiters, waiter{r.Client, r.Header})
		a.ensureRuntime(c)
	case protocol.TypeAgentAttach:
		a.attach(c, r)
	case protocol.TypeAgentDetach:
		a.detach(c, r.Client)
		r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil))
	case protocol.TypeAgentTerminate:
		a.terminate(c, r)
	case protocol.TypeAgentKill:
		a.kill(c, r)
	default:
		a.forward(c, r)
	}
}

func (a *Actor) attach(c actor.Context, r *Request) {
	role := r.Cmd.(*protocol.AgentAttach).Role
	if role == "" {
		role = protocol.RoleInteractive
	}
	att := a.attached[r.Client.ID]
	if att == nil {
		att = &attachment{client: r.Client}
		a.attached[r.Client.ID] = att
		c.Watch(r.Client.PID)
	}
	// A repeated attach re-reserves the connection and resyncs it.
	att.role, att.live, att.attachID = role, false, r.Header.ID
	if a.ready && !a.stopping {
		a.requestSync(c, []uint64{r.Client.ID})
		return
	}
	a.pendingAttach = append(a.pendingAttach, r.Client.ID)
	a.ensureRuntime(c)
}

func (a *Actor) detach(c actor.Context, cl *Client) {
	if _, ok := a.attached[cl.ID]; !ok {
		return
	}
	delete(a.attached, cl.ID)
	c.Unwatch(cl.PID)
}

func (a *Actor) onTerminated(c actor.Context, m *actor.Terminated) {
	if a.rt != nil && m.Who.Equal(a.rt) {
		// The runtime actor died without reporting an exit (a panic).
		a.onExited(c, &proc.Exited{Epoch: a.epoch, ExitCode: -1, Reason: "runtime actor failed"})
		return
	}
	for id, att := range a.attached {
		if att.client.PID.Equal(m.Who) {
			delete(a.attached, id)
		}
	}
}

func (a *Actor) terminate(c actor.Context, r *Request) {
	respond := func(deferred bool) {
		r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, protocol.AgentTerminateData{Deferred: deferred}))
	}
	switch {
	case a.rt == nil || a.stopping:
		respond(false)
	case !a.ready || a.status.Active():
		a.terminateWhenIdle = true
		respond(true)
	default:
		a.stopRuntime(c, supervisor.StopGraceful)
		respond(false)
	}
}

func (a *Actor) kill(c actor.Context, r *Request) {
	if a.rt == nil {
		r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil))
		return
	}
	// Shard's choice: agent.kill answers once the process is gone, so a
	// successful response means no runtime is left.
	a.killWaiters = append(a.killWaiters, waiter{r.Client, r.Header})
	if a.lease != nil {
		a.lease.cancelled = true // the run it serves ends cancelled
	}
	mode := supervisor.StopEscalate
	if r.Cmd.(*protocol.AgentKill).Force {
		mode = supervisor.StopForce
	}
	a.stopRuntime(c, mode)
}

// readOnly lists the per-agent commands an observer may send.
func readOnly(typ string) bool {
	switch typ {
	case protocol.TypeListModes, protocol.TypeListModels, protocol.TypeListReasoningLevels:
		return true
	}
	return false
}

func (a *Actor) forward(c actor.Context, r *Request) {
	att := a.attached[r.Client.ID]
	if att == nil && a.answerDelegated(c, r) {
		return // an ancestor's client answering a delegated request
	}
	if att == nil {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type,
			protocol.Errorf(protocol.CodeNotAttached, "connection is not attached to agent %s", a.m.AgentID)))
		return
	}
	if att.role == protocol.RoleObserver && !readOnly(r.Header.Type) {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type,
			protocol.Errorf(protocol.CodePermissionDenied, "observer attachments are read-only")))
		return
	}
	if a.leaseGuard(r) {
		return
	}
	switch r.Header.Type {
	case protocol.TypePermissionResponse, protocol.TypeUIResponse:
		a.answer(c, r, att)
		return
	case protocol.TypeAbort:
		if !a.ready {
			r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil)) // nothing runs
			return
		}
	case protocol.TypeListModes, protocol.TypeListModels, protocol.TypeListReasoningLevels:
		// Catalog reads never wake a stopped runtime (spec §9.2).
		if !a.ready || a.stopping {
			r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type,
				protocol.Errorf(protocol.CodeConflict, "runtime is not running; %s does not start it", r.Header.Type)))
			return
		}
	}
	if !a.ready || a.stopping {
		a.queued = append(a.queued, r)
		a.ensureRuntime(c)
		return
	}
	a.send(r.Client, r.Header, r.Raw, nil)
}

// answer applies first-valid-response-wins (spec §6.3, §9.5).
func (a *Actor) answer(c actor.Context, r *Request, att *attachment) {
	var reqID string
	switch cmd := r.Cmd.(type) {
	case *protocol.PermissionResponse:
		reqID = cmd.RequestID
	case *protocol.UIResponse:
		reqID = cmd.RequestID
	}
	o := a.open[reqID]
	if o == nil || !a.ready {
		// Already answered, withdrawn or unknown: discarded silently (§6.3).
		r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil))
		return
	}
	bad := func(format string, args ...any) {
		r.Client.Send(protocol.NewErrorResponse(r.Header.ID, r.Header.Type, protocol.Errorf(protocol.CodeInvalidRequest, format, args...)))
	}
	switch cmd := r.Cmd.(type) {
	case *protocol.PermissionResponse:
		if o.kind != protocol.TypePermissionRequest {
			bad("request %s is not a permission request", reqID)
			return
		}
		if cmd.ChoiceID != "" && !o.choices[cmd.ChoiceID] {
			bad("unknown choice_id %q for request %s", cmd.ChoiceID, reqID) // request stays open
			return
		}
		if cmd.Decision != "" && len(o.options) > 0 && !o.options[cmd.Decision] {
			bad("decision %q is not offered by request %s", cmd.Decision, reqID)
			return
		}
	case *protocol.UIResponse:
		if o.kind != protocol.TypeUIRequest {
			bad("request %s is not a UI request", reqID)
			return
		}
	}
	delete(a.open, reqID) // this response wins
	raw, err := setFields(r.Raw, map[string]any{"source": att.client.Source})
	if err != nil {
		bad("%v", err)
		return
	}
	a.send(r.Client, r.Header, raw, nil)
}

// send forwards a command to the runtime under a fresh daemon id (DESIGN §4:
// clients choose their own ids, so two clients may reuse one).
func (a *Actor) send(cl *Client, h protocol.Header, raw []byte, attach []uint64) {
	a.seq++
	did := "d-" + strconv.Itoa(a.seq)
	out, err := setFields(raw, map[string]any{"id": did, "agent_id": nil})
	if err != nil {
		if cl != nil {
			cl.Send(protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)))
		}
		return
	}
	a.inflight[did] = &inflight{client: cl, clientID: h.ID, command: h.Type, attach: attach}
	a.sys.Root.Send(a.rt, &proc.Write{Line: out})
}

// setFields rewrites top-level fields of a JSON object; a nil value deletes.
func setFields(raw []byte, fields map[string]any) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("rewrite command: %w", err)
	}
	for k, v := range fields {
		if v == nil {
			delete(obj, k)
			continue
		}
		obj[k] = protocol.MustMarshal(v)
	}
	return protocol.Marshal(obj)
}

func (a *Actor) requestSync(c actor.Context, clients []uint64) {
	a.send(nil, protocol.Header{Type: protocol.TypeGetSync}, []byte(`{"type":"get_sync"}`), clients)
}

func (a *Actor) internal(typ string, fields map[string]any) {
	fields["type"] = typ
	a.send(nil, protocol.Header{Type: typ}, protocol.MustMarshal(fields), nil)
}

// ---- runtime output ----

// onOutputBatch handles a batch of runtime records in order, exactly as if
// each had come alone: a record handled may end the generation, and the
// records behind it are then stale. The records fanned out share one
// buffer (see spliced).
func (a *Actor) onOutputBatch(c actor.Context, m *proc.Output) {
	defer a.endBatch()
	for i, line := range m.Lines {
		if m.Epoch != a.epoch || a.rt == nil {
			return
		}
		a.rest = m.Lines[i:]
		a.onOutput(c, line)
	}
}

// endBatch writes what fanout held for the batch and drops the batch's
// buffers: an idle agent keeps none.
//
// Records for a single client are written by the agent itself when the
// connection is idle (outbox direct write: no hand-off per batch, the relay
// case); a fan-out to several clients wakes their writer goroutines, which
// write in parallel, so that one client's write never waits for the others'
// (skew) and the agent is not the one paying every syscall.
func (a *Actor) endBatch() {
	direct := len(a.held) == 1
	for _, att := range a.held {
		att.held = false
		att.client.flush(direct) // detached meanwhile or not: what is queued goes out
	}
	clear(a.held)
	a.held = a.held[:0]
	a.rest, a.splice = nil, nil
}

func (a *Actor) onOutput(c actor.Context, line []byte) {
	typ := protocol.PeekType(line)
	if !wholeObject(line, typ) {
		a.invalidOutput(len(line))
		return
	}
	if !a.ready {
		a.onStartupOutput(c, typ, line)
		return
	}
	switch typ {
	case protocol.TypeTurnStart, protocol.TypeMessageComplete, protocol.TypeTurnEnd, protocol.TypeError:
		defer a.leaseObserve(c, typ, line) // after the event reached clients
	}
	switch typ {
	case protocol.TypeResponse:
		a.onResponse(c, line)
		return
	case protocol.TypeStatus:
		var ev protocol.Status
		if json.Unmarshal(line, &ev) == nil && ev.Status.Valid() {
			a.fanout(line)
			a.setStatus(c, ev.Status)
			return
		}
	case protocol.TypePermissionRequest, protocol.TypeUIRequest:
		a.fanout(line)
		a.onRequestEvent(c, typ, line)
		return
	case protocol.TypePermissionResolved, protocol.TypeUIResolved:
		var ev struct {
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal(line, &ev) == nil {
			a.resolvedFor(c, ev.RequestID, line)
			delete(a.open, ev.RequestID)
		}
	case protocol.TypeMessageDelta:
		phase := protocol.PhaseStreaming
		if bytes.Contains(line, []byte(`"kind":"thinking"`)) {
			phase = protocol.PhaseThinking
		}
		a.setActivity(phase, "")
	case protocol.TypeToolCall:
		var ev struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(line, &ev) == nil {
			a.setActivity(protocol.PhaseTool, ev.Name)
		}
	case protocol.TypeTurnEnd:
		var ev protocol.TurnEnd
		if json.Unmarshal(line, &ev) == nil && ev.Usage != nil {
			a.usage.Input += ev.Usage.Input
			a.usage.Output += ev.Usage.Output
			a.usage.CacheRead += ev.Usage.CacheRead
			a.usage.CacheWrite += ev.Usage.CacheWrite
			a.usage.Cost += ev.Usage.Cost
			a.usage.ContextTokens = ev.Usage.ContextTokens
			a.usage.Model = ev.Usage.Model
			a.notifyInfo(c)
		}
	case protocol.TypeModeChanged:
		var ev protocol.ModeChanged
		if json.Unmarshal(line, &ev) == nil && ev.Mode != "" {
			a.mode = ev.Mode
			a.m.Mode = ev.Mode
			a.saveSelection()
			a.notifyInfo(c)
		}
	case protocol.TypeModelChanged:
		var ev protocol.ModelChanged
		if json.Unmarshal(line, &ev) == nil && ev.Active.Model != "" {
			// The new model's capabilities replace the runtime's: a fresh
			// sync must not offer controls the model lacks (spec §7).
			if ev.Capabilities != nil {
				a.caps = ev.Capabilities
			}
			a.m.Model = ev.Active.Model
			a.saveSelection()
			a.notifyInfo(c)
		}
	}
	a.fanout(line)
}

// wholeObject is the relay's framing check of a runtime record, cheap
// enough for the hot path (DESIGN §3 keeps records raw, so their syntax is
// not checked): a JSON object with a readable type that is not cut short.
// A record failing it would break every client's framing (spec §2).
func wholeObject(line []byte, typ string) bool {
	line = bytes.TrimSpace(line)
	return typ != "" && len(line) >= 2 && line[0] == '{' && line[len(line)-1] == '}'
}

// invalidOutput drops a record that is not a whole JSON object with a type.
// The first of a generation is logged as a warning (without its content,
// which may be conversation text) and reported to attachments as a
// non-fatal PROTOCOL_ERROR.
func (a *Actor) invalidOutput(size int) {
	a.badRecords++
	if a.badRecords > 1 {
		a.log.Debug("invalid runtime record dropped", "epoch", a.epoch, "bytes", size)
		return
	}
	a.log.Warn("runtime wrote an invalid record; dropped", "epoch", a.epoch, "bytes", size)
	if a.ready {
		a.fanout(protocol.MustMarshal(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError},
			Code: protocol.CodeProtocolError, Message: "the runtime wrote an invalid record; it was dropped"}))
	}
}

func (a *Actor) onStartupOutput(c actor.Context, typ string, line []byte) {
	switch typ {
	case protocol.TypeHello:
		var h protocol.Hello
		if json.Unmarshal(line, &h) == nil {
			a.gotHello = true
			a.caps = h.Capabilities
		}
	case protocol.TypeSync:
		if !a.gotHello {
			return
		}
		var s protocol.Sync
		if err := json.Unmarshal(line, &s); err != nil {
			a.log.Warn("runtime sync undecodable", "err", err)
			return
		}
		snap, err := decodeSnapshot(line)
		if err != nil {
			a.log.Warn("runtime sync undecodable", "err", err)
			return
		}
		a.becomeReady(c, snap)
	default:
		a.log.Debug("runtime output before readiness dropped", "type", typ)
	}
}

func (a *Actor) becomeReady(c actor.Context, snap *snapshot) {
	a.ready = true
	a.rstate = protocol.RuntimeRunning
	if snap.Mode != "" {
		a.mode = snap.Mode
	}
	status := snap.Status
	if !status.Valid() {
		status = protocol.StatusIdle
	}
	a.status = status
	a.open = make(map[string]*openRequest)
	for _, p := range snap.PendingRequests {
		a.onRequestEvent(c, protocol.PeekType(p), p)
	}
	a.broadcastStatus(c)
	a.setActivity(phaseOf(status), "")

	// The child's first sync is authoritative at this point of its output:
	// existing attachments get a fresh sync (new epoch); waiting attaches
	// get theirs right after their response.
	for _, att := range a.attached {
		if att.live {
			att.client.Send(a.syncRecord(snap))
		}
	}
	waiting := a.pendingAttach
	a.pendingAttach = nil
	for _, id := range waiting {
		if att := a.attached[id]; att != nil && !att.live {
			a.deliverSync(att, snap)
		}
	}
	for _, w := range a.startWaiters {
		w.client.Send(protocol.NewResponse(w.header.ID, w.header.Type, protocol.AgentCreateData{AgentID: a.m.AgentID}))
	}
	a.startWaiters = nil
	queued := a.queued
	a.queued = nil
	for _, r := range queued {
		a.forward(c, r)
	}
	a.pumpLease(c)
	a.pumpInjects(c)
	if !status.Active() {
		a.idleSince = a.deps.Clock.Now()
		a.armIdle()
		if a.terminateWhenIdle {
			a.terminateWhenIdle = false
			a.stopRuntime(c, supervisor.StopGraceful)
		}
	}
}

func (a *Actor) onResponse(c actor.Context, line []byte) {
	if a.onSyncFast(c, line) {
		return
	}
	var resp protocol.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		a.log.Warn("runtime response undecodable", "err", err)
		return
	}
	f := a.inflight[resp.ID]
	if f == nil {
		return
	}
	delete(a.inflight, resp.ID)
	if resp.Command == protocol.TypeGetSync || f.command == protocol.TypeGetSync {
		a.onSyncResponse(c, f, &resp)
		return
	}
	switch {
	case f.lease:
		a.onLeaseResponse(c, &resp)
		return
	case f.steer != nil:
		answerSteer(f.steer, &resp)
		return
	case f.injectTo != nil:
		var err error
		if !resp.Success {
			err = resp.Error
			if resp.Error == nil {
				err = protocol.Errorf(protocol.CodeInternal, "report refused")
			}
		}
		c.Send(f.injectTo, &Injected{Key: f.injectKey, Err: err})
		return
	}
	if f.client == nil {
		return // the daemon's own command (abort, headless answer)
	}
	resp.ID = f.clientID
	resp.AgentID = a.m.AgentID
	f.client.Send(protocol.MustMarshal(resp))
	a.maybeIdle()
}

func (a *Actor) onSyncResponse(c actor.Context, f *inflight, resp *protocol.Response) {
	var snap *snapshot
	if resp.Success {
		snap, _ = decodeSnapshot(resp.Data)
	}
	a.answerAttaches(c, f, snap)
}

// onSyncFast handles a successful get_sync response written the way Shard
// runtimes write it (protocol.Marshal of protocol.Response: type, id,
// command, success, data, nothing after) without decoding the whole record
// first: its data is decoded once, straight into the snapshot. It reports
// false, having done nothing, for any other record, which then takes the
// general path; so does a record whose data is not one valid JSON value,
// since only the general path handles an undecodable response.
func (a *Actor) onSyncFast(c actor.Context, line []byte) bool {
	id, data, ok := cutSyncResponse(line)
	if !ok {
		return false
	}
	f := a.inflight[id]
	if f == nil {
		return false
	}
	snap, err := decodeSnapshot(data)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return false
	}
	delete(a.inflight, id)
	a.answerAttaches(c, f, snap)
	return true
}

// cutSyncResponse splits `{"type":"response","id":"<id>","command":
// "get_sync","success":true,"data":<data>}` into id and data. data still has
// to be checked to be one JSON value: then the record is exactly that
// response.
func cutSyncResponse(line []byte) (id string, data []byte, ok bool) {
	const head, mid = `{"type":"response","id":"`, `","command":"get_sync","success":true,"data":`
	rest, ok := bytes.CutPrefix(line, []byte(head))
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	id = string(rest[:end])
	data, ok = bytes.CutPrefix(rest[end:], []byte(mid))
	if !ok || len(data) < 2 || data[len(data)-1] != '}' {
		return "", nil, false
	}
	return id, data[:len(data)-1], true
}

// answerAttaches answers the attaches waiting on a get_sync with snap, or
// with an error when there is no snapshot.
func (a *Actor) answerAttaches(c actor.Context, f *inflight, snap *snapshot) {
	if snap == nil {
		for _, id := range f.attach {
			if att := a.attached[id]; att != nil && !att.live {
				att.client.Send(protocol.NewErrorResponse(att.attachID, protocol.TypeAgentAttach,
					protocol.Errorf(protocol.CodeInternal, "runtime could not produce a sync snapshot")))
				a.detach(c, att.client)
			}
		}
		return
	}
	for _, id := range f.attach {
		if att := a.attached[id]; att != nil && !att.live {
			a.deliverSync(att, snap)
		}
	}
}

// deliverSync answers an attach and sends its sync; from now on the client
// receives every later event exactly once (spec §6.4).
func (a *Actor) deliverSync(att *attachment, snap *snapshot) {
	att.client.Send(protocol.NewResponse(att.attachID, protocol.TypeAgentAttach,
		protocol.AgentAttachData{Status: a.status, Info: a.Info()}))
	att.client.Send(a.syncRecord(snap))
	att.live = true
}

func (a *Actor) syncRecord(snap *snapshot) []byte {
	epoch := a.epoch
	pending := make([]json.RawMessage, 0, len(snap.PendingRequests)+len(a.foreign))
	for _, p := range snap.PendingRequests {
		pending = append(pending, protocol.WithAgentID(p, a.m.AgentID))
	}
	// Descendants' requests delegated here survive a reconnect too.
	pending = append(pending, a.foreignPending()...)
	// protocol.Sync, member for member, with the window's messages copied
	// as they are (see snapshot).
	win := make([]byte, 0, len(snap.LiveWindow.Messages)+48)
	win = append(append(win, `{"messages":`...), snap.LiveWindow.Messages...)
	if ci := snap.LiveWindow.CompactionIndex; ci != nil {
		win = strconv.AppendInt(append(win, `,"compaction_index":`...), int64(*ci), 10)
	}
	win = append(win, '}')
	rec, err := protocol.MarshalWith(syncHead{
		Header:       protocol.Header{Type: protocol.TypeSync, AgentID: a.m.AgentID},
		Status:       a.status,
		Mode:         a.mode,
		Capabilities: a.caps,
		RuntimeEpoch: &epoch,
	}, protocol.RawMember{Key: "live_window", Value: win},
		protocol.RawMember{Key: "pending_requests", Value: protocol.MustMarshal(pending)})
	if err != nil {
		panic(err) // typed values and compact JSON always encode
	}
	return rec
}

// snapshot is the runtime's state as get_sync (or its first sync) reports
// it: protocol.GetSyncData, except that the live window's messages stay
// raw. The daemon never looks into them, so the sync it builds relays them
// as the runtime wrote them (DESIGN §3: the hot path stays raw) instead of
// decoding and re-encoding a window of thousands of messages on every
// attach; for the records Shard runtimes write (protocol.Marshal of
// protocol.Message) the bytes are the same either way.
type snapshot struct {
	Status          protocol.AgentStatus `json:"status"`
	Mode            string               `json:"mode"`
	Capabilities    []string             `json:"capabilities,omitempty"`
	LiveWindow      rawWindow            `json:"live_window"`
	PendingRequests []json.RawMessage    `json:"pending_requests"`
}

// rawWindow is protocol.LiveWindow with the messages array raw.
type rawWindow struct {
	Messages        json.RawMessage `json:"messages"`
	CompactionIndex *int            `json:"compaction_index,omitempty"`
}

// syncHead is the members of protocol.Sync before live_window, in order.
type syncHead struct {
	protocol.Header
	Status       protocol.AgentStatus `json:"status"`
	Mode         string               `json:"mode"`
	Capabilities []string             `json:"capabilities,omitempty"`
	RuntimeEpoch *int64               `json:"runtime_epoch,omitempty"`
}

// decodeSnapshot decodes a get_sync result (or a runtime sync event). A
// window whose messages are not a compact array of JSON objects (which
// protocol.LiveWindow would have refused, or turned null into `[]`, null
// elements into empty messages and whitespace into none) goes through the
// typed decoding, so that it is relayed exactly as before.
func decodeSnapshot(data []byte) (*snapshot, error) {
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, err
	}
	if !arrayOfObjects(snap.LiveWindow.Messages) {
		return typedSnapshot(data)
	}
	return &snap, nil
}

// typedSnapshot is decodeSnapshot through protocol.GetSyncData: messages
// decoded and encoded again.
func typedSnapshot(data []byte) (*snapshot, error) {
	var typed protocol.GetSyncData
	if err := json.Unmarshal(data, &typed); err != nil {
		return nil, err
	}
	msgs := typed.LiveWindow.Messages
	if msgs == nil {
		msgs = []protocol.Message{}
	}
	raw, err := protocol.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	return &snapshot{Status: typed.Status, Mode: typed.Mode, Capabilities: typed.Capabilities,
		PendingRequests: typed.PendingRequests,
		LiveWindow:      rawWindow{Messages: raw, CompactionIndex: typed.LiveWindow.CompactionIndex}}, nil
}

// arrayOfObjects reports whether b, valid JSON, is a compact array (no
// whitespace outside strings) whose elements are all objects, an empty
// array included: then it is what encoding protocol.Message values would
// give, as far as the daemon can tell without decoding them. It scans b
// once.
func arrayOfObjects(b []byte) bool {
	depth, inString, escaped, element := 0, false, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if depth == 0 && c != '[' {
			return false // not an array, or not compact
		}
		if element { // the first byte of an element, or the "]" of []
			element = false
			if c != '{' && c != ']' {
				return false
			}
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			return false
		case '"':
			inString = true
		case '[':
			element = depth == 0
			depth++
		case '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			element = depth == 1
		}
	}
	return len(b) > 0
}

// onRequestEvent records an open permission/UI request and applies the
// headless policy when nobody can answer it.
func (a *Actor) onRequestEvent(c actor.Context, typ string, line []byte) {
	o := &openRequest{kind: typ, options: map[string]bool{}, choices: map[string]bool{}}
	var reqID string
	switch typ {
	case protocol.TypePermissionRequest:
		var ev protocol.PermissionRequest
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		reqID = ev.RequestID
		for _, opt := range ev.Options {
			o.options[opt] = true
		}
		for _, ch := range ev.Choices {
			o.choices[ch.ID] = true
		}
	case protocol.TypeUIRequest:
		var ev protocol.UIRequest
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		reqID = ev.RequestID
	default:
		return
	}
	if reqID == "" {
		return
	}
	a.open[reqID] = o
	if a.hasResponder() {
		return
	}
	if a.m.ParentAgentID != "" {
		a.delegateUp(c, reqID, line) // the nearest ancestor with a responder
		return
	}
	a.headless(reqID, typ)
}

// headless applies the agent's headless policy to a request nobody can
// answer (spec §6.3 headless compatibility path).
func (a *Actor) headless(reqID, kind string) {
	policy := a.m.HeadlessPolicy
	if policy == "" {
		policy = a.deps.Runtime.HeadlessPolicy
	}
	if policy == protocol.HeadlessQueue {
		return // waits for an interactive client or the runtime's headless timeout
	}
	// deny, and allow_if_rule_matches (the runtime already applied its
	// rules before asking, so nothing matched): the headless path answers.
	delete(a.open, reqID)
	if kind == protocol.TypePermissionRequest {
		a.internal(protocol.TypePermissionResponse, map[string]any{"request_id": reqID, "decision": protocol.DecisionDeny, "source": "headless"})
	} else {
		a.internal(protocol.TypeUIResponse, map[string]any{"request_id": reqID, "value": json.RawMessage("null"), "source": "headless"})
	}
}

// hasResponder reports whether an interactive client is attached (or
// attaching: it will see open requests in its sync).
func (a *Actor) hasResponder() bool {
	for _, att := range a.attached {
		if att.role == protocol.RoleInteractive {
			return true
		}
	}
	return false
}

func (a *Actor) fanout(line []byte) {
	if len(a.attached) == 0 {
		return
	}
	rec := a.spliced(line)
	n := 0
	for _, att := range a.attached {
		if !att.live {
			continue
		}
		if a.rest == nil { // not from a runtime output batch
			att.client.Send(rec)
		} else {
			// Held until the batch ends, so that each client gets the
			// batch in one write (endBatch); anything else sent to the
			// client meanwhile writes the held records first, in order.
			if !att.held {
				att.held = true
				a.held = append(a.held, att)
			}
			att.client.hold(rec)
		}
		n++
	}
	a.deps.Metrics.EventsRelayed(n)
}

// spliceMax is the largest record spliced into a batch's shared buffers,
// and their size: a larger record gets a buffer of its own, so that a small
// record still queued for a slow client never keeps a large one's memory
// alive.
const spliceMax = 16 << 10

// spliced returns line with this agent's agent_id spliced in (DESIGN §3:
// raw, no re-encoding). Within a batch, small records are appended to
// shared buffers (of up to spliceMax) sized for the records behind them: a
// burst costs an allocation per 16 KiB instead of one per record. Each
// result's capacity ends where it does, so no append can reach a
// neighbour.
func (a *Actor) spliced(line []byte) []byte {
	if a.idField == nil {
		a.idField = protocol.AgentIDField(a.m.AgentID)
	}
	need := len(line) + len(a.idField) + 1
	if need > spliceMax {
		return protocol.WithField(line, a.idField)
	}
	if cap(a.splice)-len(a.splice) < need {
		if a.rest == nil {
			return protocol.WithField(line, a.idField) // outside a batch
		}
		// Room for this record and the small ones behind it in the batch,
		// up to spliceMax at a time: small allocations reuse warm memory,
		// where large ones get fresh pages from the OS.
		size := 0
		for _, l := range a.rest {
			if n := len(l) + len(a.idField) + 1; n <= spliceMax {
				if size += n; size >= spliceMax {
					break
				}
			}
		}
		a.splice = make([]byte, 0, max(need, min(size, spliceMax)))
	}
	n := len(a.splice)
	a.splice = protocol.AppendWithField(a.splice, line, a.idField)
	return a.splice[n:len(a.splice):len(a.splice)]
}

// countAttachments reports a change of the attachment count to metrics; it
// runs after every message, whichever path added or dropped one.
func (a *Actor) countAttachments() {
	if n := len(a.attached); n != a.nAttached {
		a.deps.Metrics.AttachmentsAdd(n - a.nAttached)
		a.nAttached = n
	}
}

func (a *Actor) saveSelection() {
	if a.deps.SaveSelection == nil {
		return
	}
	id, model, mode, save := a.m.AgentID, a.m.Model, a.m.Mode, a.deps.SaveSelection
	go save(id, model, mode)
}

// ---- status, activity, info ----

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
		c.Send(p, &InfoChanged{Info: a.Info()})
	}
}

// Info returns the agent's public projection.
func (a *Actor) Info() protocol.AgentInfo {
	return InfoOf(a.m, a.status, a.rstate, a.mode, a.usage)
}

// InfoOf projects a manifest and live state into AgentInfo.
func InfoOf(m store.Agent, status protocol.AgentStatus, rs protocol.RuntimeState, mode string, usage protocol.Usage) protocol.AgentInfo {
	if mode == "" {
		mode = m.Mode
	}
	info := protocol.AgentInfo{
		AgentID: m.AgentID, Name: m.Name, Cwd: m.Cwd, Model: m.Model, Provider: m.Provider, Mode: mode,
		Status: status, RuntimeState: rs, CreatedAt: m.CreatedAt, ParentAgentID: m.ParentAgentID,
		Alias: m.Alias, DefinitionName: m.DefinitionName, DisplayName: m.DisplayName,
	}
	if usage != (protocol.Usage{}) {
		u := usage
		info.Usage = &u
	}
	return info
}
