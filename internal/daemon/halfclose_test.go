package daemon_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// TestHalfClosedClientGetsEveryResponse: a client that writes its commands
// and then shuts down its write side (as `printf … | socat - UNIX-CONNECT:…`
// does) gets every response, the agent.create that starts a real runtime
// included, and then EOF. The old daemon closed the connection at the EOF:
// the agent was created, its id never returned.
func TestHalfClosedClientGetsEveryResponse(t *testing.T) {
	h := start(t, nil)
	nc, err := net.Dial("unix", h.cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(60 * time.Second)) // a failure bound, not a wait
	cwd := shortTemp(t)
	script := `{"id":"c","type":"agent.create","cwd":` + strconv.Quote(cwd) + `}` + "\n" +
		`{"id":"l","type":"agent.list"}` + "\n" +
		`{"id":"s","type":"daemon.status"}` + "\n" +
		`{"id":"x","type":"agent.list","type":"daemon.shutdown"}` + "\n"
	if _, err := nc.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	if err := nc.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got := map[string]protocol.Response{}
	rd := bufio.NewReader(nc)
	for {
		line, err := rd.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read: %v (responses so far %v)", err, got)
		}
		var r protocol.Response
		if json.Unmarshal(line, &r) == nil && r.Type == protocol.TypeResponse {
			got[r.ID] = r
		}
	}
	create, ok := got["c"]
	if !ok || !create.Success {
		t.Fatalf("agent.create response %+v (present %v), want success", create, ok)
	}
	var data protocol.AgentCreateData
	if err := json.Unmarshal(create.Data, &data); err != nil || data.AgentID == "" {
		t.Fatalf("agent.create data %s: %v", create.Data, err)
	}
	for _, id := range []string{"l", "s"} {
		if r, ok := got[id]; !ok || !r.Success {
			t.Errorf("response %q: %+v (present %v), want success", id, r, ok)
		}
	}
	// Duplicate keys are refused, not read as the last one: the daemon
	// is still up to answer the next client.
	if r, ok := got["x"]; !ok || r.Success || r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest {
		t.Errorf("duplicate-key command: %+v (present %v), want INVALID_REQUEST", r, ok)
	}
	c := h.dial()
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range list.Agents {
		found = found || a.AgentID == data.AgentID
	}
	if !found {
		t.Fatalf("agent %s not listed: %+v", data.AgentID, list)
	}
}
