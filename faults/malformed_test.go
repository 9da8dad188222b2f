//go:build linux

package faults

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// badFrame is one malformed record and the answer the protocol gives it: a
// response with success false and INVALID_REQUEST (docs/protocol.md §8,
// gateway doc: the connection stays open), carrying the command's id when the
// envelope was readable.
type badFrame struct {
	name   string
	rec    string
	id     string // the id the error response must carry ("" when unreadable)
	inText string // a piece the error message must contain, if any
}

func badFrames(agentID string) []badFrame {
	return []badFrame{
		{name: "truncated JSON", rec: `{"id":"j1","type":"agent.list"`},
		{name: "not JSON", rec: `hello daemon`},
		{name: "binary garbage", rec: "\x00\xff\xfe\x01 garbage \xc3\x28"},
		{name: "JSON array", rec: `[1,2,3]`},
		{name: "JSON string", rec: `"agent.list"`},
		{name: "JSON null", rec: `null`},
		{name: "no type", rec: `{"id":"n1"}`, id: "n1"},
		{name: "type not a string", rec: `{"id":"t1","type":7}`},
		{name: "id not a string", rec: `{"id":5,"type":"agent.list"}`},
		{name: "unknown type", rec: `{"id":"u1","type":"no.such.command"}`, id: "u1", inText: "no.such.command"},
		{name: "wrong field type", rec: `{"id":"w1","type":"agent.create","cwd":42}`, id: "w1", inText: "cwd"},
		{name: "wrong nested type", rec: `{"id":"w2","type":"prompt","agent_id":"` + agentID + `","message":{"x":1}}`, id: "w2", inText: "message"},
		{name: "trailing garbage", rec: `{"id":"g1","type":"agent.list"} trailing`},
	}
}

