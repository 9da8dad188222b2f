//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
)

// Flood size of TestSlowConsumer: 20 MB, well over the 8 MiB outbound cap
// plus what socket buffers hold for a client that does not read (its
// receive buffer is kept small), and under the 32 MiB record limit, which
// the flood's message_complete must pass.
const (
	floodN    = 20000
	floodSize = 1024
	// outboundCap is the daemon's default per-connection cap
	// (gateway.outbound_max_bytes).
	outboundCap = 8 << 20
)

// TestSlowConsumer: while an agent floods, unix and WebSocket clients
// attached to it stop reading. Per docs/protocol.md §13 (P2) each is dropped
// once its outbound queue passes the cap (a fatal "slow consumer" error
// when it can still be written, then the close), while a client that reads
// gets every delta and the whole message; and the daemon's memory peak with
// slow consumers exceeds the peak of the same flood without them by no
// more than what their caps allow (plus slack).
func TestSlowConsumer(t *testing.T) {
	home := newHome(t)
	d := startDaemon(t, home, daemonOpts{})
	ctl := d.dial()
	record(ctl)
	fast := dialFast(t, d)
	// Each flood goes to a fresh agent: a conversation holding one flood
	// would not fit the next in the sim's context window, nor its sync
	// under the record limit.
	newAgent := func() string {
		id, _ := createAgent(t, ctl)
		fast.attach(t, id)
		return id
	}

	// A flood with only a reading client: the memory baseline.
	a := newAgent()
	waitAttachments(t, d, 1)
	fast.flood(t, a)
	base := hwm(t, d)
	t.Logf("daemon VmHWM after a %d MB flood to one reader: %d MiB", floodN*floodSize/1000000, base>>20)

	// The same flood with three clients that never read.
	a = newAgent()
	slow := []interface{ check(*testing.T) }{dialSlowUnix(t, d, a), dialSlowUnix(t, d, a), dialSlowWS(t, d, ticket(t, ctl), a)}
	waitAttachments(t, d, 5)
	fast.flood(t, a)
	eventually(t, callTimeout, "the slow consumers dropped", func() bool {
		m := d.mustMetrics()
		return m[`shard_slow_consumers_dropped_total{transport="unix"}`] == 2 &&
			m[`shard_slow_consumers_dropped_total{transport="websocket"}`] == 1
	})
	waitAttachments(t, d, 2)
	for _, s := range slow {
		s.check(t)
	}
	peak := hwm(t, d)
	t.Logf("daemon VmHWM after a flood with slow consumers: %d MiB", peak>>20)
	// Each slow consumer holds at most its queue (the cap) and the batch its
	// blocked writer took (at most the cap again).
	if limit := base + int64(len(slow))*2*outboundCap + 32<<20; peak > limit {
		t.Errorf("daemon memory peak %d MiB with %d slow consumers, more than the reader-only peak %d MiB + twice their caps + 32 MiB slack: something buffers without bound",
			peak>>20, len(slow), base>>20)
	}
	m := d.mustMetrics()
	if got := m[`shard_connections{transport="unix"}`]; got != 2 { // ctl and fast
		t.Errorf("unix connections gauge %v after the drops, want 2", got)
	}
	if got := m[`shard_connections{transport="websocket"}`]; got != 0 {
		t.Errorf("websocket connections gauge %v after the drop, want 0", got)
	}
}

// hwm is the daemon's peak resident set size so far.
func hwm(t *testing.T, d *daemon) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(d.pid()), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func waitAttachments(t *testing.T, d *daemon, n float64) {
	t.Helper()
	eventually(t, callTimeout, fmt.Sprintf("%v attachments", n), func() bool {
		return d.mustMetrics()["shard_attachments"] == n
	})
}

// fastReader is a unix client that reads as fast as it can and keeps
// counts, not records: it must keep up with a flood.
type fastReader struct {
	c    net.Conn
	recs chan fastRec
	n    int // commands sent
}

