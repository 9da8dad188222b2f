package agent

import (
	"bytes"
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/protocol"
)

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
// Records for up to directFanout clients are written by the agent itself to
// each connection that is idle (outbox direct write: no writer hand-off per
// batch and client); a larger fan-out wakes the connections' writer
// goroutines, which write in parallel, so the agent is not the one paying
// a hundred syscalls per batch while later clients wait (skew).
func (a *Actor) endBatch() {
	direct := len(a.held) <= directFanout
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
	if !protocol.WholeObject(line, typ) {
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
			if ev.Detail == protocol.StatusDetailRetrying && ev.Status.Active() {
				// A provider retry: the status stays, the activity says so
				// until the next delta, tool call or status.
				a.setActivity(protocol.PhaseRetrying, "")
			}
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
			a.usageTurns++
			a.saveUsage()
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
			// sync must not offer controls the model lacks (docs/protocol.md
			// §7).
			if ev.Capabilities != nil {
				a.caps = ev.Capabilities
			}
			// What runs from the next provider call on, on whichever
			// provider: AgentInfo says it (docs/protocol.md §13, providers).
			a.m.Provider, a.m.Model = ev.Active.Provider, ev.Active.Model
			a.saveSelection()
			a.notifyInfo(c)
		}
	}
	a.fanout(line)
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

// spliced returns line with this agent's agent_id spliced in (raw, no
// re-encoding: the relay's hot path never decodes an event it passes on).
// Within a batch, small records are appended to shared buffers (of up to
// spliceMax) sized for the records behind them: a burst costs an allocation
// per 16 KiB instead of one per record. Each result's capacity ends where it
// does, so no append can reach a neighbour.
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

// directFanout is the most attachments the agent writes a batch to itself.
// For a few clients the direct writes save each connection's writer a
// wake-up and lower the fan-out latency; for many, one actor's serial
// writes lose to the writers, which write in parallel (the fanout
// benchmark, BENCHMARKS.md, measures both).
const directFanout = 16
