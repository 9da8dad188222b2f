package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// rawWS is the fan-out probe's WebSocket client, reduced to what a probe
// does: one upgrade, then unmasked server frames read straight off a
// buffered socket into one reused buffer (pings answered, no compression
// offered), and masked text frames written. A general client
// (coder/websocket) locks, selects and allocates per frame; 100 of those
// probes cost more CPU than the daemon relaying to them, on the same two
// cores, so a 100-client run measured its driver. The unix probe reads raw
// JSONL the same way (protocol.Reader). Not safe for concurrent use: next
// answers pings itself.
type rawWS struct {
	nc  net.Conn
	br  *bufio.Reader
	msg []byte // the message next returns; reused
	ctl []byte // a control frame's payload; reused
}

// wsGUID is the key suffix of RFC 6455 §1.3.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// errWSClosed is a close frame from the server.
var errWSClosed = errors.New("websocket: closed by the server")

// dialRawWS upgrades a connection to rawURL (ws://host/path) offering
// the subprotocols given, without an Origin header (a non-browser client).
func dialRawWS(rawURL string, subprotocols []string, timeout time.Duration) (*rawWS, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("websocket url: %w", err)
	}
	if u.Scheme != "ws" {
		return nil, fmt.Errorf("websocket url %q: want ws://", rawURL)
	}
	nc, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			nc.Close()
		}
	}()
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{
		"Upgrade": {"websocket"}, "Connection": {"Upgrade"}, "Sec-WebSocket-Version": {"13"},
		"Sec-WebSocket-Key": {key}, "Sec-WebSocket-Protocol": {strings.Join(subprotocols, ", ")},
	}}
	_ = nc.SetDeadline(time.Now().Add(timeout))
	if err := req.Write(nc); err != nil {
		return nil, fmt.Errorf("websocket upgrade: %w", err)
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("websocket upgrade: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, fmt.Errorf("websocket upgrade: %s", resp.Status)
	}
	sum := sha1.Sum([]byte(key + wsGUID))
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != base64.StdEncoding.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("websocket upgrade: Sec-WebSocket-Accept %q does not answer the key", got)
	}
	if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
		return nil, fmt.Errorf("websocket upgrade: extension %q was not offered", ext)
	}
	_ = nc.SetDeadline(time.Time{})
	ok = true
	return &rawWS{nc: nc, br: br}, nil
}

// next returns the next text or binary message, valid until the next
// call.
func (w *rawWS) next() ([]byte, error) {
	w.msg = w.msg[:0]
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.br, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0f
		if h[0]&0x70 != 0 {
			return nil, fmt.Errorf("websocket: reserved bits set (%#x)", h[0])
		}
		if h[1]&0x80 != 0 {
			return nil, errors.New("websocket: masked frame from the server")
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > 1<<30 {
			return nil, fmt.Errorf("websocket: %d-byte frame", n)
		}
		if op >= 0x8 { // control: close, ping, pong
			w.ctl = grow(w.ctl[:0], int(n))
			if _, err := io.ReadFull(w.br, w.ctl); err != nil {
				return nil, err
			}
			switch op {
			case 0x8:
				_ = w.write(0x8, w.ctl) // the closing handshake's answer
				return nil, errWSClosed
			case 0x9:
				if err := w.write(0xA, w.ctl); err != nil {
					return nil, err
				}
			}
			continue
		}
		start := len(w.msg)
		w.msg = grow(w.msg, start+int(n))
		if _, err := io.ReadFull(w.br, w.msg[start:]); err != nil {
			return nil, err
		}
		if fin {
			return w.msg, nil
		}
	}
}

// grow returns b with length n, keeping its contents.
func grow(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	out := make([]byte, n, max(n, 2*cap(b)))
	copy(out, b)
	return out
}

// writeText sends p as one masked text frame.
func (w *rawWS) writeText(p []byte) error { return w.write(0x1, p) }

// write sends one final masked frame of opcode op.
func (w *rawWS) write(op byte, p []byte) error {
	f := []byte{0x80 | op, 0}
	switch n := len(p); {
	case n < 126:
		f[1] = 0x80 | byte(n)
	case n <= 0xffff:
		f[1] = 0x80 | 126
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	default:
		f[1] = 0x80 | 127
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	f = append(f, mask[:]...)
	for i, b := range p {
		f = append(f, b^mask[i%4])
	}
	_, err := w.nc.Write(f)
	return err
}

// Close closes the connection without a closing handshake.
func (w *rawWS) Close() error { return w.nc.Close() }
