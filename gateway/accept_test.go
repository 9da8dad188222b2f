package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/telemetry"
)

// faultyListener fails the Accept calls its plan marks with EMFILE (as a
// process out of descriptors sees it) and passes the others through.
type faultyListener struct {
	net.Listener
	mu    sync.Mutex
	plan  []bool
	calls int
}

func (l *faultyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	i := l.calls
	l.calls++
	fail := i < len(l.plan) && l.plan[i]
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// counterValue reads a counter of m by name and transport label.
func counterValue(t *testing.T, m *telemetry.Metrics, name, transport string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "transport" && l.GetValue() == transport {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{transport=%q}", name, transport)
	return 0
}

// TestAcceptRetriesTemporaryErrors: an EMFILE burst no longer ends the unix
// accept loop (it once left the daemon unreachable). The loop backs off 5 ms,
// 10 ms, 20 ms (on the gateway's clock), starts again at 5 ms after a
// success, logs once per burst and counts every error; clients connect
// afterwards.
func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	var errs atomic.Int32
	fl := &faultyListener{plan: []bool{true, true, true, false, true, false}}
	tg := startGateway(t, Config{Clock: clk, hooks: &testHooks{
		wrapUnix:    func(ln net.Listener) net.Listener { fl.Listener = ln; return fl },
		acceptError: func(error) { errs.Add(1) },
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// backoff waits for the loop's retry timer and checks it fires after
	// exactly d.
	backoff := func(d time.Duration) {
		t.Helper()
		if err := clk.WaitPending(ctx, 1); err != nil {
			t.Fatalf("no retry timer armed for the %v backoff: %v", d, err)
		}
		if n := clk.Advance(d - time.Millisecond); n != 0 {
			t.Fatalf("retry fired before %v", d)
		}
		if n := clk.Advance(time.Millisecond); n != 1 {
			t.Fatalf("retry did not fire at %v", d)
		}
	}
	backoff(5 * time.Millisecond)
	backoff(10 * time.Millisecond)
	backoff(20 * time.Millisecond)
	if r := tg.dialRaw(t).mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v, want hello", r)
	}
	backoff(5 * time.Millisecond) // a new burst starts over
	if r := tg.dialRaw(t).mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v, want hello", r)
	}
	if n := errs.Load(); n != 4 {
		t.Fatalf("%d accept errors seen, want 4", n)
	}
	if n := counterValue(t, tg.g.cfg.Metrics, "shard_accept_errors_total", "unix"); n != 4 {
		t.Fatalf("shard_accept_errors_total{unix} = %v, want 4", n)
	}
	if n := tg.log.count("accept failed; retrying with backoff"); n != 2 {
		t.Fatalf("%d burst warnings logged, want 2 (one per burst)", n)
	}
	if n := tg.log.count("accepting connections again"); n != 2 {
		t.Fatalf("%d recoveries logged, want 2", n)
	}
}

// TestRetryListenerGivesUp: a closed listener, or one failing for good, is
// returned at once; Close ends a backoff in progress.
func TestRetryListenerGivesUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Unix(0, 0))
	fl := &faultyListener{Listener: ln, plan: []bool{true}}
	rl := newRetryListener(fl, "websocket", discardLog(), nil, clk, nil)
	done := make(chan error, 1)
	go func() {
		_, err := rl.Accept()
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rl.Close() // in the backoff: no clock advance needed
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
	}
	if temporaryAcceptError(errors.New("boom")) || temporaryAcceptError(net.ErrClosed) {
		t.Fatal("a permanent error classified temporary")
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		if !temporaryAcceptError(&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", e)}) {
			t.Fatalf("%v not classified temporary", e)
		}
	}
}

// TestMaxConnectionsRefusesCleanly: past gateway.max_connections a unix
// client gets a fatal error event and EOF, a WebSocket upgrade a 503 that
// leaves its ticket unspent; a slot given back is taken again.
func TestMaxConnectionsRefusesCleanly(t *testing.T) {
	t.Parallel()
	freed := newSignal()
	tg := startGateway(t, Config{MaxConnections: 1, hooks: &testHooks{forgot: func(uint64) { freed.fire() }}})
	first := tg.dialRaw(t)
	if r := first.mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v, want hello", r)
	}
	over := tg.dialRaw(t)
	r := over.mustRead(t)
	if r.Type != protocol.TypeError || r.Code != string(protocol.CodeInternal) || !r.Fatal ||
		!strings.Contains(r.Message, TooManyConnectionsMessage) || !strings.Contains(r.Message, "gateway.max_connections=1") {
		t.Fatalf("refusal %+v, want a fatal INTERNAL_ERROR error event naming the cap", r)
	}
	if _, err := over.read(); err == nil {
		t.Fatal("refused connection not closed after the refusal")
	}

	ticket, _ := tg.g.Tickets().Mint()
	wsURL := "ws" + strings.TrimPrefix(tg.g.WebURL(), "http") + "/ws"
	dial := func() (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{Subprotocol, "ticket." + ticket}})
	}
	_, resp, err := dial()
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("upgrade over the cap: err %v, response %+v; want 503 with Retry-After", err, resp)
	}
	if n := counterValue(t, tg.g.cfg.Metrics, "shard_connections_refused_total", "unix"); n != 1 {
		t.Fatalf("refused{unix} = %v, want 1", n)
	}
	if n := counterValue(t, tg.g.cfg.Metrics, "shard_connections_refused_total", "websocket"); n != 1 {
		t.Fatalf("refused{websocket} = %v, want 1", n)
	}

	first.Close()
	freed.wait(t, "the first connection's slot")
	ws, _, err := dial() // the same ticket: the 503 did not spend it
	if err != nil {
		t.Fatalf("upgrade after a slot was freed: %v", err)
	}
	ws.CloseNow()
}
