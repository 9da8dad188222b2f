package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// TestMain runs the tests under a home of their own (none reads the
// developer's ~/.shard) and checks for leaked goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(testhost.WithHome(m)) }

// testTimeout bounds every command run in these tests.
const testTimeout = 10 * time.Second

// testNow is the pinned "now" of the commands under test: 2023-11-14
// 22:15:00 UTC, 100 s after the epoch-ms 1_700_000_000_000.
var testNow = time.UnixMilli(1_700_000_100_000)

// testClock pins time and zone so that tables are reproducible.
var testClock = clock{now: func() time.Time { return testNow }, loc: time.UTC}

// fakeDaemon is an in-test shardd: a JSONL server on a real unix socket that
// sends hello on connect and hands every record it receives to handle.
type fakeDaemon struct {
	t    *testing.T
	path string
	ln   net.Listener
	wg   sync.WaitGroup

	// handle answers one record; it runs on the connection's goroutine.
	handle func(c *daemonConn, h protocol.Header, rec []byte)

	mu       sync.Mutex
	received []protocol.Header // every record's envelope, in order
	raw      [][]byte
}

// daemonConn is one accepted connection of the fake daemon.
type daemonConn struct {
	t  *testing.T
	nc net.Conn
	mu sync.Mutex
}

func (c *daemonConn) sendRaw(rec []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.nc.Write(append(append([]byte(nil), rec...), '\n'))
}

func (c *daemonConn) send(v any) { c.sendRaw(protocol.MustMarshal(v)) }

func (c *daemonConn) respond(h protocol.Header, data any) {
	c.sendRaw(protocol.NewResponse(h.ID, h.Type, data))
}

func (c *daemonConn) respondError(h protocol.Header, code protocol.ErrorCode, msg string) {
	c.sendRaw(protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(code, "%s", msg)))
}

func (c *daemonConn) close() { c.nc.Close() }

// socketDir returns a temp dir short enough for a unix socket path.
func socketDir(t *testing.T) string {
	dir := t.TempDir()
	if len(dir) > 80 {
		d, err := os.MkdirTemp("", "sc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	return dir
}

func newFakeDaemon(t *testing.T, handle func(c *daemonConn, h protocol.Header, rec []byte)) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{t: t, path: filepath.Join(socketDir(t), "daemon.sock"), handle: handle}
	ln, err := net.Listen("unix", d.path)
	if err != nil {
		t.Fatal(err)
	}
	d.ln = ln
	var conns []net.Conn
	var connsMu sync.Mutex
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, nc)
			connsMu.Unlock()
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.serve(&daemonConn{t: t, nc: nc})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		connsMu.Unlock()
		d.wg.Wait()
	})
	return d
}

func (d *fakeDaemon) serve(c *daemonConn) {
	defer c.close()
	c.send(protocol.Hello{
		Header:          protocol.Header{Type: protocol.TypeHello},
		ProtocolVersion: protocol.Version,
		ServerVersion:   "fake",
		Capabilities:    []string{"streaming-deltas"},
	})
	r := protocol.NewReader(c.nc, 0)
	for {
		rec, err := r.Next()
		if err != nil {
			return
		}
		rec = append([]byte(nil), rec...)
		h, err := protocol.DecodeHeader(rec)
		if err != nil {
			d.t.Errorf("fake daemon: bad record %s: %v", rec, err)
			return
		}
		d.mu.Lock()
		d.received = append(d.received, h)
		d.raw = append(d.raw, rec)
		d.mu.Unlock()
		if d.handle != nil {
			d.handle(c, h, rec)
		}
	}
}

// records returns the raw records received of the given type.
func (d *fakeDaemon) records(typ string) [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out [][]byte
	for i, h := range d.received {
		if h.Type == typ {
			out = append(out, d.raw[i])
		}
	}
	return out
}

// result is the outcome of one shardctl run.
type result struct {
	code           int
	stdout, stderr string
}

// runCtl runs shardctl with args against the daemon at socket, stdin as input.
func runCtl(t *testing.T, ctx context.Context, socket, stdin string, args ...string) result {
	t.Helper()
	return runCtlIn(t, ctx, socket, strings.NewReader(stdin), args...)
}

// runCtlIn is runCtl with any reader as stdin.
func runCtlIn(t *testing.T, ctx context.Context, socket string, stdin io.Reader, args ...string) result {
	t.Helper()
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
	}
	root := newRoot(testClock)
	var out, errb bytes.Buffer
	all := args
	if socket != "" {
		all = append([]string{"--socket", socket}, args...)
	}
	root.SetArgs(all)
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(stdin)
	code := execute(ctx, root)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// contextWithTimeout is context.WithTimeout on the background context.
func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// ev builds the Header of an event tagged with an agent id.
func ev(typ, agentID string) protocol.Header {
	return protocol.Header{Type: typ, AgentID: agentID}
}
