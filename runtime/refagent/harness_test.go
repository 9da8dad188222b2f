package refagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// waitTimeout bounds every wait for an event; tests never sleep to sync.
const waitTimeout = 5 * time.Second

// event is one record the runtime wrote.
type event struct {
	raw []byte
	typ string
	msg protocol.Typed
}

// lockedBuffer is a goroutine-safe bytes.Buffer for Stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness drives one in-process Run through pipes: the test writes
// commands to stdin and reads events in order.
type harness struct {
	t      *testing.T
	opts   Options
	in     *io.PipeWriter
	cancel context.CancelFunc
	runErr chan error
	exits  chan int
	hangs  chan struct{}
	stderr *lockedBuffer

	readerDone chan struct{}
	more       chan struct{}
	mu         sync.Mutex
	lines      [][]byte // every record written, in order; guarded by mu

	pos      int // next unread record (test goroutine only)
	stopOnce sync.Once
	stopErr  error
	nextID   int
}

// start runs the runtime with test options (a temp Cwd, a 10 s headless
// timeout, recorded Exit and IgnoreSignals); mod adjusts them.
func start(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{
		t:          t,
		in:         inW,
		runErr:     make(chan error, 1),
		exits:      make(chan int, 4),
		hangs:      make(chan struct{}, 4),
		stderr:     &lockedBuffer{},
		readerDone: make(chan struct{}),
		more:       make(chan struct{}, 1),
	}
	h.opts = Options{
		Stdio: Stdio{Stdin: inR, Stdout: outW, Stderr: h.stderr},
		Identity: Identity{
			AgentID:       "agent-test",
			SessionID:     "sess-test",
			Cwd:           t.TempDir(),
			ServerVersion: "test",
		},
		Headless: Headless{HeadlessTimeout: 10 * time.Second},
		Hooks: Hooks{
			Exit:          func(code int) { h.exits <- code },
			IgnoreSignals: func() { h.hangs <- struct{}{} },
		},
	}
	if mod != nil {
		mod(&h.opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	opts := h.opts
	go func() {
		err := Run(ctx, opts)
		_ = outW.Close()
		h.runErr <- err
	}()
	go h.readOut(outR)
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
	return h
}

func (h *harness) readOut(r io.Reader) {
	defer close(h.readerDone)
	rd := protocol.NewReader(r, 0)
	for {
		rec, err := rd.Next()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.lines = append(h.lines, bytes.Clone(rec))
		h.mu.Unlock()
		select {
		case h.more <- struct{}{}:
		default:
		}
	}
}

// stop closes stdin and waits for Run to return (cancelling its context if
// it does not), then for the output reader. It returns Run's error.
func (h *harness) stop() error {
	h.stopOnce.Do(func() {
		_ = h.in.Close()
		select {
		case h.stopErr = <-h.runErr:
		case <-time.After(waitTimeout):
			h.t.Errorf("Run did not return after stdin EOF")
			h.cancel()
			h.stopErr = <-h.runErr
		}
		h.cancel()
		<-h.readerDone
	})
	return h.stopErr
}

// all returns every record written so far.
func (h *harness) all() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.lines...)
}

// next returns the next record, failing the test after waitTimeout.
func (h *harness) next() event {
	h.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		h.mu.Lock()
		if h.pos < len(h.lines) {
			raw := h.lines[h.pos]
			h.pos++
			h.mu.Unlock()
			return h.decode(raw)
		}
		h.mu.Unlock()
		select {
		case <-h.more:
		case <-h.readerDone:
			h.mu.Lock()
			n := len(h.lines)
			h.mu.Unlock()
			if h.pos >= n {
				h.t.Fatalf("output ended while waiting for an event")
			}
		case <-deadline:
			h.t.Fatalf("no event within %s", waitTimeout)
		}
	}
}

// noEventWithin asserts that nothing is written for d.
func (h *harness) noEventWithin(d time.Duration) {
	h.t.Helper()
	deadline := time.After(d)
	for {
		h.mu.Lock()
		n := len(h.lines)
		h.mu.Unlock()
		if h.pos < n {
			h.t.Fatalf("unexpected event: %s", h.lines[h.pos])
		}
		select {
		case <-h.more:
		case <-deadline:
			return
		}
	}
}

func (h *harness) decode(raw []byte) event {
	h.t.Helper()
	msg, err := protocol.DecodeEvent(raw)
	if err != nil {
		h.t.Fatalf("undecodable record %s: %v", raw, err)
	}
	return event{raw: raw, typ: msg.Head().Type, msg: msg}
}

// until returns the events up to and including the first of type typ.
func (h *harness) until(typ string) []event {
	h.t.Helper()
	var evs []event
	for {
		ev := h.next()
		evs = append(evs, ev)
		if ev.typ == typ {
			return evs
		}
	}
}

// untilIdle returns the events up to the end of the current turn(s): the
// status idle or error that follows a turn_end.
func (h *harness) untilIdle() []event {
	h.t.Helper()
	var evs []event
	ended := false
	for {
		ev := h.next()
		evs = append(evs, ev)
		switch m := ev.msg.(type) {
		case *protocol.TurnEnd:
			ended = true
		case *protocol.TurnStart:
			ended = false
		case *protocol.Status:
			if ended && (m.Status == protocol.StatusIdle || m.Status == protocol.StatusError) {
				return evs
			}
		}
	}
}

