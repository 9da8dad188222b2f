package agent

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
)

// attachment is one client connection attached to the agent.
type attachment struct {
	client   *Client
	role     string
	live     bool   // false while reserved: waiting for its sync
	attachID string // the agent.attach id, answered when the sync is sent
	held     bool   // in Actor.held: records held for the current batch
}

// waiter is a client waiting for a runtime event (readiness, the exit).
type waiter struct {
	client *Client
	header protocol.Header
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
	// prompt is a client's prompt text, kept while the agent takes an
	// automatic title: accepted, it titles the agent (title.go).
	prompt string
	// note: a strict steer of the leased run (the parent's or a client's),
	// whose outcome the run's holder records.
	note *steerNote
}

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
		// The registry hears of it before the client does, so that a
		// workspace.retire sent after the answer sees the agent unwatched.
		a.countAttachments(c)
		r.Client.Send(protocol.NewResponse(r.Header.ID, r.Header.Type, nil))
	case protocol.TypeAgentTerminate:
		a.terminate(c, r)
	case protocol.TypeAgentKill:
		a.kill(c, r)
	case protocol.TypeAgentUpdate:
		a.update(r)
	default:
		a.forward(c, r)
	}
}

// attach attaches (or re-attaches) the requesting connection. Before
// anything else the connection hears Routed: from now on it sends its
// commands for this agent here directly (see gateway's direct routing).
func (a *Actor) attach(c actor.Context, r *Request) {
	if r.Client.PID != nil {
		c.Send(r.Client.PID, &Routed{AgentID: a.m.AgentID, PID: a.self})
		if a.routed[r.Client.ID] == nil {
			c.Watch(r.Client.PID)
		}
		a.routed[r.Client.ID] = r.Client.PID
	}
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
	_, attached := a.attached[cl.ID]
	_, routed := a.routed[cl.ID]
	if !attached && !routed {
		return
	}
	delete(a.attached, cl.ID)
	delete(a.routed, cl.ID) // the connection takes the registry again (gateway's direct routing)
	c.Unwatch(cl.PID)
}

func (a *Actor) onTerminated(c actor.Context, m *actor.Terminated) {
	if a.rt != nil && m.Who.Equal(a.rt) {
		// The runtime actor died without reporting an exit (a panic).
		a.onExited(c, &proc.Exited{Epoch: a.epoch, ExitCode: -1, Reason: "runtime actor failed"})
		return
	}
	for id, pid := range a.routed {
		if pid.Equal(m.Who) {
			delete(a.routed, id)
		}
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
	case protocol.TypeListModes, protocol.TypeListModels, protocol.TypeListReasoningLevels, protocol.TypeGetImage:
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
		// Catalog reads never wake a stopped runtime (docs/protocol.md §9.2).
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
	did := a.send(r.Client, r.Header, r.Raw, nil)
	if p, ok := r.Cmd.(*protocol.Prompt); ok && did != "" && a.wantsAutoTitle() {
		a.inflight[did].prompt = p.Message
	}
}

// send forwards a client's command (or the daemon's own) to the runtime,
// without the routing agent_id the direct protocol omits: the record is
// rewritten raw, not decoded again: DecodeCommand in the connection actor
// validated it, and the relay's hot path never decodes a record twice.
// It returns the daemon id the command went under ("" if it did not go).
func (a *Actor) send(cl *Client, h protocol.Header, raw []byte, attach []uint64) string {
	rec, err := protocol.DeleteMember(raw, "agent_id")
	if err != nil {
		if cl != nil {
			cl.Send(protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(protocol.CodeInvalidRequest, "%w", err)))
		}
		return ""
	}
	return a.toRuntime(&inflight{client: cl, clientID: h.ID, command: h.Type, attach: attach}, rec)
}

// toRuntime sends rec to the runtime under a fresh daemon id d-<n>, set as
// its id (clients choose their own ids, so two clients may reuse one; see
// docs/protocol.md §5.1), and records f as in flight under it until the
// runtime answers. It returns the daemon id, or "" when rec cannot be
// rewritten (not a JSON object): f's client then hears INVALID_REQUEST. The
// daemon's own records always can.
func (a *Actor) toRuntime(f *inflight, rec []byte) string {
	a.seq++
	did := "d-" + strconv.Itoa(a.seq)
	out, err := protocol.SetMember(rec, "id", protocol.MustMarshal(did))
	if err == nil && bytes.IndexByte(out, '\n') >= 0 {
		// A WebSocket frame may hold a newline between members, which
		// would split the record on the runtime's stdin (JSONL): compact
		// it (a scan, not a decode; only such rare records pay it).
		var buf bytes.Buffer
		if err = json.Compact(&buf, out); err == nil {
			out = buf.Bytes()
		}
	}
	if err != nil {
		if f.client != nil {
			f.client.Send(protocol.NewErrorResponse(f.clientID, f.command, protocol.Errorf(protocol.CodeInvalidRequest, "%w", err)))
		} else {
			a.log.Error("daemon record for the runtime cannot be rewritten", "type", f.command, "err", err)
		}
		return ""
	}
	a.inflight[did] = f
	a.sys.Root.Send(a.rt, &proc.Write{Line: out})
	return did
}

func (a *Actor) requestSync(c actor.Context, clients []uint64) {
	a.send(nil, protocol.Header{Type: protocol.TypeGetSync}, []byte(`{"type":"get_sync"}`), clients)
}

func (a *Actor) internal(typ string, fields map[string]any) {
	fields["type"] = typ
	a.send(nil, protocol.Header{Type: typ}, protocol.MustMarshal(fields), nil)
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
	case f.note != nil:
		a.answerSteer(f, &resp)
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
	if f.prompt != "" && resp.Success {
		a.autoTitleFrom(f.prompt)
	}
	if f.client == nil {
		return // the daemon's own command (abort, headless answer)
	}
	resp.ID = f.clientID
	resp.AgentID = a.m.AgentID
	f.client.Send(protocol.MustMarshal(resp))
	a.maybeIdle()
}
