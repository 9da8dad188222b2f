//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// The test binary doubles as a helper program: `<test binary> faults-helper
// <name> args…` runs one of the helpers below instead of the tests (see
// TestMain). A helper is what a fault needs that no stock tool does
// portably: a runtime that corrupts its own output.
const helperArg = "faults-helper"

// Helper names.
const (
	// helperRuntimeProxy: runtime-proxy <shardd> is a runtime command:
	// it runs `<shardd> agent --headless` and relays its stdin and stdout
	// line by line, corrupting them on cue (see runtimeProxy).
	helperRuntimeProxy = "runtime-proxy"
)

// Cues for the runtime proxy. A command line from the daemon (a prompt)
// that contains one of these makes the proxy act before forwarding it.
const (
	// cueGarbage: write garbageLines to stdout, then forward the command.
	cueGarbage = "faults:garbage"
	// cueTruncateExit: write half a record without its newline and exit
	// with truncateExitCode, killing the real runtime.
	cueTruncateExit  = "faults:truncate-exit"
	truncateExitCode = 3
	// modeFile in the agent's cwd selects a startup mode: modeGarbageStart
	// writes garbage and never says hello.
	modeFile         = "faults-runtime-mode"
	modeGarbageStart = "garbage-start"
)

// oversizedRuntimeLine is the size of the one line over the daemon's 32 MiB
// record limit that cueGarbage writes.
const oversizedRuntimeLine = 32<<20 + 1024

// garbageLines are records no runtime may write: not JSON, truncated JSON
// (with and without a readable type), JSON that is not an object, an object
// without a type, binary bytes, an answer to a command nobody sent.
var garbageLines = []string{
	"not json at all",
	`{"type":"message_delta","message_id":"m-garbage","block_index":0,"kind":"text","text_delta":"trunc`,
	`{"type":"status","status":"idle"`,
	`{"type":123}`,
	`{}`,
	`[1,2,3]`,
	`"just a string"`,
	`null`,
	"\x00\xff\xfe binary \x01\x02 garbage \xc3\x28",
	`{"no_type":true}`,
	`{"type":"response","id":"d-999999","command":"prompt","success":true}`,
}

func runHelper(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "faults-helper: no helper named")
		return 2
	}
	switch args[0] {
	case helperRuntimeProxy:
		return runtimeProxy(args[1:])
	}
	fmt.Fprintf(os.Stderr, "faults-helper: unknown helper %q\n", args[0])
	return 2
}

// runtimeProxy runs the real runtime (args[0] agent --headless) and sits
// between it and the daemon. Started in an agent directory holding modeFile
// with modeGarbageStart, it never starts the runtime: it writes garbage and
// waits for stdin to close.
func runtimeProxy(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "runtime-proxy: want <shardd>")
		return 2
	}
	out := &lockedWriter{w: os.Stdout}
	if mode, _ := os.ReadFile(modeFile); strings.TrimSpace(string(mode)) == modeGarbageStart {
		for _, l := range garbageLines {
			out.line([]byte(l))
		}
		_, _ = io.Copy(io.Discard, os.Stdin) // until the daemon gives up on us
		return 0
	}

	child := exec.Command(args[0], "agent", "--headless")
	child.Stderr = os.Stderr
	// Same process group as the proxy (the daemon's group for this
	// runtime); it dies with the proxy.
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := child.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runtime-proxy:", err)
		return 1
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runtime-proxy:", err)
		return 1
	}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "runtime-proxy:", err)
		return 1
	}
	relayed := make(chan struct{})
	go func() { // runtime → daemon
		defer close(relayed)
		br := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				out.line(bytes.TrimSuffix(line, []byte("\n")))
			}
			if err != nil {
				return
			}
		}
	}()
	br := bufio.NewReaderSize(os.Stdin, 64<<10)
	for { // daemon → runtime
		line, err := br.ReadBytes('\n')
		switch {
		case bytes.Contains(line, []byte(cueTruncateExit)):
			out.raw([]byte(`{"type":"message_delta","message_id":"m-cut","kind":"text","text_delta":"cut off mid-rec`))
			_ = child.Process.Kill()
			return truncateExitCode
		case bytes.Contains(line, []byte(cueGarbage)):
			for _, l := range garbageLines {
				out.line([]byte(l))
			}
			out.line(bytes.Repeat([]byte("x"), oversizedRuntimeLine))
		}
		if len(line) > 0 {
			if _, werr := stdin.Write(line); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	stdin.Close()
	<-relayed
	err = child.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

// lockedWriter writes whole lines to w from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) line(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(append([]byte(nil), b...), '\n'))
}

func (l *lockedWriter) raw(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(b)
}
