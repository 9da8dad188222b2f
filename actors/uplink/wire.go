package uplink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// wireVersion is the version of the link's lines; a hello of another
// version is refused.
const wireVersion = 1

// maxLine bounds one line of a link: a request event (a permission's
// input may be a whole file the tool writes) within a wire record's bound.
const maxLine = 32 << 20

// Kinds of frame.
const (
	// From the child's node (the dialer) to the ancestor's node.
	kindHello    = "hello"    // {v, node}: first, once
	kindDelegate = "delegate" // {rid, agent, rec, node?}: surface rec at agent; node hosts the child
	kindResolved = "resolved" // {rid, rec?}: the request closed (rec: its event)
	kindCheck    = "check"    // {n, rid, origin}: is origin an interactive client of the holder?
	kindSteer    = "steer"    // {rid, agent, run, msg}: a parent's strict steer of run, whose child agent runs on the acceptor
	kindRecord   = "record"   // {rid, agent, run, status, turn?}: a person's steer of run's child here, to record at the run
	// From the ancestor's node back.
	kindResult   = "result"   // {rid, ok}: accepted (ok) or nobody to answer
	kindChecked  = "checked"  // {n, ok}: the answer to check n
	kindSteered  = "steered"  // {rid, status, turn?}: how steer rid resolved (injected | conflict)
	kindRecorded = "recorded" // {rid}: steer rid is recorded against its run (or cannot be)
)

// frame is one line of a link, JSON. Only the fields of its kind are set.
type frame struct {
	T      string          `json:"t"`
	V      int             `json:"v,omitempty"`
	Node   string          `json:"node,omitempty"`
	RID    string          `json:"rid,omitempty"`
	Agent  string          `json:"agent,omitempty"`
	Rec    json.RawMessage `json:"rec,omitempty"`
	N      uint64          `json:"n,omitempty"`
	Origin string          `json:"origin,omitempty"`
	OK     bool            `json:"ok,omitempty"`
	Run    string          `json:"run,omitempty"`
	Msg    string          `json:"msg,omitempty"`
	Status string          `json:"status,omitempty"`
	Turn   string          `json:"turn,omitempty"`
}

// errFrame marks a line the link refuses; the link ends with it.
var errFrame = errors.New("uplink: bad frame")

// encode is the frame's line, newline included.
func (f frame) encode() []byte {
	b, _ := json.Marshal(f) // strings, numbers and a raw object already valid
	return append(b, '\n')
}

// decodeFrame reads one line (without its newline): one object of a known
// kind with the fields that kind needs, nothing else.
func decodeFrame(line []byte) (frame, error) {
	var f frame
	if len(line) > maxLine {
		return f, fmt.Errorf("%w: %d bytes", errFrame, len(line))
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return frame{}, fmt.Errorf("%w: %w", errFrame, err)
	}
	if dec.More() {
		return frame{}, fmt.Errorf("%w: trailing data", errFrame)
	}
	bad := func(what string) (frame, error) { return frame{}, fmt.Errorf("%w: %s %s", errFrame, f.T, what) }
	if len(f.RID) > 256 || len(f.Agent) > 256 || len(f.Origin) > 256 || len(f.Node) > 64 ||
		len(f.Run) > 256 || len(f.Turn) > 256 || len(f.Status) > 16 {
		return bad("field too long")
	}
	switch f.T {
	case kindHello:
		if f.V != wireVersion || f.Node == "" {
			return bad(fmt.Sprintf("version %d node %q", f.V, f.Node))
		}
	case kindDelegate:
		if f.RID == "" || f.Agent == "" || !isObject(f.Rec) {
			return bad("without rid, agent or rec")
		}
	case kindResolved:
		if f.RID == "" || (f.Rec != nil && !isObject(f.Rec)) {
			return bad("without rid")
		}
	case kindCheck:
		if f.RID == "" {
			return bad("without rid")
		}
	case kindResult:
		if f.RID == "" {
			return bad("without rid")
		}
	case kindChecked:
	case kindSteer:
		if f.RID == "" || f.Agent == "" || f.Run == "" {
			return bad("without rid, agent or run")
		}
	case kindSteered:
		if f.RID == "" || (f.Status != protocol.SteerInjected && f.Status != protocol.SteerConflict) {
			return bad("without rid or status")
		}
	case kindRecord:
		if f.RID == "" || f.Agent == "" || f.Run == "" || (f.Status != protocol.SteerInjected && f.Status != protocol.SteerConflict) {
			return bad("without rid, agent, run or status")
		}
	case kindRecorded:
		if f.RID == "" {
			return bad("without rid")
		}
	default:
		return bad("unknown kind")
	}
	return f, nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 1 && raw[0] == '{'
}
