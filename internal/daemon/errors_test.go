package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/internal/fakellm"
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

// TestProviderRetryShowsRetrying: a provider request the SDK retries (a
// 503, then a good answer) shows as agent_activity phase "retrying"
// (docs/protocol.md §10.2), and the turn then completes.
func TestProviderRetryShowsRetrying(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		if p.N == 1 {
			return fakellm.Turn{Status: 503, Error: "overloaded"}
		}
		return fakellm.Turn{Text: "recovered", Usage: fakellm.Usage{Input: 3, Output: 1}}
	}))
	cfg := newConfig(t)
	cfg.Provider = config.ProviderConfig{Name: "openai", BaseURL: f.URL + "/v1", Model: fakellm.Model, APIKeyEnv: "SHARD_TEST_FAKE_KEY"}
	h := startOpts(t, cfg, func(o *daemon.Options) { o.Environ = append(o.Environ, "SHARD_TEST_FAKE_KEY=k") })
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, "hello")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	var phases []string
	text := ""
	for _, e := range evs {
		switch m := e.Msg.(type) {
		case *protocol.AgentActivity:
			if m.AgentID == id {
				phases = append(phases, m.Phase)
			}
		case *protocol.MessageDelta:
			text += m.TextDelta
		}
	}
	i := slices.Index(phases, protocol.PhaseRetrying)
	if i < 0 || !slices.Contains(phases[i:], protocol.PhaseStreaming) {
		t.Fatalf("activity phases %v: want retrying, then streaming", phases)
	}
	if text != "recovered" || f.Count() != 2 {
		t.Fatalf("text %q after %d requests", text, f.Count())
	}
}
