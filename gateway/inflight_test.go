package gateway

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
)

// TestHalfCloseGetsEveryResponse: a client that sends its commands and
// then shutdown(SHUT_WR) still gets every response, those the registry
// answers after the end of its input included, and only then EOF (issue
// 14 item 2). The probe registry answers only once the reader has met the
// EOF: the old connection was gone by then.
func TestHalfCloseGetsEveryResponse(t *testing.T) {
	t.Parallel()
	eof := newSignal()
	tg := startGateway(t, Config{hooks: &testHooks{readEOF: func(uint64) { eof.fire() }}})
	c := tg.dialRaw(t)
	if r := c.mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v, want hello", r)
	}
	c.send(t,
		`{"id":"a","type":"agent.list"}`,
		`{"id":"b","type":"agent.create","cwd":"/w"}`,
		`{"id":"c","type":"nope"}`,                              // answered by the connection itself
		"{\"id\":\"d\",\"type\":\"agent.list\",\"x\":\"\xff\"}", // not UTF-8: INVALID_REQUEST
		`{"id":"e","type":"ws.ticket"}`,                         // a local command
		`{"id":"f","type":"daemon.status"}`)
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	eof.wait(t, "the reader to meet EOF")
	for _, want := range []string{"a", "b", "f"} {
		cmd := tg.next(t)
		if cmd.Header.ID != want {
			t.Fatalf("registry got %q, want %q", cmd.Header.ID, want)
		}
		answer(cmd)
	}
	got := map[string]record{}
	for {
		r, err := c.read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read: %v (got %v)", err, got)
		}
		if r.Type == protocol.TypeResponse {
			got[r.ID] = r
		}
	}
	for _, id := range []string{"a", "b", "e", "f"} {
		if r, ok := got[id]; !ok || !r.Success {
			t.Errorf("response %q: %+v (present %v), want success", id, r, ok)
		}
	}
	for _, id := range []string{"c", "d"} {
		if r, ok := got[id]; !ok || r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest {
			t.Errorf("response %q: %+v (present %v), want INVALID_REQUEST", id, r, ok)
		}
	}
	if len(got) != 6 {
		t.Errorf("%d responses, want 6: %v", len(got), got)
	}
}