// fastRec is what the reader noticed in one record worth telling.
type fastRec struct {
	typ     string
	id      string // response id
	success bool
	text    int // message_complete: text length
	deltas  int // message_delta records since the previous fastRec
	invalid string
	err     error
}

func dialFast(t *testing.T, d *daemon) *fastReader {
	t.Helper()
	c, err := net.Dial("unix", d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &fastReader{c: c, recs: make(chan fastRec, 64)}
	go f.read()
	return f
}

// attach attaches the reader to agentID and waits for its sync.
func (f *fastReader) attach(t *testing.T, agentID string) {
	t.Helper()
	f.n++
	id := fmt.Sprintf("att-%d", f.n)
	f.send(t, fmt.Sprintf(`{"id":%q,"type":"agent.attach","agent_id":%q}`, id, agentID))
	f.wait(t, "attach response", func(r fastRec) bool { return r.typ == protocol.TypeResponse && r.id == id && r.success })
	f.wait(t, "sync", func(r fastRec) bool { return r.typ == protocol.TypeSync })
}

func (f *fastReader) send(t *testing.T, line string) {
	t.Helper()
	if _, err := f.c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
}

func (f *fastReader) read() {
	rd := protocol.NewReader(f.c, 64<<20)
	deltas := 0
	for {
		rec, err := rd.Next()
		if err != nil {
			f.recs <- fastRec{err: err, deltas: deltas}
			close(f.recs)
			return
		}
		if bytes.HasPrefix(rec, []byte(`{"type":"message_delta"`)) && rec[len(rec)-1] == '}' {
			deltas++ // the hot path: no decoding
			continue
		}
		r := fastRec{typ: protocol.PeekType(rec), deltas: deltas}
		deltas = 0
		switch {
		case r.typ == protocol.TypeMessageComplete:
			// Megabytes: not decoded (the test binary may be race
			// instrumented). The flood's text is letters only, so the text
			// field ends at the next quote.
			if i := bytes.Index(rec, []byte(`"text":"`)); i >= 0 && rec[len(rec)-1] == '}' {
				r.text = bytes.IndexByte(rec[i+8:], '"')
			} else {
				r.invalid = "message_complete without text: " + string(rec[:min(len(rec), 200)])
			}
		case !validRecord(rec):
			r.invalid = string(rec[:min(len(rec), 200)])
		case r.typ == protocol.TypeResponse:
			var resp protocol.Response
			_ = json.Unmarshal(rec, &resp)
			r.id, r.success = resp.ID, resp.Success
		case r.typ == protocol.TypeError:
			r.invalid = "error event: " + string(rec)
		}
		f.recs <- r
	}
}

// wait reads noticed records until match, failing on anything invalid.
func (f *fastReader) wait(t *testing.T, what string, match func(fastRec) bool) fastRec {
	t.Helper()
	timeout := time.NewTimer(2 * callTimeout)
	defer timeout.Stop()
	for {
		select {
		case r, ok := <-f.recs:
			if !ok || r.err != nil {
				t.Fatalf("reading client's connection ended before %s: %v", what, r.err)
			}
			if r.invalid != "" {
				t.Fatalf("reading client got %s", r.invalid)
			}
			if match(r) {
				return r
			}
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// flood prompts agentID to stream floodN deltas and checks this client got
// every one and the whole message.
func (f *fastReader) flood(t *testing.T, agentID string) {
	t.Helper()
	f.n++
	id := fmt.Sprintf("flood-%d", f.n)
	f.send(t, fmt.Sprintf(`{"id":%q,"type":"prompt","agent_id":%q,"message":"sim: flood %d %d"}`, id, agentID, floodN, floodSize))
	deltas := 0
	var text int
	f.wait(t, "turn_end of the flood", func(r fastRec) bool {
		deltas += r.deltas
		if r.typ == protocol.TypeResponse && r.id == id && !r.success {
			t.Fatalf("flood prompt refused")
		}
		if r.typ == protocol.TypeMessageComplete {
			text = r.text
		}
		return r.typ == protocol.TypeTurnEnd
	})
	if deltas != floodN || text != floodN*floodSize {
		t.Fatalf("flood to %s: the reading client got %d deltas and a %d-byte message, want %d and %d", agentID, deltas, text, floodN, floodN*floodSize)
	}
}

// slowUnix is an attached unix client that reads nothing until check.
type slowUnix struct {
	c *net.UnixConn
}

func dialSlowUnix(t *testing.T, d *daemon, agentID string) *slowUnix {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.socket(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, `{"id":"att","type":"agent.attach","agent_id":%q}`+"\n", agentID); err != nil {
		t.Fatal(err)
	}
	return &slowUnix{c: c}
}

// check reads what the daemon managed to send before it dropped the
// connection: whole records, valid, no end of the turn; a last record may be
// cut by the close; a fatal slow-consumer error, if it got through, is last.
func (s *slowUnix) check(t *testing.T) {
	t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(callTimeout))
	b, err := readAll(s.c, callTimeout)
	if err != nil && !isEOF(err) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("slow unix consumer: %v, want the daemon to close the connection", err)
	}
	lines := bytes.Split(b, []byte("\n"))
	lines = lines[:len(lines)-1] // the part after the last newline is cut short, or empty
	deltas := 0
	for i, l := range lines {
		if !validRecord(l) {
			t.Fatalf("slow consumer got an invalid record %.200q", l)
		}
		switch protocol.PeekType(l) {
		case protocol.TypeMessageDelta:
			deltas++
		case protocol.TypeTurnEnd:
			t.Fatalf("the slow consumer got the whole turn; it was never dropped")
		case protocol.TypeError:
			var e protocol.ErrorEvent
			_ = json.Unmarshal(l, &e)
			if e.Code != protocol.CodeInternal || e.Message != "slow consumer" || !e.Fatal || i != len(lines)-1 {
				t.Fatalf("error event %s (record %d of %d), want the last record to be the fatal slow-consumer error", l, i+1, len(lines))
			}
		}
	}
	if deltas >= floodN {
		t.Fatalf("the slow consumer got all %d deltas", deltas)
	}
	t.Logf("slow unix consumer: %d records (%d deltas) before the drop", len(lines), deltas)
}

// slowWS is an attached WebSocket client that reads nothing until check.
type slowWS struct {
	c *websocket.Conn
}

func dialSlowWS(t *testing.T, d *daemon, tk, agentID string) *slowWS {
	t.Helper()
	// A small receive buffer: TCP autotuning would otherwise let the
	// kernel hold megabytes for a peer that does not read.
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
		return errors.Join(err, serr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, _, err := websocket.Dial(ctx, d.wsURL(), &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TicketProtocolPrefix + tk},
		HTTPClient:   &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}},
	})
	if err != nil {
		t.Fatalf("websocket dial: %v", err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	r := &rawWS{c: c}
	if err := r.send([]byte(fmt.Sprintf(`{"id":"att","type":"agent.attach","agent_id":%q}`, agentID))); err != nil {
		t.Fatal(err)
	}
	return &slowWS{c: r.c}
}

func (s *slowWS) check(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	n := 0
	// The daemon drops a slow WebSocket consumer without a close handshake,
	// possibly in the middle of a frame, and coder/websocket (v1.8.15)
	// returns a frame cut right after its header as a whole, empty one:
	// reading its payload ends in io.EOF, which its message reader passes
	// on and io.ReadAll in Read takes for the message's end. So, as the unix
	// check's cut-short last line, an invalid frame is accepted when it is
	// the last one: any frame after it fails.
	var cut []byte
	for {
		_, b, err := s.c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("slow websocket consumer still open after %d frames", n)
			}
			break
		}
		if cut != nil {
			t.Fatalf("slow websocket consumer got an invalid frame %.200q before frame %d", cut, n+1)
		}
		n++
		if !validRecord(b) {
			cut = b
			continue
		}
		if protocol.PeekType(b) == protocol.TypeTurnEnd {
			t.Fatalf("the slow websocket consumer got the whole turn; it was never dropped")
		}
	}
	t.Logf("slow websocket consumer: %d frames before the drop", n)
}
