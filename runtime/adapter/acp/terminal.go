package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"
	"golang.org/x/sys/unix"

	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/runtime/adapter"
)

// maxTerminalOutput bounds a terminal's retained output when the agent
// gives no (or a larger) outputByteLimit: the buffer never grows past it.
const maxTerminalOutput = 1 << 20

// terminalWaitDelay bounds how long a terminal's exit waits for its
// output pipe after the process itself ended (a grandchild may hold it).
const terminalWaitDelay = 2 * time.Second

// terminals are the agent's terminal/* processes, by id. The SDK calls
// the client's methods from its own goroutines, so a mutex guards the
// table; each terminal guards its own output.
type terminals struct {
	// waiters owns each terminal's goroutine that waits for its process;
	// closeAll closes it.
	waiters xsync.Group

	mu     sync.Mutex // protects the following
	next   int
	byID   map[string]*terminal
	closed bool
}

// terminal is one command the agent runs: exec'd without a shell, in the
// adapter's process group, dying with the adapter (Pdeathsig).
type terminal struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and its output drained

	mu        sync.Mutex
	out       []byte
	limit     int
	truncated bool
	status    sdk.TerminalExitStatus // set before done closes
}

// Write keeps the last limit bytes of the output, cut at a character
// boundary as ACP requires (so possibly a little less than limit).
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out = append(t.out, p...)
	if len(t.out) > t.limit {
		cut := len(t.out) - t.limit
		for cut < len(t.out) && !utf8.RuneStart(t.out[cut]) {
			cut++
		}
		t.out = append(t.out[:0], t.out[cut:]...)
		t.truncated = true
	}
	return len(p), nil
}

func (t *terminal) output() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.out), t.truncated
}

func (t *terminal) exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// kill ends the process if it still runs; it does not wait.
func (t *terminal) kill() {
	if !t.exited() {
		_ = t.cmd.Process.Kill()
	}
}

// exitStatus is how a process ended: its exit code, or the signal's
// name (e.g. SIGKILL) when a signal ended it.
func exitStatus(ps *os.ProcessState) sdk.TerminalExitStatus {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = strconv.Itoa(int(ws.Signal()))
		}
		return sdk.TerminalExitStatus{Signal: &name}
	}
	code := ps.ExitCode()
	return sdk.TerminalExitStatus{ExitCode: &code}
}

// errNoTerminal answers an unknown (or released) terminal id.
func errNoTerminal(id string) error {
	return sdk.NewInvalidParams(map[string]string{"terminalId": "no terminal " + strconv.Quote(id)})
}

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.byID[id]; ok {
		return t, nil
	}
	return nil, errNoTerminal(id)
}

// add registers t, whose process has started, and starts the goroutine
// that waits for it; once the adapter is closing it refuses, and the
// caller kills and waits for the process itself.
func (ts *terminals) add(t *terminal) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return "", errors.New("the adapter is closing")
	}
	if ts.byID == nil {
		ts.byID = map[string]*terminal{}
	}
	ts.next++
	id := "term-" + strconv.Itoa(ts.next)
	ts.byID[id] = t
	// Never refused: closeAll closes the group only after setting closed
	// (under mu).
	ts.waiters.Go(t.wait)
	return id, nil
}

// wait waits for the process, then records its status and closes done.
func (t *terminal) wait() {
	_ = t.cmd.Wait()
	t.status = exitStatus(t.cmd.ProcessState)
	close(t.done)
}

func (ts *terminals) remove(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok {
		return nil, errNoTerminal(id)
	}
	delete(ts.byID, id)
	return t, nil
}

// closeAll kills every terminal and waits for each to end (released ones
// included); later creates are refused. Backend.Close runs it.
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	all := ts.byID
	ts.byID = nil
	ts.mu.Unlock()
	for _, t := range all {
		t.kill()
	}
	ts.waiters.Close()
}