// TestInboundBackpressure: a client writing large records without reading
// is not read past the per-connection bound: the account
// of commands read and unanswered never exceeds it, the reader pauses, and
// once the registry answers, every command is answered, in order.
func TestInboundBackpressure(t *testing.T) {
	t.Parallel()
	const (
		maxBytes   = 1 << 20
		maxRecords = 8
		records    = 24
		pad        = 300 << 10 // three fit under maxBytes, a fourth does not
	)
	var (
		mu          sync.Mutex
		peakRecords int
		peakBytes   int
	)
	paused := newSignal()
	tg := startGateway(t, Config{Inbound: InboundLimits{MaxBytes: maxBytes, MaxRecords: maxRecords}, hooks: &testHooks{
		inflight: func(_ uint64, r, b int) {
			mu.Lock()
			peakRecords, peakBytes = max(peakRecords, r), max(peakBytes, b)
			mu.Unlock()
		},
		paused: func(uint64) { paused.fire() },
	}})
	c := tg.dialRaw(t)
	if r := c.mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v, want hello", r)
	}
	// An unknown member pads each record: agent.list takes no fields and
	// the decoder ignores unknown ones.
	filler := strings.Repeat("x", pad)
	wrote := make(chan error, 1)
	go func() {
		for i := range records {
			if _, err := fmt.Fprintf(c, `{"id":"n%d","type":"agent.list","pad":"%s"}`+"\n", i, filler); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	paused.wait(t, "the reader to pause")
	// Nothing is answered yet: the reader stopped with three records in
	// flight and the socket pushes back on the writer.
	mu.Lock()
	if peakRecords != 3 || peakBytes > maxBytes {
		t.Errorf("in flight while paused: %d records, %d bytes; want 3 records within %d bytes", peakRecords, peakBytes, maxBytes)
	}
	mu.Unlock()
	for i := range records {
		cmd := tg.next(t)
		if want := fmt.Sprintf("n%d", i); cmd.Header.ID != want {
			t.Fatalf("registry got %q, want %q", cmd.Header.ID, want)
		}
		answer(cmd)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	for i := range records {
		r := c.mustRead(t)
		if want := fmt.Sprintf("n%d", i); r.Type != protocol.TypeResponse || r.ID != want || !r.Success {
			t.Fatalf("record %d: %+v, want the success response %q", i, r, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if peakRecords > maxRecords || peakBytes > maxBytes {
		t.Fatalf("peak in flight %d records, %d bytes; bound %d, %d", peakRecords, peakBytes, maxRecords, maxBytes)
	}
	if n := counterValue(t, tg.g.cfg.Metrics, "shard_inbound_paused_total", "unix"); n < 1 {
		t.Fatalf("shard_inbound_paused_total{unix} = %v, want ≥ 1", n)
	}
}

// TestInflightRecordBound: small records are bounded by count.
func TestInflightRecordBound(t *testing.T) {
	t.Parallel()
	f := newInflight(InboundLimits{MaxBytes: 1 << 20, MaxRecords: 2}, nil)
	stop := make(chan struct{})
	if !f.admit("a", 10, stop, nil) || !f.admit("a", 10, stop, nil) {
		t.Fatal("admit under the bound failed")
	}
	blocked := make(chan bool, 1)
	go func() { blocked <- f.admit("b", 10, stop, nil) }()
	f.observe(protocol.NewResponse("zzz", "agent.list", nil)) // not in flight: no release
	f.observe([]byte(`{"type":"agent_spawned","id":"a"}`))    // not a response
	f.observe(protocol.NewResponse("a", "agent.list", nil))   // releases the first "a"
	if !<-blocked {
		t.Fatal("admit after a release failed")
	}
	f.mu.Lock()
	r, b := f.records, f.bytes
	f.mu.Unlock()
	if r != 2 || b != 20 {
		t.Fatalf("in flight %d records, %d bytes; want 2, 20", r, b)
	}
	// A single record larger than MaxBytes is taken when alone.
	g := newInflight(InboundLimits{MaxBytes: 100, MaxRecords: 4}, nil)
	if !g.admit("", 1000, stop, nil) {
		t.Fatal("a lone oversized record was refused")
	}
	close(stop)
	if g.admit("x", 1, stop, nil) {
		t.Fatal("admit past the bound after stop")
	}
	for _, tc := range []struct{ rec, id string }{
		{`{"type":"response","id":"a\"b","command":"x","success":true}`, `a"b`},
		{`{"type":"response","command":"x","success":false}`, ""},
		{`{"type":"response","id":"plain","agent_id":"a-1"}`, "plain"},
		{`{"type":"response","agent_id":"a-1","id":"late"}`, "late"},
		{`{"type":"response","command":"x","id":"later"}`, "later"},
	} {
		if id, ok := responseID([]byte(tc.rec)); !ok || id != tc.id {
			t.Errorf("responseID(%s) = %q, %v; want %q", tc.rec, id, ok, tc.id)
		}
	}
}

// TestWebSocketInvalidUTF8Closes1007: a text frame that is not UTF-8 ends
// the connection with close code 1007 (docs/protocol.md §2.2), instead of being
// decoded with its bad bytes replaced.
func TestWebSocketInvalidUTF8Closes1007(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, Config{})
	ws, ctx := tg.dialWS(t)
	if err := ws.Write(ctx, websocket.MessageText, []byte("{\"id\":\"x\",\"type\":\"agent.list\",\"n\":\"\xff\"}")); err != nil {
		t.Fatal(err)
	}
	_, data, err := ws.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusInvalidFramePayloadData {
		t.Fatalf("read after an invalid frame: %q, %v (close status %v); want close 1007", data, err, code)
	}
}
