package daemon_test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// pipeConn is a unix-socket connection written and read as raw JSONL, so
// that a test can pipeline commands without waiting for any answer.
type pipeConn struct {
	t  *testing.T
	nc net.Conn
	rd *protocol.Reader
}

func (h *harness) dialPipe() *pipeConn {
	h.t.Helper()
	nc, err := net.Dial("unix", h.cfg.SocketPath())
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { nc.Close() })
	rc := &pipeConn{t: h.t, nc: nc, rd: protocol.NewReader(nc, 0)}
	if typ := protocol.PeekType(rc.next()); typ != protocol.TypeHello {
		h.t.Fatalf("first record is %q, want hello", typ)
	}
	return rc
}

func (rc *pipeConn) next() []byte {
	rc.t.Helper()
	_ = rc.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	rec, err := rc.rd.Next()
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return rec
}

// send writes every record in one write: the daemon reads them back to
// back, before any is answered.
func (rc *pipeConn) send(recs ...string) {
	rc.t.Helper()
	if _, err := rc.nc.Write([]byte(strings.Join(recs, "\n") + "\n")); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// responses reads until n responses arrived (skipping events) and returns
// them in arrival order.
func (rc *pipeConn) responses(n int) []protocol.Response {
	rc.t.Helper()
	var out []protocol.Response
	for len(out) < n {
		rec := rc.next()
		if protocol.PeekType(rec) != protocol.TypeResponse {
			continue
		}
		var r protocol.Response
		if err := json.Unmarshal(rec, &r); err != nil {
			rc.t.Fatalf("response %s: %v", rec, err)
		}
		out = append(out, r)
	}
	return out
}

// resp is an expected response: its id, and its error code ("" for success).
type resp struct {
	id   string
	code protocol.ErrorCode
}

func expectResponses(t *testing.T, got []protocol.Response, wants ...resp) {
	t.Helper()
	for i, w := range wants {
		r := got[i]
		code := protocol.ErrorCode("")
		if r.Error != nil {
			code = r.Error.Code
		}
		if r.ID != w.id || code != w.code || r.Success != (w.code == "") {
			t.Errorf("response %d: id %q success %v code %q (%v), want id %q code %q", i, r.ID, r.Success, code, r.Error, w.id, w.code)
		}
	}
}

// TestDirectRoutingKeepsCommandOrder: commands pipelined right behind an
// agent.attach (held by the connection until the agent is known, then sent
// to the agent actor directly) reach the agent in order and are answered
// in order; after a detach they go through the registry again and get
// NOT_ATTACHED; an attach of an unknown agent releases what it held to the
// registry (NOT_FOUND each, in order); and a re-attach routes directly
// again. (Only commands the runtime answers are compared in order behind
// an attach: the attach itself is answered once the runtime's get_sync
// comes back, and a command the agent refuses at once, as before direct
// routing, may be answered first.)
func TestDirectRoutingKeepsCommandOrder(t *testing.T) {
	h := start(t, nil)
	id := h.create(h.dial(), nil)
	rc := h.dialPipe()
	q := `"agent_id":"` + id + `"`

	rc.send(
		`{"id":"a1","type":"agent.attach",`+q+`}`,
		`{"id":"p1","type":"prompt",`+q+`,"message":"hello"}`,
		`{"id":"x1","type":"abort",`+q+`}`,
		`{"id":"m1","type":"list_modes",`+q+`}`,
		`{"id":"l1","type":"agent.list"}`,
	)
	// agent.list is the registry's own: it may be answered before the
	// agent's answers; those keep their order.
	var agentResps []protocol.Response
	sawList := false
	for _, r := range rc.responses(5) {
		if r.ID == "l1" {
			sawList = r.Success
			continue
		}
		agentResps = append(agentResps, r)
	}
	if !sawList {
		t.Error("agent.list was not answered with success")
	}
	expectResponses(t, agentResps, resp{"a1", ""}, resp{"p1", ""}, resp{"x1", ""}, resp{"m1", ""})

	rc.send(
		`{"id":"d1","type":"agent.detach",`+q+`}`,
		`{"id":"m2","type":"list_modes",`+q+`}`,
		`{"id":"p2","type":"prompt",`+q+`,"message":"again"}`,
	)
	expectResponses(t, rc.responses(3), resp{"d1", ""}, resp{"m2", protocol.CodeNotAttached}, resp{"p2", protocol.CodeNotAttached})

	const ghost = `"agent_id":"agent-does-not-exist"`
	rc.send(
		`{"id":"g1","type":"agent.attach",`+ghost+`}`,
		`{"id":"g2","type":"prompt",`+ghost+`,"message":"x"}`,
		`{"id":"g3","type":"agent.detach",`+ghost+`}`,
	)
	expectResponses(t, rc.responses(3), resp{"g1", protocol.CodeNotFound}, resp{"g2", protocol.CodeNotFound}, resp{"g3", protocol.CodeNotFound})

	rc.send(
		`{"id":"a2","type":"agent.attach",`+q+`,"role":"observer"}`,
		`{"id":"m3","type":"list_modes",`+q+`}`,
		`{"id":"m4","type":"list_models",`+q+`}`,
		`{"id":"m5","type":"list_reasoning_levels",`+q+`}`,
	)
	expectResponses(t, rc.responses(4), resp{"a2", ""}, resp{"m3", ""}, resp{"m4", ""}, resp{"m5", protocol.CodeNotFound}) // the sim model has no reasoning levels: the runtime says so
}
