package acp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// termClient is a client whose agent cwd is tr's, answering every ask
// with answer.
func termClient(t *testing.T, answer string) (*client, *askEvents, fsTree) {
	t.Helper()
	tr := newFSTree(t)
	ev := &askEvents{answer: answer}
	b := New(Options{Cwd: tr.cwd})
	b.ev = ev
	c := &client{b: b}
	t.Cleanup(c.b.terms.closeAll)
	return c, ev, tr
}

func create(t *testing.T, c *client, req sdk.CreateTerminalRequest) string {
	t.Helper()
	res, err := c.CreateTerminal(context.Background(), req)
	if err != nil {
		t.Fatalf("create %s %v: %v", req.Command, req.Args, err)
	}
	return res.TerminalId
}

func wait(t *testing.T, c *client, id string) sdk.WaitForTerminalExitResponse {
	t.Helper()
	res, err := c.WaitForTerminalExit(context.Background(), sdk.WaitForTerminalExitRequest{TerminalId: id})
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return res
}

func output(t *testing.T, c *client, id string) sdk.TerminalOutputResponse {
	t.Helper()
	res, err := c.TerminalOutput(context.Background(), sdk.TerminalOutputRequest{TerminalId: id})
	if err != nil {
		t.Fatalf("output %s: %v", id, err)
	}
	return res
}

// TestTerminalRunsAllowedCommand: an allowed command is asked first (tool
// execute, its command line as the input), runs without a shell in the
// agent's cwd with the request's env, and its output (stdout and stderr)
// and exit code are read by wait_for_exit and output.
func TestTerminalRunsAllowedCommand(t *testing.T) {
	c, ev, tr := termClient(t, "allow")
	id := create(t, c, sdk.CreateTerminalRequest{
		Command: "sh", Args: []string{"-c", `echo "out $FOO"; echo err >&2; pwd; exit 3`},
		Env: []sdk.EnvVariable{{Name: "FOO", Value: "bar"}},
	})
	if len(ev.asks) != 1 || ev.asks[0].Tool.Name != "execute" ||
		ev.asks[0].Tool.Args["command"] != `sh -c "echo \"out $FOO\"; echo err >&2; pwd; exit 3"` {
		t.Fatalf("asks = %+v", ev.asks)
	}
	w := wait(t, c, id)
	if w.ExitCode == nil || *w.ExitCode != 3 || w.Signal != nil {
		t.Fatalf("wait = %+v", w)
	}
	o := output(t, c, id)
	if want := "out bar\nerr\n" + tr.real + "\n"; o.Output != want || o.Truncated {
		t.Fatalf("output = %q (truncated %v), want %q", o.Output, o.Truncated, want)
	}
	if o.ExitStatus == nil || o.ExitStatus.ExitCode == nil || *o.ExitStatus.ExitCode != 3 {
		t.Fatalf("exit status = %+v", o.ExitStatus)
	}

	// A cwd inside the agent's (relative here) is used.
	sub := "sub"
	id = create(t, c, sdk.CreateTerminalRequest{Command: "pwd", Cwd: &sub})
	wait(t, c, id)
	if o := output(t, c, id); o.Output != filepath.Join(tr.real, "sub")+"\n" {
		t.Fatalf("pwd in sub = %q", o.Output)
	}
	// A command that does not exist is an error, not a terminal.
	if _, err := c.CreateTerminal(context.Background(), sdk.CreateTerminalRequest{Command: "no-such-command-shard"}); err == nil {
		t.Fatal("a missing command created a terminal")
	}
}

// TestTerminalDeniedRunsNothing: deny and a cancelled ask answer an error
// and start nothing (the touched file never appears, no terminal is kept).
func TestTerminalDeniedRunsNothing(t *testing.T) {
	for _, answer := range []string{"deny", ""} {
		c, ev, tr := termClient(t, answer)
		marker := filepath.Join(tr.real, "marker")
		_, err := c.CreateTerminal(context.Background(), sdk.CreateTerminalRequest{Command: "touch", Args: []string{marker}})
		var re *sdk.RequestError
		if !errors.As(err, &re) || re.Code != -32000 {
			t.Fatalf("answer %q: err = %v, want permission denied", answer, err)
		}
		if len(ev.asks) != 1 || ev.asks[0].Tool.Args["command"] != "touch "+marker {
			t.Fatalf("answer %q: asks = %+v", answer, ev.asks)
		}
		if len(c.b.terms.byID) != 0 {
			t.Fatalf("answer %q: terminals = %v", answer, c.b.terms.byID)
		}
		if _, err := os.Lstat(marker); !os.IsNotExist(err) {
			t.Fatalf("answer %q: the denied command ran: %v", answer, err)
		}
	}
}

