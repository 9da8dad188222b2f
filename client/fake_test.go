package client

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait in these tests; they normally finish in
// milliseconds.
const testTimeout = 10 * time.Second

// helloRecord is the hello a fake daemon sends.
var helloRecord = protocol.MustMarshal(protocol.Hello{
	Header:          protocol.Header{Type: protocol.TypeHello},
	ProtocolVersion: protocol.Version,
	ServerVersion:   "fake-1",
	Capabilities:    []string{"streaming-deltas"},
})

// fakeServer is an in-test daemon: a real unix socket in a temp dir whose
// accepted connections are handed to the test to script.
type fakeServer struct {
	t     *testing.T
	path  string
	ln    net.Listener
	conns chan *fakeConn
	wg    sync.WaitGroup
	hello []byte // sent on accept; nil sends nothing
}

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

func newFakeServer(t *testing.T) *fakeServer {
	return newFakeServerHello(t, helloRecord)
}

func newFakeServerHello(t *testing.T, hello []byte) *fakeServer {
	t.Helper()
	path := filepath.Join(socketDir(t), "daemon.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, path: path, ln: ln, conns: make(chan *fakeConn, 16), hello: hello}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
		close(s.conns)
		for fc := range s.conns {
			fc.close()
		}
	})
	return s
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		fc := &fakeConn{t: s.t, nc: nc, r: protocol.NewReader(nc, 0)}
		if s.hello != nil {
			fc.sendRaw(s.hello)
		}
		s.conns <- fc
	}
}

// conn waits for the next accepted connection.
func (s *fakeServer) conn() *fakeConn {
	s.t.Helper()
	select {
	case fc := <-s.conns:
		s.t.Cleanup(fc.close)
		return fc
	case <-time.After(testTimeout):
		s.t.Fatal("no connection accepted")
		return nil
	}
}

type fakeConn struct {
	t  *testing.T
	nc net.Conn
	r  *protocol.Reader
	mu sync.Mutex
}

func (c *fakeConn) close() { c.nc.Close() }

func (c *fakeConn) sendRaw(rec []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.nc.Write(append(append([]byte(nil), rec...), '\n')); err != nil {
		c.t.Errorf("fake server write: %v", err)
	}
}

func (c *fakeConn) send(v any) { c.sendRaw(protocol.MustMarshal(v)) }

// next reads the next record the client sent.
func (c *fakeConn) next() (protocol.Header, []byte) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	rec, err := c.r.Next()
	if err != nil {
		c.t.Fatalf("fake server read: %v", err)
	}
	rec = append([]byte(nil), rec...)
	h, err := protocol.DecodeHeader(rec)
	if err != nil {
		c.t.Fatalf("fake server: bad record %s: %v", rec, err)
	}
	return h, rec
}

// respond answers the command h with data.
func (c *fakeConn) respond(h protocol.Header, data any) {
	c.sendRaw(protocol.NewResponse(h.ID, h.Type, data))
}

func statusEvent(agentID string, st protocol.AgentStatus) protocol.Status {
	return protocol.Status{Header: protocol.Header{Type: protocol.TypeStatus, AgentID: agentID}, Status: st}
}

func agentList() *protocol.AgentList {
	return &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}
}

// nextEvent waits for the next event on c.
func nextEvent(t *testing.T, c *Conn) Event {
	t.Helper()
	select {
	case ev, ok := <-c.Events():
		if !ok {
			t.Fatalf("events closed: %v", c.Err())
		}
		return ev
	case <-time.After(testTimeout):
		t.Fatal("no event")
		return Event{}
	}
}

// serve runs fn for every record the client sends, in a goroutine, until the
// connection ends. The goroutine is waited for at cleanup.
func (c *fakeConn) serve(fn func(h protocol.Header, rec []byte)) {
	done := make(chan struct{})
	_ = c.nc.SetReadDeadline(time.Time{})
	go func() {
		defer close(done)
		for {
			rec, err := c.r.Next()
			if err != nil {
				return
			}
			rec = append([]byte(nil), rec...)
			h, err := protocol.DecodeHeader(rec)
			if err != nil {
				c.t.Errorf("fake server: bad record %s: %v", rec, err)
				return
			}
			fn(h, rec)
		}
	}()
	c.t.Cleanup(func() {
		c.close()
		<-done
	})
}

// flood writes n copies of rec from a goroutine, ignoring write errors (the
// client may close first); the goroutine is waited for at cleanup.
func (c *fakeConn) flood(n int, rec func(i int) []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			c.mu.Lock()
			_, err := c.nc.Write(append(rec(i), '\n'))
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	c.t.Cleanup(func() {
		c.close()
		<-done
	})
}