// TestMalformedClientFrames sends every kind of broken record on both
// transports, checks each gets its INVALID_REQUEST and the connection
// keeps working, and that an attached bystander notices nothing.
func TestMalformedClientFrames(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home, daemonOpts{})
	by := d.dial()
	byEvents := record(by)
	agentID, _ := createAgent(t, by)
	attach(t, by, agentID)
	base := d.mustMetrics()

	check := func(t *testing.T, r rawConn, f badFrame) {
		t.Helper()
		if err := r.send([]byte(f.rec)); err != nil {
			t.Fatalf("%s: send: %v", f.name, err)
		}
		resp := nextResponse(t, r)
		if resp.Success || resp.Error == nil || resp.Error.Code != protocol.CodeInvalidRequest {
			t.Fatalf("%s: got %+v (error %+v), want INVALID_REQUEST", f.name, resp, resp.Error)
		}
		if f.id != "" && resp.ID != f.id {
			t.Errorf("%s: error response id %q, want %q", f.name, resp.ID, f.id)
		}
		if f.inText != "" && !strings.Contains(resp.Error.Message, f.inText) {
			t.Errorf("%s: error message %q does not mention %q", f.name, resp.Error.Message, f.inText)
		}
	}
	works := func(t *testing.T, r rawConn, id string) {
		t.Helper()
		if err := r.send([]byte(`{"id":"` + id + `","type":"agent.list"}`)); err != nil {
			t.Fatalf("send agent.list: %v", err)
		}
		if resp := nextResponse(t, r); !resp.Success || resp.ID != id {
			t.Fatalf("agent.list after bad input: %+v (error %+v)", resp, resp.Error)
		}
	}

	t.Run("unix", func(t *testing.T) {
		r := dialRawUnix(t, d)
		expectHello(t, r)
		for _, f := range badFrames(agentID) {
			check(t, r, f)
		}
		works(t, r, "after-bad")

		// Framing rules of docs/protocol.md §2.1: CRLF is tolerated, blank
		// lines are skipped, U+2028 inside a string does not split the
		// record.
		if err := r.write([]byte("\n  \n\r\n" + `{"id":"crlf","type":"agent.list"}` + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if resp := nextResponse(t, r); !resp.Success || resp.ID != "crlf" {
			t.Fatalf("CRLF record after blank lines: %+v", resp)
		}
		works(t, r, "ls\u2028sep")

		// A record over the 32 MiB limit is consumed and refused; the
		// stream stays usable.
		big := append([]byte(`{"id":"big","type":"agent.list","pad":"`), bytes.Repeat([]byte("a"), protocol.DefaultMaxRecord)...)
		check(t, r, badFrame{name: "oversized line", rec: string(append(big, `"}`...)), inText: "size limit"})
		works(t, r, "after-big")

		// Half a record, then the client hangs up its writing side: the
		// daemon may answer the fragment (INVALID_REQUEST) and must close.
		r2 := dialRawUnix(t, d)
		expectHello(t, r2)
		if err := r2.write([]byte(`{"id":"cut","type":"agent.li`)); err != nil {
			t.Fatal(err)
		}
		if err := r2.c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r2.next(callTimeout)
			if err != nil {
				if !isEOF(err) {
					t.Fatalf("after a truncated record and EOF: %v, want the daemon to close", err)
				}
				break
			}
			if !validRecord(rec) {
				t.Fatalf("invalid record after truncated input: %.200q", rec)
			}
			if protocol.PeekType(rec) == protocol.TypeResponse && !strings.Contains(string(rec), string(protocol.CodeInvalidRequest)) {
				t.Fatalf("a truncated record got %.300s, want INVALID_REQUEST or nothing", rec)
			}
		}
	})

	t.Run("websocket", func(t *testing.T) {
		r := dialRawWS(t, d, ticket(t, by))
		expectHello(t, r)
		for _, f := range badFrames(agentID) {
			if !utf8.ValidString(f.rec) {
				continue // a text frame must be UTF-8: closed with 1007, below
			}
			check(t, r, f)
		}
		check(t, r, badFrame{name: "empty frame", rec: ""})
		works(t, r, "after-bad")

		// Binary frames are unused in v0.1 (docs/protocol.md §2.2):
		// refused, connection kept.
		if err := r.frame(websocket.MessageBinary, []byte(`{"id":"bin","type":"agent.list"}`)); err != nil {
			t.Fatal(err)
		}
		if resp := nextResponse(t, r); resp.Success || resp.Error == nil || resp.Error.Code != protocol.CodeInvalidRequest {
			t.Fatalf("binary frame: %+v, want INVALID_REQUEST", resp)
		}
		works(t, r, "after-binary")

		// A text frame that is not UTF-8 breaks RFC 6455 §5.6: that
		// connection is closed with 1007, and the others go on.
		bad := dialRawWS(t, d, ticket(t, by))
		expectHello(t, bad)
		_ = bad.send([]byte("\x00\xff\xfe\x01 garbage \xc3\x28"))
		for {
			_, err := bad.next(callTimeout)
			if err == nil {
				continue
			}
			if got := websocket.CloseStatus(err); got != websocket.StatusInvalidFramePayloadData {
				t.Fatalf("after a non-UTF-8 text frame: %v (close status %d), want close 1007", err, got)
			}
			break
		}
		works(t, r, "after-1007-elsewhere")

		// A frame over the read limit: the WebSocket layer closes the
		// connection with 1009 (message too big).
		big := append([]byte(`{"id":"big","type":"agent.list","pad":"`), bytes.Repeat([]byte("a"), protocol.DefaultMaxRecord)...)
		_ = r.send(append(big, `"}`...)) // may fail once the daemon closes
		for {
			_, err := r.next(callTimeout)
			if err == nil {
				continue
			}
			if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
				t.Fatalf("after an oversized frame: %v (close status %d), want close 1009", err, got)
			}
			break
		}
	})

	// Nothing reached the bystander: it still works, sees its own turn
	// whole, and got no error.
	prompt(t, by, agentID, "sim: say still here")
	byEvents.waitFor(t, callTimeout, "bystander's turn_end", is(protocol.TypeTurnEnd, agentID))
	for _, ev := range byEvents.snapshot() {
		if !validRecord(ev.Raw) {
			t.Errorf("bystander got an invalid record: %.200q", ev.Raw)
		}
		if ev.Msg.Head().Type == protocol.TypeError {
			t.Errorf("bystander got an error event: %s", ev.Raw)
		}
	}
	eventually(t, callTimeout, "connection gauges back to the bystander's", func() bool {
		m := d.mustMetrics()
		return m[`shard_connections{transport="unix"}`] == base[`shard_connections{transport="unix"}`] &&
			m[`shard_connections{transport="websocket"}`] == base[`shard_connections{transport="websocket"}`]
	})
	var st protocol.DaemonStatusData
	call(t, by, &protocol.DaemonStatus{Header: hdr(protocol.TypeDaemonStatus, "")}, &st)
	if st.PID != d.pid() {
		t.Fatalf("daemon.status pid %d, want %d", st.PID, d.pid())
	}
}

