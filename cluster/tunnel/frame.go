package tunnel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The frame kinds (the first byte of a frame).
const (
	frameData byte = 1 // payload bytes at offset seq
	frameAck  byte = 2 // acknowledgement, window update and keepalive
	frameFin  byte = 3 // the sender's stream ends at offset seq
)

// Frame flags (the second byte).
const (
	// flagNack on an ACK says the receiver saw a gap after ack: the sender
	// retransmits at once instead of waiting for its timer.
	flagNack byte = 1
	// flagFull on a FIN says the sender closed its reading half too
	// (Close, not CloseWrite): the receiver's writes have nowhere to go.
	flagFull byte = 1
)

// headerLen is the fixed header of every frame: kind, flags, seq, ack,
// limit.
const headerLen = 2 + 8 + 8 + 8

// maxPayload bounds one data frame's payload.
const maxPayload = 64 << 10

// maxOOO bounds how many frames past a gap a receiver keeps; more are
// dropped and resent later.
const maxOOO = 64

// frame is one message published to the peer's inbox. Every frame carries
// the sender's receive state (ack, limit), so data frames acknowledge the
// other direction for free and any frame is a keepalive.
type frame struct {
	kind  byte
	flags byte
	// seq is the stream offset of a data frame's first byte, or the final
	// offset of a FIN (which occupies one offset of its own). Zero on an
	// ACK.
	seq uint64
	// ack is the next offset the sender expects from the receiver: every
	// byte (and a FIN) below it arrived.
	ack uint64
	// limit is the offset the receiver may send up to, not including it:
	// what the sender's reader consumed plus its window.
	limit   uint64
	payload []byte
}

// errFrame is why decodeFrame refused a message.
var errFrame = errors.New("tunnel: malformed frame")

// appendFrame appends f's encoding to dst.
func appendFrame(dst []byte, f frame) []byte {
	dst = append(dst, f.kind, f.flags)
	dst = binary.BigEndian.AppendUint64(dst, f.seq)
	dst = binary.BigEndian.AppendUint64(dst, f.ack)
	dst = binary.BigEndian.AppendUint64(dst, f.limit)
	return append(dst, f.payload...)
}

// decodeFrame parses one message. The payload aliases b.
func decodeFrame(b []byte) (frame, error) {
	if len(b) < headerLen {
		return frame{}, fmt.Errorf("%w: %d bytes", errFrame, len(b))
	}
	f := frame{
		kind:  b[0],
		flags: b[1],
		seq:   binary.BigEndian.Uint64(b[2:]),
		ack:   binary.BigEndian.Uint64(b[10:]),
		limit: binary.BigEndian.Uint64(b[18:]),
	}
	payload := b[headerLen:]
	switch f.kind {
	case frameData:
		if len(payload) == 0 || len(payload) > maxPayload {
			return frame{}, fmt.Errorf("%w: data payload of %d bytes", errFrame, len(payload))
		}
		if f.flags != 0 {
			return frame{}, fmt.Errorf("%w: data flags %#x", errFrame, f.flags)
		}
		if f.seq+uint64(len(payload)) < f.seq {
			return frame{}, fmt.Errorf("%w: data offset overflows", errFrame)
		}
		f.payload = payload
	case frameAck:
		if len(payload) != 0 || f.flags&^flagNack != 0 || f.seq != 0 {
			return frame{}, fmt.Errorf("%w: ack", errFrame)
		}
	case frameFin:
		if len(payload) != 0 || f.flags&^flagFull != 0 || f.seq == ^uint64(0) {
			return frame{}, fmt.Errorf("%w: fin", errFrame)
		}
	default:
		return frame{}, fmt.Errorf("%w: kind %d", errFrame, f.kind)
	}
	return f, nil
}

// openVersion is the version of the open exchange this package speaks.
const openVersion = 1

// openRequest is the body of a request on <subject>.open.
type openRequest struct {
	Version int    `json:"v"`
	Inbox   string `json:"inbox"`  // where the listener publishes frames
	Window  uint64 `json:"window"` // the dialer's receive window
}

// openReply is the listener's answer: its per-connection inbox and window,
// or why it refused.
type openReply struct {
	Inbox  string `json:"inbox,omitempty"`
	Window uint64 `json:"window,omitempty"`
	Error  string `json:"error,omitempty"`
}

// decodeOpen parses and checks an open request.
func decodeOpen(b []byte) (openRequest, error) {
	var r openRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return openRequest{}, fmt.Errorf("%w: open: %w", errFrame, err)
	}
	if r.Version != openVersion {
		return openRequest{}, fmt.Errorf("%w: open version %d", errFrame, r.Version)
	}
	if !validInbox(r.Inbox) || r.Window == 0 {
		return openRequest{}, fmt.Errorf("%w: open inbox %q window %d", errFrame, r.Inbox, r.Window)
	}
	return r, nil
}

// decodeReply parses and checks the listener's answer.
func decodeReply(b []byte) (openReply, error) {
	var r openReply
	if err := json.Unmarshal(b, &r); err != nil {
		return openReply{}, fmt.Errorf("%w: open reply: %w", errFrame, err)
	}
	if r.Error == "" && (!validInbox(r.Inbox) || r.Window == 0) {
		return openReply{}, fmt.Errorf("%w: open reply inbox %q window %d", errFrame, r.Inbox, r.Window)
	}
	return r, nil
}

// validInbox reports whether s is a literal NATS subject one can publish
// to: tokens separated by dots, no wildcards, no white space.
func validInbox(s string) bool {
	if s == "" || len(s) > 1024 {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}
