package agent

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
)

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
	case protocol.TypeError:
		// A runtime that cannot start says why in a fatal error event
		// after its hello (docs/protocol.md §8): kept for the answer to
		// the start, once the process exited.
		var ev protocol.ErrorEvent
		if a.gotHello && json.Unmarshal(line, &ev) == nil && ev.Fatal && ev.Code != "" {
			a.startError = &protocol.Error{Code: ev.Code, Message: ev.Message}
		}
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
	id, data, ok := protocol.CutSyncResponse(line)
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
// receives every later event exactly once (docs/protocol.md §6.4).
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
// as the runtime wrote them (the hot path stays raw) instead of
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
	if !protocol.ArrayOfObjects(snap.LiveWindow.Messages) {
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