// TestMalformedRuntimeOutput runs agents whose runtime writes garbage:
// lines that are not JSON objects, truncated records, a record over the
// size limit, a response nobody asked for; half a record and then death;
// garbage and never a hello. Clients must only ever see valid records, the
// turn around the garbage must complete, a dying runtime must surface as
// agent_exited and come back on the next prompt, and a runtime that never
// gets ready must fail its start with RUNTIME_START_FAILED.
func TestMalformedRuntimeOutput(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home, daemonOpts{flags: []string{
		"--runtime.command", selfBin + " " + helperArg + " " + helperRuntimeProxy + " " + sharddBin,
		"--runtime.start-timeout", "5s",
	}})
	c := d.dial()
	events := record(c)
	agentID, _ := createAgent(t, c)
	attach(t, c, agentID)
	onlyValid := func(t *testing.T) {
		t.Helper()
		for _, ev := range events.snapshot() {
			if !validRecord(ev.Raw) {
				t.Fatalf("client got an invalid record: %.200q", ev.Raw)
			}
		}
	}

	t.Run("garbage mid-stream", func(t *testing.T) {
		prompt(t, c, agentID, cueGarbage+"\nsim: say after the garbage")
		events.waitFor(t, 2*callTimeout, "message_complete after the garbage", func(ev client.Event) bool {
			mc, ok := ev.Msg.(*protocol.MessageComplete)
			return ok && mc.AgentID == agentID && strings.Contains(messageText(mc.Message), "after the garbage")
		})
		events.waitFor(t, callTimeout, "turn_end", is(protocol.TypeTurnEnd, agentID))
		onlyValid(t)
		// The dropped records are reported once, as a non-fatal error.
		n := 0
		for _, ev := range events.snapshot() {
			if e, ok := ev.Msg.(*protocol.ErrorEvent); ok && e.AgentID == agentID {
				n++
				if e.Code != protocol.CodeProtocolError || e.Fatal {
					t.Errorf("error event %s, want a non-fatal PROTOCOL_ERROR", ev.Raw)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d error events for %d invalid records, want 1", n, len(garbageLines)+1)
		}
		for _, ev := range events.snapshot() {
			if h := ev.Msg.Head(); h.Type == protocol.TypeAgentExited {
				t.Fatalf("runtime exited on garbage: %s", ev.Raw)
			}
		}
	})

	t.Run("truncated then exit", func(t *testing.T) {
		before := events.mark()
		// The runtime dies before it answers: the prompt fails with it.
		err := tryCall(c, &protocol.Prompt{Header: hdr(protocol.TypePrompt, agentID), Message: cueTruncateExit}, nil)
		if pe := protoErr(err); pe == nil || pe.Code != protocol.CodeInternal || !strings.Contains(pe.Message, "runtime exited") {
			t.Fatalf("prompt to a runtime that dies: %v, want INTERNAL_ERROR runtime exited", err)
		}
		ev := events.waitFrom(t, before, callTimeout, "agent_exited", is(protocol.TypeAgentExited, agentID))
		ex := ev.Msg.(*protocol.AgentExited)
		if ex.RuntimeState != protocol.RuntimeFailed || ex.ExitCode == nil || *ex.ExitCode != truncateExitCode {
			t.Fatalf("agent_exited = %s, want runtime_state failed, exit_code %d", ev.Raw, truncateExitCode)
		}
		ev = events.waitFrom(t, before, callTimeout, "error event for the crash", is(protocol.TypeError, agentID))
		if e := ev.Msg.(*protocol.ErrorEvent); e.Code != protocol.CodeInternal || !strings.Contains(e.Message, "exited") {
			t.Fatalf("error event %s, want INTERNAL_ERROR for the exit", ev.Raw)
		}
		onlyValid(t)
		for _, ev := range events.snapshot()[before:] {
			if bytes.Contains(ev.Raw, []byte("cut off mid-rec")) {
				t.Fatalf("the half record reached the client: %s", ev.Raw)
			}
		}
		// The next prompt starts a new generation, which works.
		prompt(t, c, agentID, "sim: say back again")
		events.waitFrom(t, before, callTimeout, "message_complete of the new generation", func(ev client.Event) bool {
			mc, ok := ev.Msg.(*protocol.MessageComplete)
			return ok && mc.AgentID == agentID && strings.Contains(messageText(mc.Message), "back again")
		})
		onlyValid(t)
	})

	t.Run("garbage and no hello", func(t *testing.T) {
		cwd := shortTemp(t)
		writeFile(t, cwd+"/"+modeFile, modeGarbageStart)
		var cr protocol.AgentCreateData
		err := tryCall(c, &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate, ""), Cwd: cwd}, &cr)
		if pe := protoErr(err); pe == nil || pe.Code != protocol.CodeRuntimeStartFailed {
			t.Fatalf("agent.create with a runtime that never says hello: %v, want RUNTIME_START_FAILED", err)
		}
		onlyValid(t)
	})

	// The daemon is fine: another agent works end to end.
	other, _ := createAgent(t, c)
	attach(t, c, other)
	prompt(t, c, other, "sim: say fine")
	events.waitFor(t, callTimeout, "turn_end of another agent", is(protocol.TypeTurnEnd, other))
	onlyValid(t)
	if d.exited() {
		t.Fatalf("shardd exited: %v", d.State())
	}
}

// messageText is the text of a message's text blocks.
func messageText(m protocol.Message) string {
	var b strings.Builder
	for _, blk := range m.Content {
		if blk.Type == protocol.BlockText {
			b.WriteString(blk.Text)
		}
	}
	return b.String()
}
