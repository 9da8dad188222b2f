package tunnel

import (
	"bytes"
	"testing"
)

// FuzzDecodeFrame: the frame decoder never panics, and what it accepts
// encodes back to the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range []frame{
		{kind: frameData, seq: 0, ack: 0, limit: 256 << 10, payload: []byte("hello")},
		{kind: frameData, seq: 1 << 40, ack: 7, limit: 9, payload: bytes.Repeat([]byte{0xff}, 300)},
		{kind: frameAck, ack: 12345, limit: 99999},
		{kind: frameAck, flags: flagNack, ack: 1, limit: 2},
		{kind: frameFin, seq: 42, ack: 3, limit: 4},
		{kind: frameFin, flags: flagFull, seq: 0},
	} {
		enc := appendFrame(nil, fr)
		f.Add(enc)
		f.Add(enc[:len(enc)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{9, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			return
		}
		if got := appendFrame(nil, fr); !bytes.Equal(got, b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", fr, got, b)
		}
		if fr.kind == frameData && (len(fr.payload) == 0 || len(fr.payload) > maxPayload) {
			t.Fatalf("accepted a data payload of %d bytes", len(fr.payload))
		}
	})
}

// FuzzDecodeOpen: the open request and reply decoders never panic, and an
// accepted request names a subject one can publish to.
func FuzzDecodeOpen(f *testing.F) {
	f.Add([]byte(`{"v":1,"inbox":"_INBOX.abc","window":262144}`))
	f.Add([]byte(`{"inbox":"_INBOX.abc.def","window":1}`))
	f.Add([]byte(`{"error":"tunnel: connection refused"}`))
	f.Add([]byte(`{"v":1,"inbox":"a.*","window":5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeOpen(b); err == nil && (!validInbox(r.Inbox) || r.Window == 0) {
			t.Fatalf("accepted %+v", r)
		}
		if r, err := decodeReply(b); err == nil && r.Error == "" && !validInbox(r.Inbox) {
			t.Fatalf("accepted reply %+v", r)
		}
	})
}
