package refagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// heldSync is a transcript sync function a test holds: each call reports on
// entered and waits for a token on release (or for release to be closed).
type heldSync struct {
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func newHeldSync() *heldSync {
	return &heldSync{entered: make(chan struct{}, 16), release: make(chan struct{}, 16)}
}

func (s *heldSync) sync(f *os.File) error {
	s.calls.Add(1)
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return f.Sync()
}

// waitEntered waits until a sync is being held.
func (s *heldSync) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(waitTimeout):
		t.Fatalf("no transcript fsync within %s", waitTimeout)
	}
}

// sendWithin writes one command like h.send but fails the test, instead of
// blocking on the stdin pipe, when the runtime does not read it within
// waitTimeout (its read loop stuck behind a held fsync).
func sendWithin(t *testing.T, h *harness, v any) {
	t.Helper()
	done := make(chan error, 1)
	b := append(protocol.MustMarshal(v), '\n')
	go func() { _, err := h.in.Write(b); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write stdin: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the runtime read no command within %s while a transcript fsync was held", waitTimeout)
	}
}

// getSyncWithin is h.getSync through sendWithin.
func getSyncWithin(t *testing.T, h *harness) (protocol.GetSyncData, []event) {
	t.Helper()
	id := h.id("s")
	sendWithin(t, h, protocol.GetSync{Header: protocol.Header{Type: protocol.TypeGetSync, ID: id}})
	r, before := h.response(id)
	mustResponse(t, r, protocol.TypeGetSync)
	var d protocol.GetSyncData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("decode get_sync data: %v", err)
	}
	return d, before
}

// TestCommandsAnsweredWhileTranscriptFsyncIsHeld: read-only commands
// (get_sync, list_modes) are answered while the runtime waits for a
// transcript fsync, and nothing that depends on the entry (message_complete,
// turn_end) is announced before the fsync returned.
func TestCommandsAnsweredWhileTranscriptFsyncIsHeld(t *testing.T) {
	dir := t.TempDir()
	hs := newHeldSync()
	h := start(t, func(o *Options) {
		o.SessionDir = dir
		o.syncFile = hs.sync
	})
	t.Cleanup(func() { close(hs.release) }) // runs before the harness stops Run
	h.handshake()

	id := h.prompt("sim: say hello there")
	hs.waitEntered(t) // the prompt's entry
	resp, _ := h.response(id)
	mustResponse(t, resp, protocol.TypePrompt)

	d, before := getSyncWithin(t, h)
	for _, e := range before {
		if e.typ == protocol.TypeMessageComplete || e.typ == protocol.TypeTurnEnd {
			t.Fatalf("%s before the prompt's fsync returned: %s", e.typ, e.raw)
		}
	}
	if len(d.LiveWindow.Messages) != 1 || d.LiveWindow.Messages[0].Role != roleUser {
		t.Fatalf("get_sync while the prompt's fsync is held: window %+v; want just the prompt", d.LiveWindow.Messages)
	}
	sendWithin(t, h, protocol.ListModes{Header: protocol.Header{Type: protocol.TypeListModes, ID: "lm"}})
	lm, _ := h.response("lm")
	mustResponse(t, lm, protocol.TypeListModes)

	hs.release <- struct{}{}
	hs.waitEntered(t) // the assistant message's entry
	d, before = getSyncWithin(t, h)
	for _, e := range before {
		if e.typ == protocol.TypeMessageComplete || e.typ == protocol.TypeTurnEnd {
			t.Fatalf("%s before the reply's fsync returned: %s", e.typ, e.raw)
		}
	}
	if len(d.LiveWindow.Messages) != 1 {
		t.Fatalf("get_sync while the reply's fsync is held: %d messages; want the reply to enter only with its message_complete", len(d.LiveWindow.Messages))
	}

	hs.release <- struct{}{}
	evs := h.untilIdle()
	mc := one[*protocol.MessageComplete](t, evs)
	one[*protocol.TurnEnd](t, evs)
	if got := h.quietSync().LiveWindow.Messages; len(got) != 2 || got[1].ID != mc.MessageID {
		t.Fatalf("window after the turn = %+v; want prompt and reply %s", got, mc.MessageID)
	}
	entries, err := readTranscript(filepath.Join(dir, sessionFileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Role != roleUser || entries[1].ID != mc.MessageID {
		t.Fatalf("transcript = %+v; want the prompt then the reply", entries)
	}
}

// TestSessionDurableGroupsSyncs: one fsync covers every line written before
// it started; lines stay in write order.
func TestSessionDurableGroupsSyncs(t *testing.T) {
	dir := t.TempDir()
	var syncs atomic.Int32
	s, _, err := openSession(dir, newIDGen(), time.Now(), func(f *os.File) error {
		syncs.Add(1)
		return f.Sync()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	var tickets []writeTicket
	for _, id := range []string{"msg-1", "msg-2", "msg-3"} {
		tk, err := s.write(entry{Type: entryMessage, ID: id, messageFields: messageFields{Role: roleUser}})
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if err := s.durable(tickets[1]); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tickets {
		if err := s.durable(tk); err != nil {
			t.Fatal(err)
		}
	}
	if n := syncs.Load(); n != 1 {
		t.Errorf("fsyncs = %d; want 1 covering all three lines", n)
	}
	if err := s.durable(writeTicket{}); err != nil || syncs.Load() != 1 {
		t.Errorf("durable(zero ticket) = %v after %d syncs; want nil without a sync", err, syncs.Load())
	}
	entries, err := readTranscript(s.path())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[0].ID != "msg-1" || entries[2].ID != "msg-3" {
		t.Fatalf("transcript = %+v; want msg-1, msg-2, msg-3", entries)
	}
	if n, head := s.stats(); n != 3 || head != "msg-3" {
		t.Errorf("stats = %d, %q; want 3, msg-3", n, head)
	}
}