// TestTerminalCwdConfined: a cwd outside the agent's is refused (invalid
// params) before anything is asked or run.
func TestTerminalCwdConfined(t *testing.T) {
	c, ev, tr := termClient(t, "allow")
	escapes := tr.escapes()
	escapes["outside dir"] = tr.out
	escapes["root dir"] = "/"
	for what, p := range escapes {
		_, err := c.CreateTerminal(context.Background(), sdk.CreateTerminalRequest{Command: "true", Cwd: &p})
		refused(t, "cwd "+what, err)
	}
	if len(ev.asks) != 0 || len(c.b.terms.byID) != 0 {
		t.Fatalf("an escaping cwd asked or ran: %+v", ev.asks)
	}
}

// TestTerminalOutputLimit: past outputByteLimit the start of the output is
// cut, at a character boundary, and truncated is set.
func TestTerminalOutputLimit(t *testing.T) {
	c, _, _ := termClient(t, "allow")
	for _, tc := range []struct {
		text  string
		limit int
		want  string
		trunc bool
	}{
		{"abcdefghij", 4, "ghij", true},
		{"abcd", 4, "abcd", false},
		{"éa", 2, "a", true}, // the last 2 bytes start inside é
		{"aé", 2, "é", true},
	} {
		limit := tc.limit
		id := create(t, c, sdk.CreateTerminalRequest{Command: "printf", Args: []string{"%s", tc.text}, OutputByteLimit: &limit})
		wait(t, c, id)
		if o := output(t, c, id); o.Output != tc.want || o.Truncated != tc.trunc {
			t.Fatalf("%q limit %d: %q truncated %v, want %q %v", tc.text, tc.limit, o.Output, o.Truncated, tc.want, tc.trunc)
		}
	}
}

// TestTerminalKill: kill ends a sleep 30, wait_for_exit returns its
// signal, and the terminal stays readable until released; a released id
// is unknown.
func TestTerminalKill(t *testing.T) {
	c, _, _ := termClient(t, "allow")
	id := create(t, c, sdk.CreateTerminalRequest{Command: "sleep", Args: []string{"30"}})
	if o := output(t, c, id); o.ExitStatus != nil {
		t.Fatalf("running: exit status %+v", o.ExitStatus)
	}
	if _, err := c.KillTerminal(context.Background(), sdk.KillTerminalRequest{TerminalId: id}); err != nil {
		t.Fatal(err)
	}
	w := wait(t, c, id)
	if w.Signal == nil || *w.Signal != "SIGKILL" || w.ExitCode != nil {
		t.Fatalf("wait after kill = %+v", w)
	}
	if o := output(t, c, id); o.ExitStatus == nil || o.ExitStatus.Signal == nil {
		t.Fatalf("output after kill: %+v", o)
	}
	if _, err := c.ReleaseTerminal(context.Background(), sdk.ReleaseTerminalRequest{TerminalId: id}); err != nil {
		t.Fatal(err)
	}
	_, err := c.TerminalOutput(context.Background(), sdk.TerminalOutputRequest{TerminalId: id})
	refused(t, "output of a released terminal", err)
}

// gone checks the terminal's process was killed and reaped.
func gone(t *testing.T, what string, tm *terminal) {
	t.Helper()
	if !tm.exited() {
		t.Fatalf("%s: still running", what)
	}
	if err := syscall.Kill(tm.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("%s: pid %d: %v, want no such process", what, tm.cmd.Process.Pid, err)
	}
	if tm.status.Signal == nil || *tm.status.Signal != "SIGKILL" {
		t.Fatalf("%s: status %+v, want killed", what, tm.status)
	}
}

// TestTerminalReleaseAndCloseKill: release of a running command kills it
// before it answers; the Backend's Close kills the ones still held and
// refuses new ones.
func TestTerminalReleaseAndCloseKill(t *testing.T) {
	c, _, _ := termClient(t, "allow")
	id := create(t, c, sdk.CreateTerminalRequest{Command: "sleep", Args: []string{"30"}})
	tm, _ := c.b.terms.get(id)
	if _, err := c.ReleaseTerminal(context.Background(), sdk.ReleaseTerminalRequest{TerminalId: id}); err != nil {
		t.Fatal(err)
	}
	gone(t, "released", tm)

	id = create(t, c, sdk.CreateTerminalRequest{Command: "sleep", Args: []string{"30"}})
	tm, _ = c.b.terms.get(id)
	if err := c.b.Close(); err != nil {
		t.Fatal(err)
	}
	gone(t, "closed", tm)
	if _, err := c.CreateTerminal(context.Background(), sdk.CreateTerminalRequest{Command: "true"}); err == nil {
		t.Fatal("a terminal was created after Close")
	}
}
