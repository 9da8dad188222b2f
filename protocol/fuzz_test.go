package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
)

// specFrames are real records in the shapes of the protocol
// (docs/protocol.md §9, §10, §12).
var specFrames = []string{
	`{"type":"hello","protocol_version":"0.1.0","server_version":"0.1.0","capabilities":["websocket"]}`,
	`{"id":"p1","type":"prompt","agent_id":"a-3","message":"read the config","streaming_behavior":"steer"}`,
	`{"type":"prompt","message":"héllo` + "\u2028" + `wörld","images":[{"type":"image","data":"iVBORw0KGgo=","mime_type":"image/png"}]}`,
	`{"type":"permission_response","agent_id":"a-3","request_id":"req-7","decision":"allow_always"}`,
	`{"type":"permission_response","request_id":"req-7","choice_id":"grant-exact","reason":"ok"}`,
	`{"type":"ui_response","agent_id":"a-3","request_id":"u1","value":["a","b"]}`,
	`{"type":"ui_response","request_id":"u1","value":null}`,
	`{"id":"r1","type":"agent.attach","agent_id":"a-3","role":"observer"}`,
	`{"id":"r2","type":"agent.detach","agent_id":"a-3"}`,
	`{"id":"l1","type":"agent.list"}`,
	`{"id":"l2","type":"agent.list","active":true,"since_ms":1,"limit":2,"cursor":"YS4xLmFnZW50LTE"}`,
	`{"id":"l3","type":"jobs.list","parent_agent_id":"agent-1","limit":2,"cursor":"ai4wLmpvYi0x"}`,
	`{"id":"c1","type":"agent.create","cwd":"/work","headless_policy":"queue","depth":1,"launch_policy":{"maxTasks":4,"maxDepth":2}}`,
	`{"id":"c2","type":"agent.create","cwd":"/work","tools":["fs__read_text_file"],"mcp_servers":{"fs":{"command":"mcp-server-filesystem","args":["/work"],"env":{"K":"v"}},"web":{"url":"https://h/mcp","headers":{"Authorization":"x"}}}}`,
	`{"id":"s1","type":"session_op","agent_id":"a-3","op":"compact","args":{"keep_recent_tokens":20000}}`,
	`{"id":"s2","type":"session_op","op":"fork","args":{"from_entry_id":"e-12"}}`,
	`{"id":"j1","type":"subagent.create","parent_agent_id":"a-1","tasks":[{"name":"lint","task":"run lint"},{"name":"test","task":"run tests"}],"strategy":"parallel"}`,
	`{"id":"j2","type":"subagent.wait","parent_agent_id":"a-1","handles":["job-1","run-2"],"mode":"any","timeout":0}`,
	`{"type":"sync","agent_id":"a-3","status":"waiting_for_permission","mode":"code","capabilities":["streaming-deltas"],"runtime_epoch":0,"live_window":{"messages":[{"id":"m1","role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_call","id":"tc1","name":"bash","args":{}}]}],"compaction_index":0},"pending_requests":[{"type":"permission_request","request_id":"req-7","tool_name":"bash","input":{"command":"rm -rf build"},"prompt":"Run?","options":["allow","allow_always","deny"]}]}`,
	`{"type":"message_delta","agent_id":"a-3","message_id":"m2","block_index":0,"kind":"text","text_delta":"Reading` + "\u2028" + `config` + "\u2029" + `..."}`,
	`{"type":"tool_call","agent_id":"a-1","tool_call_id":"tc1","name":"read","args":{"file":"config.json"},"render":{"kind":"path_list","paths":[{"path":"config.json","kind":"file"}]}}`,
	`{"type":"tool_result","tool_call_id":"tc1","content":{"kind":"text","text":"{}"},"is_error":false,"exit_code":0}`,
	`{"type":"turn_end","turn_id":"t1","usage":{"input":10,"output":5,"cost":0.001}}`,
	`{"type":"response","id":"r1","command":"agent.attach","success":false,"error":{"code":"NOT_FOUND","message":"no agent a-9"}}`,
	`{"type":"error","code":"INTERNAL_ERROR","message":"slow consumer","fatal":true}`,
	`{"type":"subagent_run_changed","parent_agent_id":"a-1","job_id":"job-1","run_id":"run-1","state":"completed","previous_state":"active"}`,
	`{"type":"agent_spawned","info":{"agent_id":"a-4","cwd":"/w","status":"idle","runtime_state":"starting","created_at":1}}`,
}