// handshake consumes hello and sync.
func (h *harness) handshake() (*protocol.Hello, *protocol.Sync) {
	h.t.Helper()
	hello := h.next()
	sync := h.next()
	he, ok1 := hello.msg.(*protocol.Hello)
	sy, ok2 := sync.msg.(*protocol.Sync)
	if !ok1 || !ok2 {
		h.t.Fatalf("want hello then sync, got %s then %s", hello.raw, sync.raw)
	}
	return he, sy
}

// send writes one command: a string is sent verbatim, anything else is
// marshalled.
func (h *harness) send(v any) {
	h.t.Helper()
	var b []byte
	if s, ok := v.(string); ok {
		b = []byte(s)
	} else {
		b = protocol.MustMarshal(v)
	}
	if _, err := h.in.Write(append(b, '\n')); err != nil {
		h.t.Fatalf("write stdin: %v", err)
	}
}

func (h *harness) id(prefix string) string {
	h.nextID++
	return fmt.Sprintf("%s%d", prefix, h.nextID)
}

// prompt sends a prompt and returns its id.
func (h *harness) prompt(text string) string {
	h.t.Helper()
	id := h.id("p")
	h.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: id}, Message: text})
	return id
}

func (h *harness) promptWith(text, behavior string) string {
	h.t.Helper()
	id := h.id("p")
	h.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: id}, Message: text, StreamingBehavior: behavior})
	return id
}

// response reads events until the response with id and returns it together
// with the events before it.
func (h *harness) response(id string) (*protocol.Response, []event) {
	h.t.Helper()
	var before []event
	for {
		ev := h.next()
		if r, ok := ev.msg.(*protocol.Response); ok && r.ID == id {
			return r, before
		}
		before = append(before, ev)
	}
}

// getSync asks for a snapshot and returns it with the events before the
// response.
func (h *harness) getSync() (protocol.GetSyncData, []event) {
	h.t.Helper()
	id := h.id("s")
	h.send(protocol.GetSync{Header: protocol.Header{Type: protocol.TypeGetSync, ID: id}})
	r, before := h.response(id)
	if !r.Success || r.Command != protocol.TypeGetSync {
		h.t.Fatalf("get_sync failed: %+v", r)
	}
	var d protocol.GetSyncData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		h.t.Fatalf("decode get_sync data: %v", err)
	}
	return d, before
}

// quietSync asserts that the runtime writes nothing but the get_sync
// response: no event was pending in the stream.
func (h *harness) quietSync() protocol.GetSyncData {
	h.t.Helper()
	d, before := h.getSync()
	if len(before) > 0 {
		h.t.Fatalf("unexpected events before get_sync response: %s", types(before))
	}
	return d
}

// types lists the event types, collapsing runs of message_delta into
// "message_delta*".
func types(evs []event) []string {
	var out []string
	for _, ev := range evs {
		typ := ev.typ
		if typ == protocol.TypeMessageDelta {
			typ += "*"
			if len(out) > 0 && out[len(out)-1] == typ {
				continue
			}
		}
		out = append(out, typ)
	}
	return out
}

func wantTypes(t *testing.T, evs []event, want ...string) {
	t.Helper()
	got := types(evs)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("event types:\n got %v\nwant %v", got, want)
	}
}

// of returns the messages of type T among evs.
func of[T protocol.Typed](evs []event) []T {
	var out []T
	for _, ev := range evs {
		if m, ok := ev.msg.(T); ok {
			out = append(out, m)
		}
	}
	return out
}

// one returns the single message of type T among evs.
func one[T protocol.Typed](t *testing.T, evs []event) T {
	t.Helper()
	ms := of[T](evs)
	if len(ms) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, got %d in %v", zero, len(ms), types(evs))
	}
	return ms[0]
}

// statuses lists the status values among evs.
func statuses(evs []event) []protocol.AgentStatus {
	var out []protocol.AgentStatus
	for _, s := range of[*protocol.Status](evs) {
		out = append(out, s.Status)
	}
	return out
}

// textOf concatenates the text blocks of a message.
func textOf(m protocol.Message) string {
	var sb strings.Builder
	for _, b := range m.Content {
		if b.Type == protocol.BlockText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// assistantText concatenates the text of every message_complete in evs.
func assistantText(evs []event) string {
	var sb strings.Builder
	for _, mc := range of[*protocol.MessageComplete](evs) {
		sb.WriteString(textOf(mc.Message))
	}
	return sb.String()
}

func mustResponse(t *testing.T, r *protocol.Response, command string) {
	t.Helper()
	if !r.Success || r.Command != command || r.Error != nil {
		t.Fatalf("want successful %s response, got %+v", command, r)
	}
}

func mustErrorResponse(t *testing.T, r *protocol.Response, code protocol.ErrorCode, contains string) {
	t.Helper()
	if r.Success || r.Error == nil || r.Error.Code != code || !strings.Contains(r.Error.Message, contains) {
		t.Fatalf("want %s error containing %q, got %+v (error %+v)", code, contains, r, r.Error)
	}
}
