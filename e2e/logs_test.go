//go:build linux

package e2e

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func TestLogsNeverContainPromptText(t *testing.T) {
	t.Parallel()
	// Debug level: the most the daemon ever logs.
	d := startDaemon(t, "--log-level", "debug")
	id, cwd := d.createAgent()

	secret := randomToken(t, "SECRET")
	// A plain prompt (the sim model echoes it back) and one whose tool
	// arguments carry the secret too, through the permission gate.
	d.mustCtl("", "prompt", id, "remember "+secret)
	d.mustCtl("y\n", "prompt", id, `sim: tool write {"path":"s.txt","content":"`+secret+`"}`)
	if got, err := os.ReadFile(filepath.Join(cwd, "s.txt")); err != nil || string(got) != secret {
		t.Fatalf("s.txt = %q (err %v): the secret never reached the agent", got, err)
	}

	// A WebSocket ticket minted over the unix socket, then used (and
	// reused) on the WebSocket endpoint, so the upgrade path runs too.
	c := d.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ticket protocol.WSTicketData
	if err := c.Call(ctx, &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &ticket); err != nil {
		t.Fatalf("ws.ticket: %v", err)
	}
	if ticket.Ticket == "" || ticket.URL == "" {
		t.Fatalf("ws.ticket data = %+v, want a ticket and a URL", ticket)
	}
	wsURL := "ws" + strings.TrimPrefix(ticket.URL, "http")
	ws, err := client.DialWebSocket(ctx, wsURL, ticket.Ticket)
	if err != nil {
		t.Fatalf("WebSocket dial with a fresh ticket: %v", err)
	}
	ws.Close()
	if again, err := client.DialWebSocket(ctx, wsURL, ticket.Ticket); err == nil {
		again.Close() // whether a ticket is single-use is not this test's business
	}

	// Stop cleanly so every log is flushed and closed.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := d.waitExit(t, exitTimeout); st.ExitCode() != 0 {
		t.Fatalf("shardd after SIGTERM: %v", st)
	}

	logs := filesUnder(t, d.logDir())
	if _, ok := logs[filepath.Join(d.logDir(), "shardd.log")]; !ok {
		t.Fatalf("no shardd.log among the logs: %v", keys(logs))
	}
	if _, ok := logs[filepath.Join(d.logDir(), "agents", id+".log")]; !ok {
		t.Fatalf("no agent log for %s among the logs: %v", id, keys(logs))
	}
	for path, content := range logs {
		if bytes.Contains(content, []byte(secret)) {
			t.Errorf("%s contains the prompt text %s", path, secret)
		}
		if bytes.Contains(content, []byte(ticket.Ticket)) {
			t.Errorf("%s contains the WebSocket ticket", path)
		}
	}
	// Tickets are never persisted either, anywhere in the home.
	for path, content := range filesUnder(t, d.home) {
		if bytes.Contains(content, []byte(ticket.Ticket)) {
			t.Errorf("%s contains the WebSocket ticket", path)
		}
	}

	// The transcript may keep the prompt: it must, or this test proved
	// nothing about where the secret went.
	inSessions := false
	for _, content := range filesUnder(t, filepath.Join(d.home, "sessions")) {
		inSessions = inSessions || bytes.Contains(content, []byte(secret))
	}
	if !inSessions {
		t.Errorf("the secret is not in the session transcript: the prompts never reached the agent")
	}
}

// filesUnder reads every regular file under dir, by path.
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = b
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return out
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
