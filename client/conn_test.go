package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// dial connects to s and closes the Conn at cleanup.
func dial(t *testing.T, s *fakeServer) (*Conn, *fakeConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := Dial(ctx, s.path)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, s.conn()
}

func TestDialStoresHello(t *testing.T) {
	s := newFakeServer(t)
	c, _ := dial(t, s)
	h := c.Hello()
	if h.Type != protocol.TypeHello || h.ProtocolVersion != protocol.Version || h.ServerVersion != "fake-1" {
		t.Fatalf("Hello() = %+v", h)
	}
	if len(h.Capabilities) != 1 || h.Capabilities[0] != "streaming-deltas" {
		t.Fatalf("capabilities = %v", h.Capabilities)
	}
	select {
	case ev := <-c.Events():
		t.Fatalf("hello must not be delivered on Events, got %s", ev.Raw)
	default:
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err() on an open conn = %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	tests := []struct {
		name  string
		hello []byte
		check func(t *testing.T, err error)
	}{
		{
			name:  "first record is not hello",
			hello: protocol.MustMarshal(statusEvent("a", protocol.StatusIdle)),
			check: func(t *testing.T, err error) {
				if protocol.CodeOf(err) != protocol.CodeProtocolError {
					t.Fatalf("err = %v, want PROTOCOL_ERROR", err)
				}
			},
		},
		{
			name: "major version mismatch",
			hello: protocol.MustMarshal(protocol.Hello{
				Header: protocol.Header{Type: protocol.TypeHello}, ProtocolVersion: "9.0.0",
			}),
			check: func(t *testing.T, err error) {
				if protocol.CodeOf(err) != protocol.CodeProtocolError {
					t.Fatalf("err = %v, want PROTOCOL_ERROR", err)
				}
			},
		},
		{
			name: "refused at the daemon's connection cap",
			hello: protocol.MustMarshal(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError},
				Code: protocol.CodeInternal, Message: "too many connections (gateway.max_connections=1)", Fatal: true}),
			check: func(t *testing.T, err error) {
				if protocol.CodeOf(err) != protocol.CodeInternal || !strings.Contains(err.Error(), "too many connections") {
					t.Fatalf("err = %v, want the daemon's INTERNAL_ERROR refusal", err)
				}
			},
		},
		{
			name:  "no hello before ctx ends",
			hello: nil,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want DeadlineExceeded", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeServerHello(t, tt.hello)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			c, err := Dial(ctx, s.path)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			tt.check(t, err)
		})
	}
}

func TestDialMissingSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "nope.sock")
	_, err := Dial(context.Background(), path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist in chain", err)
	}
}

func TestRequestWithInterleavedEvents(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)

	type reply struct {
		resp *protocol.Response
		err  error
	}
	got := make(chan reply, 1)
	msg := agentList()
	go func() {
		resp, err := c.Request(context.Background(), msg)
		got <- reply{resp, err}
	}()

	h, rec := fc.next()
	if h.Type != protocol.TypeAgentList || h.ID == "" {
		t.Fatalf("server got %s", rec)
	}
	fc.send(statusEvent("agent-1", protocol.StatusStreaming))
	fc.send(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart, AgentID: "agent-1"}, TurnID: "t1"})
	fc.respond(h, protocol.AgentListData{Agents: []protocol.AgentInfo{{AgentID: "agent-1", Cwd: "/x"}}})
	fc.send(statusEvent("agent-1", protocol.StatusIdle))

	r := <-got
	if r.err != nil {
		t.Fatalf("Request: %v", r.err)
	}
	if r.resp.ID != h.ID || r.resp.Command != protocol.TypeAgentList || !r.resp.Success {
		t.Fatalf("response = %+v", r.resp)
	}
	if msg.ID != h.ID {
		t.Fatalf("Request did not record the assigned id on msg: %q vs %q", msg.ID, h.ID)
	}

	ev := nextEvent(t, c)
	if st, ok := ev.Msg.(*protocol.Status); !ok || st.Status != protocol.StatusStreaming || st.AgentID != "agent-1" {
		t.Fatalf("event 1 = %T %s", ev.Msg, ev.Raw)
	}
	ev = nextEvent(t, c)
	if ts, ok := ev.Msg.(*protocol.TurnStart); !ok || ts.TurnID != "t1" {
		t.Fatalf("event 2 = %T %s", ev.Msg, ev.Raw)
	}
	ev = nextEvent(t, c)
	if st, ok := ev.Msg.(*protocol.Status); !ok || st.Status != protocol.StatusIdle {
		t.Fatalf("event 3 = %T %s", ev.Msg, ev.Raw)
	}
}