// seedFrames adds every frame of specFrames, its split halves and a few
// framings.
func seedFrames(f *testing.F) {
	for _, s := range specFrames {
		f.Add([]byte(s))
		f.Add([]byte(s[:len(s)/2]))
		f.Add([]byte(s[len(s)/2:]))
	}
	f.Add([]byte(``))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"type":"prompt","message":5}`))
	f.Add([]byte(`{"id":1,"type":"abort"}`))
	f.Add([]byte(`{"type":"a\"b"}`))
}

// refSplit is the docs/protocol.md §2.1 framing written the obvious way, as
// an oracle for Reader: split on '\n', strip one '\r', reject lines over max,
// skip blank lines.
func refSplit(data []byte, max int) []readResult {
	var out []readResult
	for len(data) > 0 {
		line := data
		data = nil
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, data = line[:i], line[i+1:]
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		switch {
		case len(line) > max:
			out = append(out, tooLong)
		case len(bytes.TrimSpace(line)) == 0:
		default:
			out = append(out, readResult{rec: string(line)})
		}
	}
	return append(out, readResult{err: io.EOF})
}

func FuzzReader(f *testing.F) {
	var stream []byte
	for _, s := range specFrames {
		stream = append(append(stream, s...), '\n')
	}
	f.Add(stream)
	f.Add(bytes.ReplaceAll(stream, []byte("\n"), []byte("\r\n")))
	f.Add(stream[:len(stream)/2])
	f.Add(stream[len(stream)/2:])
	f.Add([]byte("a\r\r\n\n\r\n  \nb\rc\n" + "\u2028\u2029\n"))
	f.Add([]byte("0123456789abcdefXYZ\nok\r\n0123456789abcdef\r\n0123456789abcdefg\r\n"))
	f.Add([]byte("                  \nx"))
	const max = 16
	f.Fuzz(func(t *testing.T, data []byte) {
		got := readAll(t, bytes.NewReader(data), max)
		want := refSplit(data, max)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Reader(%q):\n got %v\nwant %v", data, got, want)
		}
		if got1 := readAll(t, iotest.OneByteReader(bytes.NewReader(data)), max); !reflect.DeepEqual(got1, got) {
			t.Fatalf("one byte at a time, Reader(%q):\n got %v\nwant %v", data, got1, got)
		}
		total := 0
		for _, r := range got {
			if r.err != nil && r.err != io.EOF && !errors.Is(r.err, protocol.ErrRecordTooLong) {
				t.Fatalf("unexpected error %v", r.err)
			}
			if r.err != nil {
				continue
			}
			rec := []byte(r.rec)
			total += len(rec)
			switch {
			case len(rec) == 0:
				t.Fatalf("empty record from %q", data)
			case len(rec) > max:
				t.Fatalf("record of %d bytes over the %d limit", len(rec), max)
			case bytes.IndexByte(rec, '\n') >= 0:
				t.Fatalf("record %q contains a newline", rec)
			case rec[len(rec)-1] == '\r' && !bytes.Contains(data, []byte("\r\r")):
				t.Fatalf("record %q ends with CR but the input has no CR CR", rec)
			case !bytes.Contains(data, rec):
				t.Fatalf("record %q is not a substring of the input", rec)
			}
		}
		if total > len(data) {
			t.Fatalf("records hold %d bytes, more than the %d of input", total, len(data))
		}
	})
}

// hasDuplicateKey is the strict decoder's duplicate rule written the
// obvious way, as an oracle: a json.Decoder token walk that reports an
// object naming one key twice (after unescaping). data must be valid JSON.
func hasDuplicateKey(data []byte) bool {
	type frame struct {
		object, expectKey bool
		keys              map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	value := func() { // a value ended: the enclosing object expects a key
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				if stack[n-1].keys[v] {
					return true
				}
				stack[n-1].keys[v] = true
				stack[n-1].expectKey = false
				continue
			}
			value()
		default:
			value()
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	seedFrames(f)
	f.Add([]byte(`{"id":"d","type":"agent.list","type":"daemon.shutdown"}`))
	f.Add([]byte(`{"id":"p","type":"jobs.prune","older_than_ms":3600000,"dry_run":true}`))
	f.Add([]byte(`{"id":"p","type":"jobs.prune","older_than_ms":-1}`))
	f.Add([]byte(`{"id":"d","type":"agent.list","TYPE":"daemon.shutdown"}`))
	f.Add([]byte(`{"id":"c","type":"agent.create","cwd":"/w","launch_policy":{"maxTasks":1,"max\u0054asks":9}}`))
	f.Add([]byte("{\"id\":\"p\",\"type\":\"prompt\",\"agent_id\":\"a\",\"message\":\"\xff\"}"))
	f.Add([]byte(`{"id":"p","type":"prompt","agent_id":"a","message":"\ud800 \ud83d\ude00"}`))
	f.Add([]byte(`{"id":"r","type":"agent.remove","agent_ids":["agent-1","",3]}`))
	f.Add([]byte(`{"id":"u","type":"agent.update","agent_id":"agent-1","title":"Fix it"}`))
	f.Add([]byte(`{"id":"u","type":"agent.update","agent_id":"agent-1","title":null}`))
	f.Add([]byte(`{"id":"c","type":"cluster.status"}`))
	f.Add([]byte(`{"id":"c","type":"cluster.status","node":"n1"}`))
	f.Add([]byte(`{"id":"` + strings.Repeat("i", 2000) + `","type":"agent.list"}`))
	f.Add([]byte(`{"id":"x","type":"` + strings.Repeat("t", 300) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, h, err := protocol.DecodeCommand(data)
		// What an answer echoes is bounded whatever was sent.
		if len(h.ID) > protocol.MaxIDLen || len(h.AgentID) > protocol.MaxIDLen || len(h.Type) > protocol.MaxNameLen {
			t.Fatalf("header over its limits: id %d, agent_id %d, type %d bytes", len(h.ID), len(h.AgentID), len(h.Type))
		}
		if err == nil {
			// Strict input (docs/protocol.md §2.3): what is executed is what
			// was sent.
			if !utf8.Valid(data) {
				t.Fatalf("decoded a record that is not UTF-8: %q", data)
			}
			if hasDuplicateKey(data) {
				t.Fatalf("decoded a record with a duplicate key: %q", data)
			}
		}
		if err != nil {
			if cmd != nil {
				t.Fatalf("non-nil command %#v with error %v", cmd, err)
			}
			if code := protocol.CodeOf(err); code != protocol.CodeInvalidRequest {
				t.Fatalf("error %v has code %s, want INVALID_REQUEST", err, code)
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Message == "" {
				t.Fatalf("error %#v is not a *protocol.Error with a message", err)
			}
			// The error response is always a well formed record.
			resp := protocol.NewErrorResponse(h.ID, h.Type, err)
			if !json.Valid(resp) {
				t.Fatalf("error response is not valid JSON: %s", resp)
			}
			assertNoRawSeparators(t, resp)
			return
		}
		if *cmd.Head() != h {
			t.Fatalf("command header %+v, DecodeCommand header %+v", *cmd.Head(), h)
		}
		if protocol.CommandScope(h.Type) == protocol.ScopeUnknown {
			t.Fatalf("decoded a command of unknown scope %q", h.Type)
		}
		rec, err := protocol.Marshal(cmd)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", cmd, err)
		}
		assertNoRawSeparators(t, rec)
		if !bytes.HasPrefix(rec, []byte(`{"type":`)) {
			t.Fatalf("record does not start with its type: %s", rec)
		}
		again, h2, err := protocol.DecodeCommand(rec)
		if err != nil {
			t.Fatalf("re-decode of %s (from %q): %v", rec, data, err)
		}
		if h2 != h || reflect.TypeOf(again) != reflect.TypeOf(cmd) {
			t.Fatalf("re-decode gave %T %+v, want %T %+v", again, h2, cmd, h)
		}
		if rec2 := protocol.MustMarshal(again); !bytes.Equal(rec2, rec) {
			t.Fatalf("encoding is not stable:\n first %s\nsecond %s", rec, rec2)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := protocol.DecodeEvent(data)
		if err != nil {
			if ev != nil {
				t.Fatalf("non-nil event with error %v", err)
			}
			if code := protocol.CodeOf(err); code != protocol.CodeInvalidRequest {
				t.Fatalf("error %v has code %s, want INVALID_REQUEST", err, code)
			}
			return
		}
		h, err := protocol.DecodeHeader(data)
		if err != nil {
			t.Fatalf("DecodeEvent succeeded but DecodeHeader failed: %v", err)
		}
		if *ev.Head() != h {
			t.Fatalf("event header %+v, envelope %+v", *ev.Head(), h)
		}
		if u, ok := ev.(*protocol.Unknown); ok {
			if !bytes.Equal(u.Raw, data) {
				t.Fatalf("Unknown.Raw = %q, want the input %q", u.Raw, data)
			}
			for _, typ := range eventTypes {
				if typ == h.Type {
					t.Fatalf("known event type %q decoded as Unknown", typ)
				}
			}
			return
		}
		rec, err := protocol.Marshal(ev)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", ev, err)
		}
		assertNoRawSeparators(t, rec)
		if got := protocol.PeekType(rec); got != h.Type {
			t.Fatalf("PeekType(%s) = %q, want %q", rec, got, h.Type)
		}
		again, err := protocol.DecodeEvent(rec)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", rec, err)
		}
		if reflect.TypeOf(again) != reflect.TypeOf(ev) || *again.Head() != h {
			t.Fatalf("re-decode gave %T %+v, want %T %+v", again, *again.Head(), ev, h)
		}
		if rec2 := protocol.MustMarshal(again); !bytes.Equal(rec2, rec) {
			t.Fatalf("encoding is not stable:\n first %s\nsecond %s", rec, rec2)
		}
	})
}

