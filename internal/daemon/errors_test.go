package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// TestUnreadableTranscriptIsSessionCorrupt: a runtime that cannot restore
// its session says why, and the daemon answers the start with
// SESSION_CORRUPT and that cause (docs/protocol.md §8), not a retryable
// RUNTIME_START_FAILED "exit status 1". agent_exited carries the cause too.
func TestUnreadableTranscriptIsSessionCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name, cause string
		spoil       func(t *testing.T, path string)
	}{
		{"garbage", "line 1: decode entry", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("not json at all\n{}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", "is a directory", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil)
			c := h.dial()
			id := h.create(c, nil)
			attach(t, c, id, "")
			prompt(t, c, id, "sim: say hi")
			waitFor(t, c, isType(protocol.TypeTurnEnd, id))
			if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
				t.Fatal(err)
			}
			waitFor(t, c, isStatusChange(id, protocol.RuntimeStopped))
			dirs, err := os.ReadDir(h.cfg.SessionsDir())
			if err != nil || len(dirs) != 1 {
				t.Fatalf("sessions: %v, %v", dirs, err)
			}
			tc.spoil(t, filepath.Join(h.cfg.SessionsDir(), dirs[0].Name(), "session.jsonl"))

			_, err = c.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: "again"})
			var pe *protocol.Error
			if protocol.CodeOf(err) != protocol.CodeSessionCorrupt || !errors.As(err, &pe) || !strings.Contains(pe.Message, tc.cause) {
				t.Fatalf("prompt on a spoiled session: %v, want SESSION_CORRUPT naming %q", err, tc.cause)
			}
			ev := waitFor(t, c, func(e client.Event) bool {
				x, ok := e.Msg.(*protocol.AgentExited)
				return ok && x.AgentID == id
			}).Msg.(*protocol.AgentExited)
			if !strings.Contains(ev.Reason, tc.cause) {
				t.Fatalf("agent_exited reason %q, want the cause %q", ev.Reason, tc.cause)
			}
		})
	}
}