func TestOutOfOrderResponses(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)

	var wg sync.WaitGroup
	results := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var data protocol.AgentCreateData
			errs[i] = c.Call(context.Background(), &protocol.AgentCreate{
				Header: protocol.Header{Type: protocol.TypeAgentCreate, ID: fmt.Sprintf("req-%d", i)},
				Cwd:    fmt.Sprintf("/cwd/%d", i),
			}, &data)
			results[i] = data.AgentID
		}()
	}
	h1, _ := fc.next()
	h2, _ := fc.next()
	// Answer the second first.
	for _, h := range []protocol.Header{h2, h1} {
		fc.respond(h, protocol.AgentCreateData{AgentID: "agent-for-" + h.ID})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if want := fmt.Sprintf("agent-for-req-%d", i); results[i] != want {
			t.Fatalf("call %d got %q, want %q", i, results[i], want)
		}
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	// The server answers each command with an event and then its response,
	// echoing the id in the data.
	fc.serve(func(h protocol.Header, _ []byte) {
		fc.send(statusEvent("agent-"+h.ID, protocol.StatusIdle))
		fc.respond(h, protocol.AgentCreateData{AgentID: h.ID})
	})

	const n = 64
	drained := make(chan int)
	go func() {
		count := 0
		for range c.Events() {
			count++
		}
		drained <- count
	}()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := agentList()
			var data protocol.AgentCreateData
			if err := c.Call(context.Background(), msg, &data); err != nil {
				errs <- err
				return
			}
			if data.AgentID != msg.ID {
				errs <- fmt.Errorf("request %s got response for %s", msg.ID, data.AgentID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.Close()
	if count := <-drained; count != n {
		t.Fatalf("events = %d, want %d", count, n)
	}
}

func TestFailedResponse(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	fc.serve(func(h protocol.Header, _ []byte) {
		fc.sendRaw(protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(protocol.CodeNotFound, "no agent x")))
	})
	resp, err := c.Request(context.Background(), &protocol.AgentAttach{
		Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: "x"},
	})
	if resp == nil || resp.Success {
		t.Fatalf("resp = %+v", resp)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeNotFound || pe.Message != "no agent x" {
		t.Fatalf("err = %#v", err)
	}
	if err := c.Call(context.Background(), agentList(), &protocol.AgentListData{}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("Call err = %v", err)
	}
}

func TestUnclaimedResponseGoesToEvents(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	fc.sendRaw(protocol.NewResponse("nobody", protocol.TypeAgentList, nil))
	ev := nextEvent(t, c)
	resp, ok := ev.Msg.(*protocol.Response)
	if !ok || resp.ID != "nobody" {
		t.Fatalf("event = %T %s", ev.Msg, ev.Raw)
	}
}

func TestUnknownAndMalformedEvents(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	fc.sendRaw([]byte(`{"type":"brand_new_event","agent_id":"a","x":1}`))
	fc.sendRaw([]byte(`{"type":"status","status":42}`))
	fc.sendRaw([]byte(`not json`))

	ev := nextEvent(t, c)
	u, ok := ev.Msg.(*protocol.Unknown)
	if !ok || u.Type != "brand_new_event" || u.AgentID != "a" || string(ev.Raw) != `{"type":"brand_new_event","agent_id":"a","x":1}` {
		t.Fatalf("unknown event = %T %+v", ev.Msg, ev.Msg)
	}
	ev = nextEvent(t, c)
	if u, ok := ev.Msg.(*protocol.Unknown); !ok || u.Type != protocol.TypeStatus {
		t.Fatalf("malformed status = %T %+v", ev.Msg, ev.Msg)
	}
	ev = nextEvent(t, c)
	if _, ok := ev.Msg.(*protocol.Unknown); !ok || string(ev.Raw) != "not json" {
		t.Fatalf("garbage = %T %s", ev.Msg, ev.Raw)
	}
}

func TestSend(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	if err := c.Send([]byte(`{"type":"agent.list","id":"raw-1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Send("{\"type\":\"bogus\"}\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: "a"}}); err != nil {
		t.Fatal(err)
	}
	_, rec := fc.next()
	if string(rec) != `{"type":"agent.list","id":"raw-1"}` {
		t.Fatalf("raw record = %s", rec)
	}
	_, rec = fc.next()
	if string(rec) != `{"type":"bogus"}` {
		t.Fatalf("string record = %s", rec)
	}
	h, rec := fc.next()
	if h.Type != protocol.TypeAbort || h.AgentID != "a" || h.ID != "" {
		t.Fatalf("typed record = %s", rec)
	}
	// A response to a sent command is nobody's: it arrives on Events.
	fc.sendRaw(protocol.NewResponse("raw-1", protocol.TypeAgentList, protocol.AgentListData{}))
	if _, ok := nextEvent(t, c).Msg.(*protocol.Response); !ok {
		t.Fatal("response to Send not on Events")
	}
}

func TestRequestRejectsEmptyTypeAndDuplicateID(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	if _, err := c.Request(context.Background(), &protocol.AgentList{}); !errors.Is(err, errNoType) {
		t.Fatalf("empty type: err = %v", err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList, ID: "dup"}})
		first <- err
	}()
	h, _ := fc.next() // the first is now pending
	if _, err := c.Request(context.Background(), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList, ID: "dup"}}); err == nil {
		t.Fatal("duplicate pending id accepted")
	}
	fc.respond(h, nil)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestServerCloseEndsConn(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	pending := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), agentList())
		pending <- err
	}()
	fc.next()
	fc.send(statusEvent("a", protocol.StatusIdle))
	fc.close()

	if _, ok := nextEvent(t, c).Msg.(*protocol.Status); !ok {
		t.Fatal("event before close lost")
	}
	select {
	case _, ok := <-c.Events():
		if ok {
			t.Fatal("unexpected event")
		}
	case <-time.After(testTimeout):
		t.Fatal("Events not closed")
	}
	if err := c.Err(); !errors.Is(err, io.EOF) {
		t.Fatalf("Err() = %v, want io.EOF in chain", err)
	}
	if err := <-pending; !errors.Is(err, io.EOF) {
		t.Fatalf("pending Request err = %v", err)
	}
	if _, err := c.Request(context.Background(), agentList()); !errors.Is(err, io.EOF) {
		t.Fatalf("Request after end: %v", err)
	}
	if err := c.Send(agentList()); !errors.Is(err, io.EOF) {
		t.Fatalf("Send after end: %v", err)
	}
}

func TestRequestContextCancel(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	msg := agentList()
	go func() {
		_, err := c.Request(ctx, msg)
		errc <- err
	}()
	h, _ := fc.next()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The late response is nobody's now.
	fc.respond(h, nil)
	ev := nextEvent(t, c)
	if r, ok := ev.Msg.(*protocol.Response); !ok || r.ID != h.ID {
		t.Fatalf("late response = %T %s", ev.Msg, ev.Raw)
	}
	// The connection is still usable.
	fc.serve(func(h protocol.Header, _ []byte) { fc.respond(h, nil) })
	if _, err := c.Request(context.Background(), agentList()); err != nil {
		t.Fatal(err)
	}
}

func TestCloseUnblocksEverything(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	// Flood more events than the buffer holds and never drain: the reader
	// blocks on Events, and a Request waits behind it.
	st := protocol.MustMarshal(statusEvent("a", protocol.StatusIdle))
	fc.flood(EventBuffer+10, func(int) []byte { return st })
	pending := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), agentList())
		pending <- err
	}()
	fc.next()
	deadline := time.Now().Add(testTimeout)
	for len(c.Events()) < EventBuffer {
		if time.Now().After(deadline) {
			t.Fatal("events buffer never filled")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-pending; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending Request: %v", err)
	}
	if !errors.Is(c.Err(), ErrClosed) {
		t.Fatalf("Err() = %v", c.Err())
	}
	n := 0
	for range c.Events() {
		n++
	}
	if n != EventBuffer {
		t.Fatalf("buffered events after Close = %d", n)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Request(context.Background(), agentList()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Request after Close: %v", err)
	}
	fc.close()
}

func TestEventsKeepOrderUnderBackpressure(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	const n = EventBuffer * 2
	fc.flood(n, func(i int) []byte {
		return protocol.MustMarshal(protocol.TurnStart{Header: protocol.Header{Type: protocol.TypeTurnStart}, TurnID: fmt.Sprint(i)})
	})
	for i := range n {
		ev := nextEvent(t, c)
		if ts := ev.Msg.(*protocol.TurnStart); ts.TurnID != fmt.Sprint(i) {
			t.Fatalf("event %d has turn %s", i, ts.TurnID)
		}
	}
}

func TestRequestContextEndsBlockedWrite(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s) // the server reads one byte, then never again
	// Far more than the socket buffers hold.
	big := &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: "a"}, Message: strings.Repeat("x", 4<<20)}
	// The context ends once the record has started to go out (the server
	// saw its first byte), however long marshalling took on a loaded
	// machine: a context that ended before the write would leave the
	// stream whole and the connection usable.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = fc.nc.SetReadDeadline(time.Now().Add(testTimeout))
		if _, err := io.ReadFull(fc.nc, make([]byte, 1)); err == nil {
			cancel()
		}
	}()
	_, err := c.Request(ctx, big)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
	// Part of the record went out, so the stream is unusable: the
	// connection has ended.
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err() = %v", c.Err())
	}
	select {
	case _, ok := <-c.Events():
		if ok {
			t.Fatal("unexpected event")
		}
	case <-time.After(testTimeout):
		t.Fatal("Events not closed")
	}
}

// TestMalformedResponseFailsItsRequest: a response whose id a request
// waits for but which does not decode fails that request (it is not
// delivered as an event).
func TestMalformedResponseFailsItsRequest(t *testing.T) {
	s := newFakeServer(t)
	c, fc := dial(t, s)
	fc.serve(func(h protocol.Header, _ []byte) {
		fc.sendRaw([]byte(`{"type":"response","id":"` + h.ID + `","success":"yes"}`))
	})
	_, err := c.Request(context.Background(), agentList())
	if err == nil || !strings.Contains(err.Error(), "decode response") {
		t.Fatalf("err = %v, want a decode error", err)
	}
}

// TestNewConnOverPipe: NewConn speaks the protocol over any net.Conn (a
// cluster node's tunnel to another node's gateway): hello first, then
// requests answered by id; Close closes the stream.
func TestNewConnOverPipe(t *testing.T) {
	a, b := net.Pipe()
	served := make(chan error, 1)
	go func() {
		defer b.Close()
		if _, err := b.Write(append(helloRecord, '\n')); err != nil {
			served <- err
			return
		}
		rd := protocol.NewReader(b, 0)
		rec, err := rd.Next()
		if err != nil {
			served <- err
			return
		}
		h, err := protocol.DecodeHeader(rec)
		if err != nil {
			served <- err
			return
		}
		_, err = b.Write(append(protocol.NewResponse(h.ID, h.Type, nil), '\n'))
		served <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hello().ServerVersion != "fake-1" {
		t.Fatalf("hello: %+v", c.Hello())
	}
	if _, err := c.Request(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("the stream is open after Close")
	}
}