func FuzzWithAgentID(f *testing.F) {
	for _, s := range specFrames {
		f.Add([]byte(s), "a-3")
	}
	f.Add([]byte(`{}`), "01J0000000000000000000000")
	f.Add([]byte(" { } "), "x")
	f.Add([]byte(`{"a":{"type":"nested"},"type":"status"}`), "a")
	f.Add([]byte(`{"type":"a\"b","x":1}`), `q"uote`)
	f.Add([]byte(`{"type":"status","status":"idle"}`), "\u2028<&>")
	f.Fuzz(func(t *testing.T, data []byte, id string) {
		if !utf8.ValidString(id) {
			return // agent ids are text; invalid UTF-8 cannot round-trip through JSON
		}
		var in map[string]json.RawMessage
		if json.Unmarshal(data, &in) != nil || in == nil {
			return // precondition: a JSON object
		}
		if _, has := in["agent_id"]; has {
			return // precondition: no agent_id yet
		}
		out := protocol.WithAgentID(data, id)
		if !json.Valid(out) {
			t.Fatalf("WithAgentID(%q, %q) = %q, not valid JSON", data, id, out)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		var gotID string
		if err := json.Unmarshal(got["agent_id"], &gotID); err != nil || gotID != id {
			t.Fatalf("agent_id = %s (%v), want %q", got["agent_id"], err, id)
		}
		if len(got) != len(in)+1 {
			t.Fatalf("output has %d keys, want %d: %s", len(got), len(in)+1, out)
		}
		for k, v := range in {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("key %q changed from %s to %s", k, v, got[k])
			}
		}
		// A record that starts with a plain "type" keeps it first.
		const prefix = `{"type":"`
		if rest, ok := bytes.CutPrefix(data, []byte(prefix)); ok {
			if end := bytes.IndexByte(rest, '"'); end >= 0 && bytes.IndexByte(rest[:end], '\\') < 0 {
				want := prefix + string(rest[:end]) + `","agent_id":`
				if !bytes.HasPrefix(out, []byte(want)) {
					t.Fatalf("output %s does not start with %s", out, want)
				}
			}
		}
	})
}