// commandLine is the command as the permission request shows it, each
// argument quoted where it needs to be.
func commandLine(command string, args []string) string {
	parts := make([]string, 0, 1+len(args))
	for _, a := range append([]string{command}, args...) {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>*?()[]{}#~") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// CreateTerminal implements terminal/create: the cwd (default the
// agent's) is confined like an fs path, the command line is asked first
// like a write (tool "execute"), and only then is the command exec'd —
// no shell — with the agent's environment plus the request's variables,
// stdout and stderr into one bounded buffer.
func (c *client) CreateTerminal(ctx context.Context, req sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.CreateTerminalResponse{}, err
	}
	defer end()
	if req.Command == "" {
		return sdk.CreateTerminalResponse{}, sdk.NewInvalidParams(map[string]string{"command": "required"})
	}
	dir := c.b.opts.Cwd
	if req.Cwd != nil && *req.Cwd != "" {
		dir = *req.Cwd
	}
	dir, err = c.confine(dir)
	if err != nil {
		return sdk.CreateTerminalResponse{}, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return sdk.CreateTerminalResponse{}, sdk.NewInvalidParams(map[string]string{"cwd": "not a directory"})
	}
	line := commandLine(req.Command, req.Args)
	ans := c.b.ev.Ask(ctx, adapter.Ask{
		Tool: adapter.Tool{ID: "terminal", Name: "execute", Title: "Run " + line,
			Args: map[string]any{"command": line, "cwd": dir}},
		Options: []adapter.Option{{ID: "allow", Name: "Allow", Kind: adapter.AllowOnce}, {ID: "deny", Name: "Deny", Kind: adapter.RejectOnce}},
	})
	if ans.Cancelled || ans.OptionID != "allow" {
		return sdk.CreateTerminalResponse{}, &sdk.RequestError{Code: -32000, Message: "permission denied"}
	}

	limit := maxTerminalOutput
	if req.OutputByteLimit != nil && *req.OutputByteLimit >= 0 && *req.OutputByteLimit < limit {
		limit = *req.OutputByteLimit
	}
	env := c.b.opts.Env
	if env == nil {
		env = os.Environ()
	}
	env = append([]string(nil), env...)
	for _, v := range req.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	t := &terminal{done: make(chan struct{}), limit: limit}
	cmd := exec.Command(req.Command, req.Args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, t, t
	cmd.WaitDelay = terminalWaitDelay
	// No Setpgid: the command stays in the adapter's process group, so
	// the daemon's group signals reach it; Pdeathsig kills it with us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	t.cmd = cmd
	if err := cmd.Start(); err != nil {
		return sdk.CreateTerminalResponse{}, sdk.NewInternalError(map[string]string{"error": fmt.Sprint(errors.Unwrap(err))})
	}
	id, err := c.b.terms.add(t)
	if err != nil {
		_ = cmd.Process.Kill()
		t.wait()
		return sdk.CreateTerminalResponse{}, sdk.NewInternalError(map[string]string{"error": err.Error()})
	}
	return sdk.CreateTerminalResponse{TerminalId: id}, nil
}

// TerminalOutput implements terminal/output: the output so far, whether
// its start was cut, and the exit status once the command exited.
func (c *client) TerminalOutput(_ context.Context, req sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	defer end()
	t, err := c.b.terms.get(req.TerminalId)
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	exited := t.exited() // before the output: exited means all of it is in
	out, trunc := t.output()
	res := sdk.TerminalOutputResponse{Output: out, Truncated: trunc}
	if exited {
		st := t.status
		res.ExitStatus = &st
	}
	return res, nil
}

// WaitForTerminalExit implements terminal/wait_for_exit.
func (c *client) WaitForTerminalExit(ctx context.Context, req sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, err
	}
	defer end()
	t, err := c.b.terms.get(req.TerminalId)
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
		return sdk.WaitForTerminalExitResponse{ExitCode: t.status.ExitCode, Signal: t.status.Signal}, nil
	case <-ctx.Done():
		return sdk.WaitForTerminalExitResponse{}, ctx.Err()
	}
}

// KillTerminal implements terminal/kill: the process ends, the terminal
// stays (its output and exit status can still be read) until released.
func (c *client) KillTerminal(_ context.Context, req sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.KillTerminalResponse{}, err
	}
	defer end()
	t, err := c.b.terms.get(req.TerminalId)
	if err != nil {
		return sdk.KillTerminalResponse{}, err
	}
	t.kill()
	return sdk.KillTerminalResponse{}, nil
}

// ReleaseTerminal implements terminal/release: a running command is
// killed (and waited for), and the id is forgotten.
func (c *client) ReleaseTerminal(_ context.Context, req sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.ReleaseTerminalResponse{}, err
	}
	defer end()
	t, err := c.b.terms.remove(req.TerminalId)
	if err != nil {
		return sdk.ReleaseTerminalResponse{}, err
	}
	t.kill()
	<-t.done
	return sdk.ReleaseTerminalResponse{}, nil
}
