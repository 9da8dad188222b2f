package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// writesConn records each Write it is given.
type writesConn struct {
	net.Conn
	writes [][]byte
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// TestCorkConnOneWritePerBatch: while corked, writes are kept and uncork
// sends them, in order, in one write; uncorked writes go through at once;
// a corked burst past corkMax is not held in memory.
func TestCorkConnOneWritePerBatch(t *testing.T) {
	under := &writesConn{}
	c := &corkConn{Conn: under, bufs: newCorkPool()}

	c.Write([]byte("a"))
	if len(under.writes) != 1 {
		t.Fatalf("uncorked write held: %q", under.writes)
	}
	c.cork(3)
	for _, p := range []string{"b", "c", "d"} {
		if n, err := c.Write([]byte(p)); n != 1 || err != nil {
			t.Fatalf("corked Write = %d, %v", n, err)
		}
	}
	if len(under.writes) != 1 {
		t.Fatalf("corked writes reached the socket: %q", under.writes)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if len(under.writes) != 2 || string(under.writes[1]) != "bcd" {
		t.Fatalf("after uncork: %q, want a then bcd", under.writes)
	}
	if err := c.uncork(); err != nil || len(under.writes) != 2 {
		t.Fatalf("empty uncork wrote: %q, %v", under.writes, err)
	}

	c.cork(corkMax) // a large batch: a pooled buffer
	c.Write([]byte("e"))
	big := bytes.Repeat([]byte("x"), corkMax)
	c.Write(big)
	if len(under.writes) != 4 || string(under.writes[2]) != "e" || len(under.writes[3]) != corkMax {
		t.Fatalf("burst past corkMax: %d writes, want the kept e then the burst", len(under.writes))
	}
	c.Write([]byte("f"))
	c.uncork()
	if len(under.writes) != 5 || string(under.writes[4]) != "f" {
		t.Fatalf("after the burst: %d writes", len(under.writes))
	}
	if c.lent != nil || cap(c.buf) > corkSmall {
		t.Fatalf("an uncorked connection keeps a %d-byte buffer (lent %v)", cap(c.buf), c.lent != nil)
	}
}

// TestWebSocketBatchFramesInOrder: a batch written through a real upgrade
// (corked) reaches the client as one text frame per record, in order.
func TestWebSocketBatchFramesInOrder(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, Config{})
	ws, ctx := tg.dialWS(t)
	tg.g.mu.Lock()
	var a *connActor
	for _, c := range tg.g.conns {
		a = c
	}
	tg.g.mu.Unlock()
	wt, ok := a.t.(*wsTransport)
	if !ok || wt.cork == nil {
		t.Fatalf("transport %T is not corked", a.t)
	}
	const n = 200
	for i := range n {
		a.out.Hold([]byte(fmt.Sprintf(`{"type":"event","n":%d,"pad":%q}`, i, strings.Repeat("p", i*50))))
	}
	a.out.Flush()
	for i := range n {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		var m struct{ N int }
		if typ != websocket.MessageText || json.Unmarshal(data, &m) != nil || m.N != i {
			t.Fatalf("message %d: %v %.60q", i, typ, data)
		}
	}
}