// FuzzDecodeCursor: any string either is refused as INVALID_REQUEST naming
// cursor, or decodes to a cursor of the asked list that survives its own
// encoding (docs/protocol.md §13, paged lists).
func FuzzDecodeCursor(f *testing.F) {
	for _, c := range []protocol.Cursor{
		{Kind: protocol.CursorAgents, At: 1_700_000_000_000, ID: "agent-01j9z7k3m2x4q8r6t0v5w1y3b7"},
		{Kind: protocol.CursorJobs, ID: "job-01j9z7k3m2x4q8r6t0v5w1y3b7"},
	} {
		f.Add(c.Encode())
	}
	f.Add("")
	f.Add("%%%")
	f.Add("bm9wZQ")
	f.Add("YS4tMS5h")
	f.Fuzz(func(t *testing.T, s string) {
		for _, kind := range []protocol.CursorKind{protocol.CursorAgents, protocol.CursorJobs} {
			c, err := protocol.DecodeCursor(kind, s)
			if err != nil {
				if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), `"cursor"`) {
					t.Fatalf("DecodeCursor(%q): %v, want INVALID_REQUEST naming cursor", s, err)
				}
				continue
			}
			if c.Kind != kind || c.ID == "" || c.At < 0 {
				t.Fatalf("DecodeCursor(%q) = %+v", s, c)
			}
			again, err := protocol.DecodeCursor(kind, c.Encode())
			if err != nil || again != c {
				t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
			}
		}
	})
}
