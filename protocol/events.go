package protocol

import (
	"bytes"
	"encoding/json"
)

func newEvent(typ string) Typed {
	switch typ {
	case TypeHello:
		return &Hello{}
	case TypeSync:
		return &Sync{}
	case TypeStatus:
		return &Status{}
	case TypeResponse:
		return &Response{}
	case TypeTurnStart:
		return &TurnStart{}
	case TypeMessageDelta:
		return &MessageDelta{}
	case TypeMessageComplete:
		return &MessageComplete{}
	case TypeToolCall:
		return &ToolCall{}
	case TypeToolResult:
		return &ToolResult{}
	case TypeTurnEnd:
		return &TurnEnd{}
	case TypeUsage:
		return &UsageEvent{}
	case TypeCompaction:
		return &Compaction{}
	case TypeError:
		return &ErrorEvent{}
	case TypePermissionRequest:
		return &PermissionRequest{}
	case TypePermissionResolved:
		return &PermissionResolved{}
	case TypeUIRequest:
		return &UIRequest{}
	case TypeUIResolved:
		return &UIResolved{}
	case TypeModelChanged:
		return &ModelChanged{}
	case TypeModeChanged:
		return &ModeChanged{}
	case TypeReasoningLevelChanged:
		return &ReasoningLevelChanged{}
	case TypeAgentSpawned:
		return &AgentSpawned{}
	case TypeAgentExited:
		return &AgentExited{}
	case TypeAgentRemoved:
		return &AgentRemoved{}
	case TypeAgentUpdated:
		return &AgentUpdated{}
	case TypeAgentStatusChanged:
		return &AgentStatusChanged{}
	case TypeAgentActivity:
		return &AgentActivity{}
	case TypeSubagentRunChanged:
		return &SubagentRunChanged{}
	case TypeWorkspaceCreated:
		return &WorkspaceCreated{}
	case TypeWorkspaceAttached:
		return &WorkspaceAttached{}
	case TypeWorkspaceRetired:
		return &WorkspaceRetired{}
	case TypeWorkspaceConflict:
		return &WorkspaceConflict{}
	case TypeTeamGoalChanged:
		return &TeamGoalChanged{}
	case TypeTeamTaskChanged:
		return &TeamTaskChanged{}
	case TypeTeamDecisionChanged:
		return &TeamDecisionChanged{}
	case TypeTeamMemoryChanged:
		return &TeamMemoryChanged{}
	case TypeTeamFeedAdded:
		return &TeamFeedAdded{}
	}
	return nil
}

// DecodeEvent decodes one server → client record into its typed message.
// Unknown event types decode to *Unknown so that clients stay forward
// compatible with additive events.
func DecodeEvent(rec []byte) (Typed, error) {
	// Fast path, one decode instead of two: a record that starts with a
	// plain "type" member (as Shard writes every record) of a known event
	// type is decoded straight into its typed value, which fills the Header
	// too. Anything else — including every record the envelope check would
	// refuse (a non-string id or agent_id fails the typed decode as well) —
	// takes the full path below, so results and errors are unchanged.
	if typ, ok := peekTypeFast(rec); ok {
		if ev := newEvent(string(typ)); ev != nil && json.Unmarshal(rec, ev) == nil && ev.Head().Type == string(typ) {
			return ev, nil
		}
	}
	h, err := DecodeHeader(rec)
	if err != nil {
		return nil, err
	}
	ev := newEvent(h.Type)
	if ev == nil {
		return &Unknown{Header: h, Raw: append(json.RawMessage(nil), rec...)}, nil
	}
	if err := json.Unmarshal(rec, ev); err != nil {
		return nil, Errorf(CodeInvalidRequest, "%s", jsonErrText(err))
	}
	return ev, nil
}

// Unknown is an event of a type this build does not know.
type Unknown struct {
	Header
	Raw json.RawMessage `json:"-"`
}

// NewResponse builds a successful response record. data may be nil.
//
// An answer that would not fit in one record (DefaultMaxRecord, what every
// client reads) is answered as an INTERNAL_ERROR naming its size instead:
// a client would skip an oversized record and wait for its answer forever
// (docs/protocol.md §2). A list that large is read in pages (§13).
func NewResponse(id, command string, data any) []byte {
	r := Response{Header: Header{ID: id, Type: TypeResponse}, Command: command, Success: true}
	if data != nil {
		r.Data = MustMarshal(data)
	}
	if len(r.Data) > DefaultMaxRecord-maxResponseEnvelope {
		return NewErrorResponse(id, command, Errorf(CodeInternal,
			"the answer to %.64s is %d bytes, over the %d-byte record limit; ask for it in pages (limit, cursor)", command, len(r.Data), DefaultMaxRecord))
	}
	return MustMarshal(r)
}

// maxResponseEnvelope bounds what a response adds around its data: the
// header, the command and the field names (the id and command are bounded
// by their own limits, limits.go).
const maxResponseEnvelope = 4 << 10

// NewErrorResponse builds a failed response record from err (see AsError).
func NewErrorResponse(id, command string, err error) []byte {
	return MustMarshal(Response{Header: Header{ID: id, Type: TypeResponse}, Command: command, Error: AsError(err)})
}

