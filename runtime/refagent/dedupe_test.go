package refagent

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestDedupeKeyAcceptsAReportOnce: a prompt repeated with the same dedupe
// key — a completion report the daemon re-sends after a crash — is
// acknowledged as a duplicate and not run again, also by a restarted
// runtime on the same session.
func TestDedupeKeyAcceptsAReportOnce(t *testing.T) {
	dir := t.TempDir()
	send := func(h *harness) *protocol.Response {
		id := h.id("r")
		h.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: id}, Message: "sim: say report seen",
			StreamingBehavior: protocol.BehaviorFollowUp, DedupeKey: "report:run-1"})
		resp, _ := h.response(id)
		return resp
	}
	h := start(t, func(o *Options) { o.SessionDir = dir })
	h.handshake()
	if r := send(h); !r.Success || strings.Contains(string(r.Data), "duplicate") {
		t.Fatalf("first delivery = %+v", r)
	}
	h.untilIdle()
	if r := send(h); !r.Success || !strings.Contains(string(r.Data), `"duplicate":true`) {
		t.Fatalf("repeat in the same run = %+v", r)
	}
	h.noEventWithin(200e6)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	h2 := start(t, func(o *Options) { o.SessionDir = dir })
	_, sync := h2.handshake()
	n := 0
	for _, m := range sync.LiveWindow.Messages {
		if m.Role == "user" && textOf(m) == "sim: say report seen" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the report is in the window %d times", n)
	}
	if r := send(h2); !r.Success || !strings.Contains(string(r.Data), `"duplicate":true`) {
		t.Fatalf("repeat after a restart = %+v", r)
	}
	// Another key is delivered normally.
	id := h2.id("r")
	h2.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: id}, Message: "sim: say other",
		StreamingBehavior: protocol.BehaviorFollowUp, DedupeKey: "report:run-2"})
	if r, _ := h2.response(id); strings.Contains(string(r.Data), "duplicate") {
		t.Fatalf("a new key was treated as a duplicate: %+v", r)
	}
	if got := assistantText(h2.untilIdle()); got != "other" {
		t.Fatalf("new report's turn said %q", got)
	}
}
