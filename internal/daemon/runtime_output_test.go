package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// TestInvalidRuntimeRecordsNeverReachClients: a runtime that writes lines
// that are not whole JSON objects (garbage, a truncated record whose type
// is readable) must not break the clients' framing: the daemon drops them,
// tells attachments once with a non-fatal PROTOCOL_ERROR, and the turn
// goes on. (Found by the fault suite, package faults.)
func TestInvalidRuntimeRecordsNeverReachClients(t *testing.T) {
	script := filepath.Join(shortTemp(t), "rt.sh")
	// After the runtime's turn_start, two bad lines follow.
	body := "#!/bin/sh\n" + runtimeBin + " agent --headless | while IFS= read -r line; do\n" +
		"  printf '%s\\n' \"$line\"\n" +
		"  case \"$line\" in *'\"type\":\"turn_start\"'*) printf '%s\\n' 'not json' '{\"type\":\"message_delta\",\"text_delta\":\"cut' ;; esac\n" +
		"done\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	h := startOpts(t, newConfig(t), func(o *daemon.Options) { o.RuntimePath, o.RuntimeArgs = script, nil })
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, "sim: say whole")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	errors := 0
	for _, e := range evs {
		var obj map[string]any
		if json.Unmarshal(e.Raw, &obj) != nil {
			t.Fatalf("client got an invalid record %q", e.Raw)
		}
		if ev, ok := e.Msg.(*protocol.ErrorEvent); ok {
			errors++
			if ev.Code != protocol.CodeProtocolError || ev.Fatal || ev.AgentID != id {
				t.Errorf("error event %s, want a non-fatal PROTOCOL_ERROR for %s", e.Raw, id)
			}
		}
	}
	if errors != 1 {
		t.Errorf("%d error events for two invalid records, want 1", errors)
	}
	if got := turnText(evs); got != "whole" {
		t.Errorf("turn text %q, want %q", got, "whole")
	}
}
