package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestOversizedIDsAreNotEchoed: a unix client sending records just under
// the record limit whose id is far over its limit gets, for each, a small
// INVALID_REQUEST without the id, and its connection goes on serving it.
func TestOversizedIDsAreNotEchoed(t *testing.T) {
	h := start(t, nil)
	conn, err := net.Dial("unix", h.cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // a failure bound, not a wait
	rd := bufio.NewReader(conn)
	readLine := func() []byte {
		t.Helper()
		line, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return line
	}
	readLine() // hello

	size := protocol.DefaultMaxRecord - 2<<20
	rec := append([]byte(`{"type":"agent.list","id":"`), bytes.Repeat([]byte("x"), size)...)
	rec = append(rec, "\"}\n"...)
	const n = 3
	written := make(chan error, 1)
	go func() {
		for range n {
			if _, err := conn.Write(rec); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	for range n {
		line := readLine()
		var resp protocol.Response
		if len(line) > 1024 || json.Unmarshal(line, &resp) != nil || resp.ID != "" || resp.Success ||
			resp.Error == nil || resp.Error.Code != protocol.CodeInvalidRequest {
			t.Fatalf("answer of %d bytes: %.300s", len(line), line)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(`{"type":"agent.list","id":"after"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var resp protocol.Response
	if line := readLine(); json.Unmarshal(line, &resp) != nil || resp.ID != "after" || !resp.Success {
		t.Fatalf("after the oversized records: %s", line)
	}
}