// WithAgentID returns rec with the routing agent_id inserted, without
// decoding the rest (the relay's hot path stays raw). When rec starts with
// its "type" field (as Shard runtimes write it) agent_id goes right after
// it, so the result still starts with "type"; otherwise it goes first. rec
// must be a JSON object that has no agent_id yet: runtimes speak the direct
// protocol, which omits it.
func WithAgentID(rec []byte, agentID string) []byte {
	return WithField(rec, AgentIDField(agentID))
}

// AgentIDField returns the encoded `"agent_id":"…"` member for WithField,
// so that a relay encodes its agent's id once, not per event.
func AgentIDField(agentID string) []byte {
	// A JSON string, not strconv.Quote: Go escapes such as \x01 or
	// \U0010ffff are not JSON. A string always encodes.
	q := MustMarshal(agentID)
	field := make([]byte, 0, len(q)+12)
	return append(append(field, `"agent_id":`...), q...)
}

// WithField inserts an encoded object member (`"key":value`) into rec as
// WithAgentID does: after a leading "type", else first.
func WithField(rec, field []byte) []byte {
	i := bytes.IndexByte(rec, '{')
	if i < 0 {
		return rec
	}
	// bytes.Join allocates the exact size without zeroing it first, which
	// matters for a multi-megabyte record.
	head, tail, pre, post := spliceAt(rec, i)
	parts := [5][]byte{head, nil, field, nil, tail}
	if pre {
		parts[1] = comma
	}
	if post {
		parts[3] = comma
	}
	return bytes.Join(parts[:], nil)
}

// AppendWithField appends WithField(rec, field) to out and returns the
// extended slice; it grows out only when len(rec)+len(field)+1 bytes do not
// fit. A relay splices a batch of records into one buffer this way. When
// rec has no '{' it is appended unchanged.
func AppendWithField(out, rec, field []byte) []byte {
	i := bytes.IndexByte(rec, '{')
	if i < 0 {
		return append(out, rec...)
	}
	head, tail, pre, post := spliceAt(rec, i)
	out = append(out, head...)
	if pre {
		out = append(out, ',')
	}
	out = append(out, field...)
	if post {
		out = append(out, ',')
	}
	return append(out, tail...)
}

var comma = []byte{','}

// spliceAt splits rec, whose first '{' is at i, for WithField: the result
// is head + member + tail, with a comma before the member (pre) or after it
// (post). After a leading plain "type" member the new member follows it;
// otherwise it comes first, and whitespace after the '{' is dropped.
func spliceAt(rec []byte, i int) (head, tail []byte, pre, post bool) {
	const typePrefix = `{"type":"`
	if bytes.HasPrefix(rec[i:], []byte(typePrefix)) {
		rest := rec[i+len(typePrefix):]
		if end := bytes.IndexByte(rest, '"'); end >= 0 && bytes.IndexByte(rest[:end], '\\') < 0 {
			cut := i + len(typePrefix) + end + 1 // just past the closing quote
			return rec[:cut], rec[cut:], true, false
		}
	}
	tail = bytes.TrimLeft(rec[i+1:], " \t\r\n")
	return rec[:i+1], tail, false, len(tail) > 0 && tail[0] != '}'
}

// PeekType returns the value of the top-level "type" field of rec cheaply
// when it is the first field (as every Shard runtime writes it), and falls
// back to a full envelope decode otherwise. It returns "" when rec has no
// readable type.
func PeekType(rec []byte) string {
	if typ, ok := peekTypeFast(rec); ok {
		return eventType(typ)
	}
	h, err := DecodeHeader(rec)
	if err != nil {
		return ""
	}
	return h.Type
}

// eventType is string(typ) without an allocation for the per-agent event
// types (§9), which a relaying agent peeks at for every runtime record.
func eventType(typ []byte) string {
	switch string(typ) { // compiled to comparisons: no conversion
	case TypeMessageDelta:
		return TypeMessageDelta
	case TypeHello:
		return TypeHello
	case TypeSync:
		return TypeSync
	case TypeStatus:
		return TypeStatus
	case TypeResponse:
		return TypeResponse
	case TypeTurnStart:
		return TypeTurnStart
	case TypeMessageComplete:
		return TypeMessageComplete
	case TypeToolCall:
		return TypeToolCall
	case TypeToolResult:
		return TypeToolResult
	case TypeTurnEnd:
		return TypeTurnEnd
	case TypeUsage:
		return TypeUsage
	case TypeCompaction:
		return TypeCompaction
	case TypeError:
		return TypeError
	case TypePermissionRequest:
		return TypePermissionRequest
	case TypePermissionResolved:
		return TypePermissionResolved
	case TypeUIRequest:
		return TypeUIRequest
	case TypeUIResolved:
		return TypeUIResolved
	case TypeModelChanged:
		return TypeModelChanged
	case TypeModeChanged:
		return TypeModeChanged
	case TypeReasoningLevelChanged:
		return TypeReasoningLevelChanged
	}
	return string(typ)
}

// peekTypeFast returns the value of a leading `{"type":"…"` member when it is
// a plain, non-empty string without escapes.
func peekTypeFast(rec []byte) ([]byte, bool) {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(rec, []byte(prefix)) {
		return nil, false
	}
	rest := rec[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return nil, false
	}
	return rest[:end], true
}
