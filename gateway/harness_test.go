package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/telemetry"
)

// testGateway is a real gateway on a real unix socket and web listener,
// whose registry is a probe: every command it would route arrives on cmds,
// and the test answers it (or not) when it chooses.
type testGateway struct {
	g    *Gateway
	cmds chan *registry.Command
	log  *logBuffer
}

// logBuffer collects the gateway's log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count returns how many lines contain s.
func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Count(b.buf.Bytes(), []byte(s))
}

// startGateway starts a gateway with cfg (SocketPath, WebAddr and Metrics
// filled in when empty) and closes it at the end of the test.
func startGateway(t *testing.T, cfg Config) *testGateway {
	t.Helper()
	dir, err := os.MkdirTemp("", "gw") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cfg.SocketPath == "" {
		cfg.SocketPath = filepath.Join(dir, "s")
	}
	if cfg.WebAddr == "" {
		cfg.WebAddr = "127.0.0.1:0"
	}
	if cfg.TicketTTL == 0 {
		cfg.TicketTTL = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = telemetry.New("test")
	}
	tg := &testGateway{cmds: make(chan *registry.Command, 1024), log: &logBuffer{}}
	logger := slog.New(slog.NewTextHandler(tg.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discardLog() }))
	probe, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*registry.Command); ok {
			tg.cmds <- m
		}
	}), "registry-probe")
	if err != nil {
		t.Fatal(err)
	}
	tg.g = New(cfg, sys, probe, outbox.NewHub(), logger)
	if err := tg.g.Listen(); err != nil {
		t.Fatal(err)
	}
	tg.g.Serve()
	t.Cleanup(func() {
		tg.g.Close()
		sys.Shutdown()
	})
	return tg
}

// next returns the next command the probe registry received.
func (tg *testGateway) next(t *testing.T) *registry.Command {
	t.Helper()
	select {
	case c := <-tg.cmds:
		return c
	case <-time.After(30 * time.Second): // a failure bound, never waited out when all is well
		t.Fatal("no command reached the registry")
		return nil
	}
}

// answer sends cmd's success response.
func answer(cmd *registry.Command) {
	cmd.Client.Send(protocol.NewResponse(cmd.Header.ID, cmd.Header.Type, nil))
}

// dialWS opens a WebSocket connection with a fresh ticket and reads its
// hello. ctx bounds the test's reads and writes on it (a failure bound);
// both end with the test.
func (tg *testGateway) dialWS(t *testing.T) (*websocket.Conn, context.Context) {
	t.Helper()
	ticket, _ := tg.g.Tickets().Mint()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tg.g.WebURL(), "http")+"/ws",
		&websocket.DialOptions{Subprotocols: []string{Subprotocol, "ticket." + ticket}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if _, _, err := ws.Read(ctx); err != nil { // hello
		t.Fatal(err)
	}
	return ws, ctx
}

// rawConn is a raw unix client.
type rawConn struct {
	*net.UnixConn
	rd *bufio.Reader
}

// dialRaw connects to the unix socket without reading anything.
func (tg *testGateway) dialRaw(t *testing.T) *rawConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: tg.g.cfg.SocketPath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A failure bound for every read of the test, not a wait.
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	return &rawConn{UnixConn: c, rd: bufio.NewReaderSize(c, 1<<20)}
}

// record is a decoded line, with the members the tests look at.
type record struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Code    string          `json:"code"`
	Fatal   bool            `json:"fatal"`
	Message string          `json:"message"`
	Error   *protocol.Error `json:"error"`
}

// read returns the next record, or the read error (io.EOF once the daemon
// has closed).
func (c *rawConn) read() (record, error) {
	line, err := c.rd.ReadBytes('\n')
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return record{}, err
	}
	return r, nil
}

// mustRead is read for a record that must come.
func (c *rawConn) mustRead(t *testing.T) record {
	t.Helper()
	r, err := c.read()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return r
}

// send writes lines, each followed by '\n'.
func (c *rawConn) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := c.Write([]byte(l + "\n")); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// signal is a channel closed once, for hooks.
type signal struct {
	once sync.Once
	ch   chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) fire() { s.once.Do(func() { close(s.ch) }) }

// wait waits for the signal, failing the test past a generous bound.
func (s *signal) wait(t *testing.T, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-s.ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
