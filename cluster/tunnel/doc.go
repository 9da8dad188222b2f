// Package tunnel carries a byte stream between two processes over NATS core
// (not JetStream): a net.Listener and a net.Conn, so that a node of a Shard
// cluster can speak the ordinary wire protocol (docs/protocol.md) to another
// node's gateway through the NATS connection it already has, with every
// rule of the gateway reused and nothing on the wire but what a unix socket
// carries.
//
// NATS core delivers a publisher's messages to a subscriber in order but
// may drop some (a slow consumer, a route reconnecting), so the stream adds
// what TCP adds to IP, in the small:
//
// # Opening
//
// A Listener subscribes to <subject>.open (in a queue group). Dial
// subscribes to a fresh inbox of its NATS connection, then sends a request
// on <subject>.open carrying that inbox and its receive window (JSON:
// {"v":1,"inbox":…,"window":…}). The listener subscribes a fresh inbox for
// the connection and answers {"inbox":…,"window":…}, or {"error":…} when it
// refuses (closing, or Options.Backlog connections waiting for Accept). A
// request that goes unanswered is repeated with the same inbox, and the
// listener answers a repeat with the connection it already made. No
// responders (nothing listens on the subject) fails Dial with ErrNoListener
// at once.
//
// # Frames
//
// Each side publishes frames to the other's inbox: a 26-byte header (kind,
// flags, seq, ack, limit; big-endian) and, for data, up to 64 KiB of
// payload. Offsets count bytes from the start of each direction's stream.
//
//   - DATA seq=offset of its first byte.
//   - ACK, which is also the keepalive; flag NACK reports a gap.
//   - FIN seq=the stream's final offset, which the FIN occupies itself;
//     flag FULL says the sender closed its reading half too.
//
// Every frame carries the sender's receive state: ack, the next offset it
// expects (cumulative), and limit, the offset the other side may send up to
// (what the sender's reader consumed plus its window).
//
// # Reliability and flow control
//
// The receiver acknowledges each data frame, drops duplicates by offset,
// and keeps frames that arrive past a gap (within its window, at most 64 of
// them) until the gap is filled; while it holds such frames its ACKs carry
// NACK. A NACK makes the sender resend the frame at the acknowledged offset
// at once (once per offset). A frame unacknowledged for
// Options.RetransmitTimeout is resent likewise, and until everything sent
// before that timeout is acknowledged each new acknowledgement resends the
// next frame: only the holes are resent, one at a time, so a deterministic
// loss pattern cannot starve a window resent whole.
//
// A Write sends while its offset is under the peer's limit and blocks
// beyond it, so a reader that does not read holds its writer after one
// window (Options.Window, 256 KiB by default) and neither side's memory
// grows: the sender keeps at most a window of unacknowledged frames, the
// receiver buffers at most a window, in order or not.
//
// # Liveness
//
// A side that sent nothing for Options.KeepAlive sends an ACK. A side that
// heard nothing for Options.PeerTimeout ends the connection with
// ErrPeerSilent: Read returns it after the data that arrived before, Write
// at once. When this side's NATS connection closes, its connections end at
// once with ErrNATSClosed and its Listeners stop accepting.
//
// # Closing
//
// CloseWrite is a half-close: the FIN goes after the data, the peer reads
// io.EOF after it, and this side reads on. Close closes both halves: Read
// and Write return net.ErrClosed at once, while the data written before and
// a FIN with FULL are still delivered in the background (retransmitted until
// acknowledged, the peer goes silent, or Options.Linger passes). Data that
// arrives after Close is acknowledged and dropped; once the peer has the
// FULL FIN its Reads end with io.EOF after the data and its Writes fail
// with ErrPeerClosed. A connection's subscription and timer goroutine end
// when nothing is left to exchange: both FINs through, the peer closed, or
// it failed.
//
// Closing a Listener stops answering opens and closes connections not
// accepted yet; accepted connections are left alone. The NATS connections
// stay the caller's.
package tunnel
